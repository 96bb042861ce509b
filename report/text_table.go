package report

import (
	"bufio"
	"unicode/utf8"
)

// table lays rows out in columns as text/tabwriter does with minwidth 0,
// tabwidth 0, padding 2, padchar ' ' and no flags, for rows of the same
// number of cells: each cell but a row's last padded with spaces to its
// column's widest cell (in characters) plus two. It takes two passes,
// measure every row, then write every row, so that no row is kept: a
// fleet's table is laid out without holding its hosts.
type table struct{ widths []int }

// measure counts a row's cells in the columns' widths.
func (t *table) measure(cells ...string) {
	for j, c := range cells[:len(cells)-1] {
		w := utf8.RuneCountInString(c) + 2
		if j == len(t.widths) {
			t.widths = append(t.widths, w)
		} else if w > t.widths[j] {
			t.widths[j] = w
		}
	}
}

// write writes a row measured before, and its newline.
func (t *table) write(w *bufio.Writer, cells ...string) {
	for j, c := range cells {
		w.WriteString(c)
		if j < len(cells)-1 {
			for n := t.widths[j] - utf8.RuneCountInString(c); n > 0; n-- {
				w.WriteByte(' ')
			}
		}
	}
	w.WriteByte('\n')
}
