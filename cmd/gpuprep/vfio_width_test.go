package main

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestVFIOStatusFitsTheWidth: vfio status's text (hgx-h200, vfio-bound,
// consumer-shared-group) at every width 40..200 (COLUMNS) has no line wider
// but a word longer than a line alone on its line, and says the same words
// as at 400 columns. Before, it reached 95 columns at COLUMNS=80.
func TestVFIOStatusFitsTheWidth(t *testing.T) {
	for _, name := range []string{"hgx-h200", "vfio-bound", "consumer-shared-group"} {
		t.Run(name, func(t *testing.T) {
			root := fixtureRoot(t, name)
			t.Setenv("COLUMNS", "400")
			wide, stderr, code := gpuprep(t, "vfio", "status", "--root", root)
			require.Equal(t, 0, code, stderr)
			longest := 0
			for _, l := range strings.Split(wide, "\n") {
				longest = max(longest, utf8.RuneCountInString(l))
			}
			t.Logf("longest line at 400 columns: %d", longest)
			for width := 40; width <= 200; width++ {
				t.Setenv("COLUMNS", strconv.Itoa(width))
				out, _, _ := gpuprep(t, "vfio", "status", "--root", root)
				requireFits(t, out, width, nil)
				require.Equal(t, strings.Fields(wide), strings.Fields(out), "width %d", width)
				if width >= longest {
					require.Equal(t, wide, out, "width %d", width)
				}
			}
		})
	}
}
