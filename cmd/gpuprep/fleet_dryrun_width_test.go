package main

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestFleetDryRunFitsTheWidth: fleet check --dry-run and fleet apply
// --dry-run (internal/fleet/testdata/hosts.ini: six hosts, a jump host, a
// --root with a blank) at every width 40..200 (COLUMNS) have no line wider
// but a word longer than a line alone on its line, say the same words as at
// 400 columns (in columns; else a paragraph per host), and never split an argument ('--root=/srv/roots/a b' whole
// on one line, five times). Before, the tabwriter tables reached 157 (check)
// and 128 (apply) columns at COLUMNS=80 (as wide as at 400).
func TestFleetDryRunFitsTheWidth(t *testing.T) {
	inv := "../../internal/fleet/testdata/hosts.ini"
	for name, args := range map[string][]string{
		"check": {"fleet", "check", "-i", inv, "--ssh-config", "none", "--dry-run"},
		"apply": {"fleet", "apply", "-i", inv, "--ssh-config", "none", "--mode", "vm-passthrough", "--dry-run"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("COLUMNS", "400")
			code, wide, stderr := runCLI(args...)
			require.Equal(t, 0, code, stderr)
			longest := 0
			for _, l := range strings.Split(wide, "\n") {
				longest = max(longest, utf8.RuneCountInString(l))
			}
			t.Logf("longest line at 400 columns: %d", longest)
			for width := 40; width <= 200; width++ {
				t.Setenv("COLUMNS", strconv.Itoa(width))
				code, out, stderr := runCLI(args...)
				require.Equal(t, 0, code, stderr)
				requireFits(t, out, width, nil)
				require.Equal(t, 5, strings.Count(out, "'--root=/srv/roots/a b'"), "width %d:\n%s", width, out)
				if width >= longest {
					require.Equal(t, wide, out, "width %d: the table in columns, as at 400", width)
					continue
				}
				if strings.Contains(out, "GPUPREP ARGS") { // in columns: the same words as at 400
					require.Equal(t, strings.Fields(wide), strings.Fields(out), "width %d", width)
					continue
				}
				for _, h := range []string{"bastion.example", "gpu-a01", "gpu-a02", "gpu-a03", "gpu-a10", "gpu-b01"} {
					require.Regexp(t, "(?m)^(canary: |batch 1: )?(host )?"+h+"[:,]", out, "width %d: a paragraph per host", width)
				}
			}
		})
	}
}
