package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// requireFits fails where a line of out is wider than width, except a line
// that is one unbreakable token under its indent (a path, device address or
// kernel argument longer than the room) or one of verbatim (shown as a file
// has it).
func requireFits(t *testing.T, out string, width int, verbatim map[string]bool) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if utf8.RuneCountInString(l) <= width || verbatim[l] {
			continue
		}
		require.Len(t, strings.Fields(l), 1, "width %d, line %d is %d wide: %q", width, i+1, utf8.RuneCountInString(l), l)
	}
}

// TestPlanTextFitsTheWidth: plan's text at every width 40..200 (COLUMNS)
// has no line wider, but for a word longer than a line alone on its line
// and the files' diffs (as the files have them); and it says the same words
// as at 400 columns. Before, hgx-h200's vm-passthrough plan reached 328
// columns at COLUMNS=80 (the vfio-bind title, the NVSwitch note).
func TestPlanTextFitsTheWidth(t *testing.T) {
	for _, sc := range []struct{ root, mode string }{
		{"hgx-h200", "vm-passthrough"},
		{"hgx-h200", "container"},
		{"boot-grub-debian", "vm-passthrough"},
		{"amd-iommu-inactive", "vm-passthrough"},
	} {
		t.Run(sc.root+"/"+sc.mode, func(t *testing.T) {
			root := fixtureRoot(t, sc.root)
			js, stderr, _ := gpuprep(t, "plan", "--root", root, "--mode", sc.mode, "-o", "json")
			var p struct {
				Steps []struct {
					Files []struct{ Diff string }
				}
			}
			require.NoError(t, json.Unmarshal([]byte(js), &p), stderr)
			verbatim := map[string]bool{}
			for _, s := range p.Steps {
				for _, f := range s.Files {
					for _, l := range strings.Split(f.Diff, "\n") {
						verbatim["   "+l] = true
					}
				}
			}
			t.Setenv("COLUMNS", "400")
			wide, stderr, code := gpuprep(t, "plan", "--root", root, "--mode", sc.mode)
			require.Contains(t, []int{0, 1}, code, stderr)
			longest := 0
			for _, l := range strings.Split(wide, "\n") {
				if !verbatim[l] {
					longest = max(longest, utf8.RuneCountInString(l))
				}
			}
			t.Logf("longest line but a diff's at 400 columns: %d", longest)
			for width := 40; width <= 200; width++ {
				t.Setenv("COLUMNS", strconv.Itoa(width))
				out, _, _ := gpuprep(t, "plan", "--root", root, "--mode", sc.mode)
				requireFits(t, out, width, verbatim)
				require.Equal(t, strings.Fields(wide), strings.Fields(out), "width %d: the same words as at 400", width)
			}
		})
	}
}
