package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileRefused are the corpus files kubevirt config and operator values
// refuse, and what the refusal names (the host, the field); "" where only
// that a report is refused is checked (every string of it is hostile).
var hostileRefused = map[string][]string{
	"refused-resource-name.json": {`"hgx-node-01"`, "gpus[0].resourceName"},
	"refused-device-id.json":     {`"hgx-node-01"`, "gpus[1].deviceID"},
	"refused-mdev-name.json":     {`"vgpu-mdev"`, "gpus[0].vgpu.types[1].name"},
	"refused-host-name.json":     {`"vgpu-mdev\nmetadata:`, "name"},
	"terminal.json":              {},
	"markup.json":                {},
	"bidi.json":                  {},
	"yaml-everywhere.json":       {},
	"huge.json":                  {},
	"enums.json":                 {"mode"},
}

// kubevirt config and operator values emit, for a report whose host
// strings reach only their notes, the document they emit for the benign
// report: the same keys, one comment line per note; a report with a value
// that is not what it can be is refused, naming the host and the field,
// in a message safe for the terminal.
func TestHostileReportsKubeVirtAndOperator(t *testing.T) {
	benign := filepath.Join("testdata", "hostile", "benign.json")
	cmds := [][]string{{"kubevirt", "config"}, {"operator", "values"}}
	for _, c := range cmds {
		for _, format := range []string{"yaml", "json"} {
			args := append(slices.Clone(c), "--allow-partial", "-o", format, "--from-report")
			wantOut, stderr, code := gpuprep(t, append(args, benign)...)
			require.Equal(t, 0, code, stderr)
			for _, file := range hostileFiles(t) {
				name := filepath.Base(file)
				out, stderr, code := gpuprep(t, append(args, file)...)
				what := strings.Join(c, " ") + " -o " + format + " " + name
				terminalSafe(t, what+" stderr", stderr)
				if names, refused := hostileRefused[name]; refused {
					require.Equal(t, 2, code, "%s: %s", what, stderr)
					require.Empty(t, out, what)
					require.Contains(t, stderr, "report refused", what)
					for _, n := range names {
						require.Contains(t, stderr, strings.ReplaceAll(n, "\n", `\n`), what)
					}
					continue
				}
				require.Equal(t, 0, code, "%s: %s", what, stderr)
				terminalSafe(t, what, out)
				if format == "json" {
					require.Equal(t, jsonKeys(t, wantOut), jsonKeys(t, out), what)
					continue
				}
				require.Equal(t, yamlKeys(t, wantOut), yamlKeys(t, out), what)
				require.Equal(t, strings.Count(wantOut, "\n#"), strings.Count(out, "\n#"), "%s: one comment line per note", what)
				require.Equal(t, strings.Count(wantOut, "\n"), strings.Count(out, "\n"), "%s: lines", what)
			}
		}
	}
}
