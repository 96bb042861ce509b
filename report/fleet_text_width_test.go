package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/stretchr/testify/require"
)

// The fleet text report is wrapped to the width, never wider, at every
// width from the narrowest up (its table in columns where they fit, a
// paragraph per host where they do not), for every kind of fleet report;
// and what a host says is still there: its name whole where the width
// holds it, and its error's first words.
func TestFleetTextFitsTheWidth(t *testing.T) {
	for name, mk := range goldenFleets() {
		for width := minWidth; width <= 160; width++ {
			f := mk()
			var b bytes.Buffer
			require.NoError(t, FleetTextWith(&b, f, TextOptions{Width: width}))
			out := b.String()
			for i, l := range strings.Split(out, "\n") {
				require.LessOrEqual(t, lipgloss.Width(l), width, "%s at %d columns, line %d is wider: %q\n%s", name, width, i+1, l, out)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, h := range f.Hosts {
				if n := Clean(h.Name); lipgloss.Width(n) < width-2 {
					require.Contains(t, out, n, "%s at %d columns", name, width)
				}
				if w := strings.Fields(firstLine(h.Error, 100)); len(w) > 1 && width >= 40 {
					require.Contains(t, flat, w[0]+" "+w[1], "%s at %d columns", name, width)
				}
			}
		}
	}
}

// Below the narrowest width the report is laid out at it.
func TestFleetTextNarrowest(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, FleetTextWith(&b, goldenFleets()["check"](), TextOptions{Width: 3}))
	for _, l := range strings.Split(b.String(), "\n") {
		require.LessOrEqual(t, lipgloss.Width(l), minWidth, l)
	}
}
