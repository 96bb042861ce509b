package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/stretchr/testify/require"
)

// The tests of this package read what the text report says, not how it is
// laid out: they get it unwrapped (a report written to no terminal wraps
// at $COLUMNS). The layout's own tests (the goldens, TestCheckText*) set
// COLUMNS themselves.
func init() {
	if err := os.Setenv("COLUMNS", "100000"); err != nil {
		panic(err)
	}
}

// check on the 8-GPU HGX node, at 80 and 40 columns: no line is wider, the
// verdict comes first, the eight GPUs' identical findings are one, and -v
// lists the passes.
func TestCheckTextFitsColumnsVerdictFirst(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	for _, cols := range []int{80, 40} {
		t.Setenv("COLUMNS", strconv.Itoa(cols))
		out, _, _ := gpuprep(t, "check", "--root", root)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		for _, l := range lines {
			require.LessOrEqual(t, lipgloss.Width(l), cols, "%q\n%s", l, out)
		}
		require.Contains(t, strings.Join(lines[:10], "\n"), "vm-passthrough  NOT READY", out)
		require.Equal(t, 1, strings.Count(out, "✗ vfio.binding"), out)
		require.Contains(t, strings.Join(strings.Fields(out), " "), "8 GPUs (0000:13:00.0, 0000:23:00.0,")
		require.Contains(t, out, "✓ 43 findings passed (-v lists them)\n")
		require.NotContains(t, out, "gpu.present")

		verbose, _, _ := gpuprep(t, "check", "--root", root, "-v")
		require.Contains(t, verbose, "✓ gpu.present")
		require.NotContains(t, verbose, "-v lists them")
	}
}

// report render lays out a saved host report as check does, -v too.
func TestReportRenderTextVerbose(t *testing.T) {
	t.Setenv("COLUMNS", "80")
	root := fixtureRoot(t, "vfio-bound")
	js, _, _ := gpuprep(t, "check", "--root", root, "-o", "json")
	p := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, os.WriteFile(p, []byte(js), 0o600))
	want, _, _ := gpuprep(t, "check", "--root", root)
	out, errs, code := gpuprep(t, "report", "render", p)
	require.Equal(t, 0, code, errs)
	require.Equal(t, want, out)
	require.Contains(t, out, "✓ 18 findings passed (-v lists them)")
	want, _, _ = gpuprep(t, "check", "--root", root, "--verbose")
	out, _, _ = gpuprep(t, "report", "render", "--verbose", p)
	require.Equal(t, want, out)
	require.Contains(t, out, "✓ gpu.present")
}
