package report

import (
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Hanging writes lead and then s wrapped into width columns (at least
// minWidth), its lines after the first indented by indent blanks. Unlike
// the check report's wrap, it never breaks a word: a path, a device
// address or a kernel argument longer than the room left goes on a line of
// its own, the only kind of line that may exceed width. Blanks between
// words are collapsed. For plan, grub show and vfio status text.
func Hanging(w io.Writer, lead, s string, indent, width int) error {
	var b strings.Builder
	for _, l := range WrapWords(lead, s, indent, width) {
		b.WriteString(l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WrapWords is Hanging's lines, without their newlines.
func WrapWords(lead, s string, indent, width int) []string {
	width = max(width, minWidth)
	pad := strings.Repeat(" ", indent)
	var lines []string
	line, lw, empty := lead, lipgloss.Width(lead), true
	for _, word := range strings.Fields(s) {
		ww := lipgloss.Width(word)
		if !empty && lw+1+ww > width {
			lines = append(lines, line)
			line, lw, empty = pad, indent, true
		}
		if empty && lw+ww > width && strings.TrimSpace(line) != "" {
			// the lead leaves no room for this word: the word starts the next line
			lines = append(lines, strings.TrimRight(line, " "))
			line, lw = pad, indent
		}
		if !empty {
			line, lw = line+" ", lw+1
		}
		line, lw, empty = line+word, lw+ww, false
	}
	return append(lines, strings.TrimRight(line, " "))
}
