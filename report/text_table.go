package report

import (
	"bufio"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// table lays rows of the same number of cells out in columns within a
// width, in two passes: measure every row, then write every row, so that
// no row is kept (a fleet's table is laid out without holding its hosts).
// Each cell but a row's last is padded with spaces to its column's widest
// cell (in terminal cells: a wide character counts two) plus two, as
// text/tabwriter does with padding 2; the last cell, free text, is wrapped
// into the columns left, its lines after the first under its column. Where
// the other columns leave the last too little room (minLast), each row is
// a paragraph of its own instead (see stacked). No line is wider than the
// width.
type table struct {
	widths []int // every column's widest cell plus two, the last's without
	width  int
	head   []string
	// word, where Table measures it, is the last column's longest word: in
	// columns, the last column has at least its room, so that no word (a
	// path, an argument) is broken there.
	word int
}

// minLast is the least room the last column is wrapped into; with less,
// the rows are stacked.
const minLast = 16

// measure counts a row's cells in the columns' widths.
func (t *table) measure(cells ...string) {
	for j, c := range cells {
		w := lipgloss.Width(c)
		if j < len(cells)-1 {
			w += 2
		}
		if j == len(t.widths) {
			t.widths = append(t.widths, w)
		} else if w > t.widths[j] {
			t.widths[j] = w
		}
	}
}

// fixed is the width of every column but the last.
func (t *table) fixed() int {
	n := 0
	for _, w := range t.widths[:len(t.widths)-1] {
		n += w
	}
	return n
}

// columns reports whether the rows are laid out in columns: the last
// column has its widest cell's room, or at least minLast.
func (t *table) columns() bool {
	return t.width-t.fixed() >= max(min(t.widths[len(t.widths)-1], minLast), t.word)
}

// writeHead writes the head row (in columns only: stacked, every row names
// its fields).
func (t *table) writeHead(w *bufio.Writer, head ...string) {
	t.head = head
	if t.columns() {
		t.write(w, head...)
	}
}

// write writes a row measured before.
func (t *table) write(w *bufio.Writer, cells ...string) {
	if !t.columns() {
		t.stacked(w, cells)
		return
	}
	var b strings.Builder
	for j, c := range cells[:len(cells)-1] {
		b.WriteString(c + strings.Repeat(" ", t.widths[j]-lipgloss.Width(c)))
	}
	last := cells[len(cells)-1]
	if last == "" {
		w.WriteString(strings.TrimRight(b.String(), " ") + "\n")
		return
	}
	lead := b.String()
	for i, l := range wrap(last, t.width-t.fixed()) {
		if i > 0 {
			lead = strings.Repeat(" ", t.fixed())
		}
		w.WriteString(lead + l + "\n")
	}
}

// stacked writes a row as a paragraph, its lines after the first indented:
// the first cell, then the others named by their column's head ("a:
// address 10.0.0.1:22, status evaluated, …, blockers / error:
// iommu.kernel"); cells that are empty or "-" are left out.
func (t *table) stacked(w *bufio.Writer, cells []string) {
	var parts []string
	n := len(cells) - 1
	for j, c := range cells[1:n] {
		if c != "" && c != "-" {
			parts = append(parts, strings.ToLower(t.head[j+1])+" "+c)
		}
	}
	if c := cells[n]; c != "" && c != "-" {
		parts = append(parts, strings.ToLower(t.head[n])+": "+c)
	}
	s := cells[0]
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	var b strings.Builder
	para(&b, s, 2, t.width)
	w.WriteString(b.String())
}
