package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// checksDoc is docs/checks.md, from cmd/gpuprep.
var checksDoc = filepath.Join("..", "..", "docs", "checks.md")

// docs/checks.md is what `gpuprep checks -o markdown` writes from the
// registry: a stale copy fails; -update rewrites it.
func TestChecksDocUpToDate(t *testing.T) {
	out, stderr, code := gpuprep(t, "checks", "-o", "markdown")
	require.Equal(t, 0, code, stderr)
	if *update {
		require.NoError(t, os.WriteFile(checksDoc, []byte(out), 0o644))
	}
	want, err := os.ReadFile(checksDoc)
	require.NoError(t, err, "missing docs/checks.md: go test ./cmd/gpuprep -run TestChecksDocUpToDate -update")
	require.Equal(t, string(want), out, "docs/checks.md is stale: go test ./cmd/gpuprep -run TestChecksDocUpToDate -update")
	for _, c := range preflight.All() {
		require.Contains(t, out, "\n## `"+c.ID+"`\n")
		require.Contains(t, out, c.Doc.Verifies)
		require.Contains(t, out, "(#"+mdAnchor(c.ID)+")")
	}
}

// gpuprep checks shows each check's metadata: the steps that change it in
// the table, its description for a named ID, all of it in JSON.
func TestChecksShowsMetadata(t *testing.T) {
	t.Setenv("COLUMNS", "200") // wide enough for the table's columns
	out, stderr, code := gpuprep(t, "checks")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "CHANGED BY")
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "vgpu.types ") {
			line = l
		}
	}
	require.Contains(t, line, "vgpu-install,vgpu-devices", out)

	out, stderr, code = gpuprep(t, "checks", "iommu.kernel")
	require.Equal(t, 0, code, stderr)
	c, _ := preflight.Lookup("iommu.kernel")
	require.Contains(t, out, "verifies:   "+c.Doc.Verifies)
	require.Contains(t, out, "changed by: kernel-args, reboot (only by rebooting into new kernel arguments)")
	require.NotContains(t, out, "gpu.present")

	_, stderr, code = gpuprep(t, "checks", "no.such")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "no.such: no such check")

	out, stderr, code = gpuprep(t, "checks", "-o", "json")
	require.Equal(t, 0, code, stderr)
	type row struct {
		ID         string
		Doc        preflight.Doc
		ChangedBy  []string
		BeyondPlan preflight.Beyond
	}
	var rows []row
	if json.Unmarshal([]byte(out), &rows) != nil {
		// the entries inside a document object ({apiVersion, kind, checks})
		var doc struct{ Checks []row }
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		rows = doc.Checks
	}
	require.Len(t, rows, len(preflight.All()))
	by := map[string]int{}
	for i, r := range rows {
		by[r.ID] = i
		require.NotEmpty(t, r.Doc.Verifies, r.ID)
	}
	require.Equal(t, []string{"vgpu-install"}, rows[by["vgpu.manager"]].ChangedBy)
	require.Equal(t, preflight.BeyondPlan, rows[by["gpu.present"]].BeyondPlan)
	require.Equal(t, preflight.BeyondUnlessReboot, rows[by["iommu.groups"]].BeyondPlan)
}

// gpuprep checks is wrapped to the terminal's width, never wider (#21: its
// table reached 182 columns on an 80-column terminal): in columns where
// they fit, else a paragraph per check naming its fields; every check's
// ID starts a line, with its modes, the steps that change it and its
// title, at every width from 40 (narrower, only the width is held).
func TestChecksTableFitsTheWidth(t *testing.T) {
	for _, width := range []int{20, 40, 80, 120, 200} {
		t.Setenv("COLUMNS", strconv.Itoa(width))
		out, stderr, code := gpuprep(t, "checks")
		require.Equal(t, 0, code, stderr)
		for i, l := range strings.Split(out, "\n") {
			require.LessOrEqual(t, utf8.RuneCountInString(l), width, "width %d, line %d: %q", width, i+1, l)
		}
		if width < 40 {
			continue // words longer than a line are broken: only the width holds
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, c := range preflight.All() {
			require.Regexp(t, "(?m)^"+regexp.QuoteMeta(c.ID)+"[ :]", out, "width %d", width)
			require.Contains(t, flat, strings.Join(strings.Fields(c.Title), " "), "width %d", width)
		}
		if width >= 200 {
			require.Contains(t, out, "CHANGED BY")
		} else {
			require.Contains(t, flat, "vgpu.types: modes vm-vgpu, changed by vgpu-install,vgpu-devices, checks: ")
		}
	}
}
