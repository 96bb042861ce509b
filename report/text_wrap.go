package report

import (
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/mattn/go-isatty"
	"golang.org/x/term"
)

// DefaultWidth is the text report's width where neither the terminal nor
// COLUMNS says one.
const DefaultWidth = 80

// minWidth: narrower than this, the report is laid out for this width (the
// status symbol, the indent and a word need some room).
const minWidth = 20

// TermWidth is the width the text report written to w is wrapped to: the
// terminal's when w is one, else $COLUMNS, else DefaultWidth.
func TermWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		if c, _, err := term.GetSize(int(f.Fd())); err == nil && c > 0 {
			return c
		}
	}
	if c, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && c > 0 {
		return c
	}
	return DefaultWidth
}

// wrap breaks s into lines of at most width cells: lipgloss wraps at word
// boundaries and breaks a word only where it is longer than a line.
// Trailing blanks (lipgloss pads each line to the width) are dropped.
// lipgloss also breaks after any hyphen, which splits flags ("--" /
// "select"), modes and driver names: hyphens are wrapped as non-breaking
// ones (as wide) and put back.
func wrap(s string, width int) []string {
	keep := !strings.ContainsRune(s, nbHyphen)
	if keep {
		s = strings.ReplaceAll(s, "-", string(nbHyphen))
	}
	out := lipgloss.NewStyle().Width(max(width, 1)).Render(s)
	if keep {
		out = strings.ReplaceAll(out, string(nbHyphen), "-")
	}
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return lines
}

// nbHyphen is U+2011 NON-BREAKING HYPHEN.
const nbHyphen = '\u2011'

// hang writes lead and then body wrapped into width columns, each line of
// body after the first indented by indent blanks. Where lead is narrower
// than indent, body starts on lead's line, past the indent; else lead gets
// a line (or lines) of its own. Every line ends in a newline.
func hang(b *strings.Builder, lead, body string, indent, width int) {
	lw := lipgloss.Width(lead)
	pad := strings.Repeat(" ", indent)
	if lw > indent {
		para(b, strings.TrimRight(lead, " "), min(indent, 3), width)
		lead, lw = pad, indent
	}
	if body == "" {
		if strings.TrimSpace(lead) != "" {
			b.WriteString(strings.TrimRight(lead, " ") + "\n")
		}
		return
	}
	for i, l := range wrap(body, width-indent) {
		if i == 0 {
			b.WriteString(lead + strings.Repeat(" ", indent-lw) + l + "\n")
			continue
		}
		b.WriteString(pad + l + "\n")
	}
}

// para writes s wrapped into width columns, its lines after the first
// indented by indent blanks.
func para(b *strings.Builder, s string, indent, width int) {
	for i, l := range wrap(s, width-indent) {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", indent))
		}
		b.WriteString(l + "\n")
	}
}
