package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// TestGrubShowFitsTheWidth: grub show's text on every boot-* fixture at
// every width 40..200 (COLUMNS) has no line wider but a word longer than a
// line alone on its line, and every kernel argument of the running and
// configured lines whole. Before, the running line reached 108 columns at
// COLUMNS=80.
func TestGrubShowFitsTheWidth(t *testing.T) {
	for _, name := range fixture.Names() {
		if !strings.HasPrefix(name, "boot-") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			root := fixtureRoot(t, name)
			t.Setenv("COLUMNS", "400")
			wide, stderr, code := gpuprep(t, "grub", "show", "--root", root, "--mode", "vm-passthrough")
			require.Contains(t, []int{0, 1}, code, stderr)
			var args []string
			longest := 0
			for _, l := range strings.Split(wide, "\n") {
				longest = max(longest, utf8.RuneCountInString(l))
				if strings.HasPrefix(l, "running:") || strings.HasPrefix(l, "configured:") {
					args = append(args, strings.Fields(l)[1:]...)
				}
			}
			t.Logf("longest line at 400 columns: %d", longest)
			for width := 40; width <= 200; width++ {
				t.Setenv("COLUMNS", strconv.Itoa(width))
				out, _, _ := gpuprep(t, "grub", "show", "--root", root, "--mode", "vm-passthrough")
				requireFits(t, out, width, nil)
				words := strings.Fields(out)
				for _, a := range args {
					require.True(t, slices.Contains(words, a), "width %d: %q whole:\n%s", width, a, out)
				}
				if width >= longest {
					require.Equal(t, wide, out, "width %d", width)
				}
			}
		})
	}
}
