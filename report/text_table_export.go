package report

import (
	"bufio"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Table writes head and rows (each as many cells as head) laid out as the
// fleet table is (table): columns within width, the last column's free
// text wrapped under itself, or, where the other columns leave it less
// than minLast cells or than its longest word (a word is never broken in
// columns), each row a paragraph naming its fields. No line is
// wider than width (at least minWidth). For other commands' text tables
// (gpuprep checks), with TermWidth.
func Table(w io.Writer, width int, head []string, rows [][]string) error {
	t := table{width: max(width, minWidth)}
	t.measure(head...)
	for _, r := range rows {
		t.measure(r...)
		if len(r) > 0 {
			for _, f := range strings.Split(r[len(r)-1], " ") { // not Fields: a no-break space joins
				t.word = max(t.word, lipgloss.Width(f))
			}
		}
	}
	bw := bufio.NewWriter(w)
	t.writeHead(bw, head...)
	for _, r := range rows {
		t.write(bw, r...)
	}
	return bw.Flush()
}

// Paragraph writes s wrapped into width columns (at least minWidth), its
// lines after the first indented by indent blanks.
func Paragraph(w io.Writer, s string, indent, width int) error {
	var b strings.Builder
	para(&b, s, indent, max(width, minWidth))
	_, err := io.WriteString(w, b.String())
	return err
}
