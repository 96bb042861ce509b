package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A command page's JSON field table ("| field | meaning |") names every
// field its document can hold, as docs/schema has it from the code: each
// property of the object documented (the document, or one of its parts),
// and each property of those that are objects, either as a row of its own
// (`findings[]`, `gpus[].vgpu`, `vgpu.types[]`) or in the backquotes of its
// parent's row (`facts`, `facts.driver` in the row of `findings[]`). Names
// that share a row (`gpus[]`, `nvswitches[]`) share what is said of either.
// A field the code emits and the page does not name fails here.
var jsonFieldPages = []struct {
	page, kind string
	def        string // "": the document itself; else the $defs entry the table is about
	prefix     string // the name the table gives def (vgpu.md: `vgpu.…`)
	depth      int    // levels of properties that must be named
	elsewhere  string // a field whose parts another page's table names
}{
	{page: "check.md", kind: "ReadinessReport", depth: 3, elsewhere: "gpus.vgpu"},
	{page: "vgpu.md", kind: "VGPUTypes", def: "VGPU", prefix: "vgpu", depth: 2},
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// fieldTable is the names a page's field table documents, as dotted paths
// without list brackets: "findings", "findings.facts", "gpus.vgpu"; and
// alias, the first name of each row that names more than one.
func fieldTable(t *testing.T, page string) (names map[string]bool, alias map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../docs/commands", page))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| field | meaning |\n")
	require.True(t, ok, "%s: no field table", page)
	names, alias = map[string]bool{}, map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 4 {
			break
		}
		if strings.Trim(cells[1], " -") == "" {
			continue // the |---| line
		}
		var keys []string
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			k := strings.ReplaceAll(m[1], "[]", "")
			keys = append(keys, k)
			names[k] = true
			alias[k] = keys[0]
		}
		meaning := strings.Join(cells[2:len(cells)-1], "|")
		for _, m := range backquoted.FindAllStringSubmatch(meaning, -1) {
			for _, w := range strings.FieldsFunc(m[1], func(r rune) bool { return r == '/' || r == ' ' || r == ',' }) {
				for _, k := range keys {
					names[k+"."+strings.ReplaceAll(w, "[]", "")] = true
				}
			}
		}
	}
	return names, alias
}

// named reports whether path, or path with its first name for the first
// name of its row, is in names.
func named(names map[string]bool, alias map[string]string, path string) bool {
	first, rest, _ := strings.Cut(path, ".")
	return names[path] || rest != "" && names[alias[first]+"."+rest] || rest == "" && names[alias[first]]
}

// schemaFields is every property path of the schema node s to depth.
func schemaFields(defs map[string]any, s map[string]any, prefix string, depth int) []string {
	if depth == 0 {
		return nil
	}
	var out []string
	props, _ := object(defs, s)["properties"].(map[string]any)
	for name, p := range props {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out = append(out, path)
		out = append(out, schemaFields(defs, p.(map[string]any), path, depth-1)...)
	}
	return out
}

// object is the object schema s stands for: through a $ref, a list's
// items, a map's values and a nullable's anyOf.
func object(defs map[string]any, s map[string]any) map[string]any {
	for {
		switch {
		case s["$ref"] != nil:
			s = defs[strings.TrimPrefix(s["$ref"].(string), "#/$defs/")].(map[string]any)
		case s["items"] != nil:
			s = s["items"].(map[string]any)
		case s["additionalProperties"] != nil && s["properties"] == nil:
			a, ok := s["additionalProperties"].(map[string]any)
			if !ok {
				return s
			}
			s = a
		case s["anyOf"] != nil:
			s = s["anyOf"].([]any)[0].(map[string]any)
		default:
			return s
		}
	}
}

func TestDocsJSONFieldTablesNameEveryField(t *testing.T) {
	for _, p := range jsonFieldPages {
		b, err := os.ReadFile(filepath.Join(schemaDir, p.kind+".json"))
		require.NoError(t, err)
		var s map[string]any
		require.NoError(t, json.Unmarshal(b, &s))
		defs := s["$defs"].(map[string]any)
		if p.def != "" {
			s = defs[p.def].(map[string]any)
		}
		documented, alias := fieldTable(t, p.page)
		var missing []string
		for _, f := range schemaFields(defs, s, p.prefix, p.depth) {
			first, rest, _ := strings.Cut(f, ".")
			if p.elsewhere != "" && strings.HasPrefix(alias[first]+"."+rest, p.elsewhere+".") {
				continue
			}
			if !named(documented, alias, f) {
				missing = append(missing, f)
			}
		}
		slices.Sort(missing)
		require.Empty(t, missing, "docs/commands/%s: the field table does not name these fields of %s (docs/schema/%s.json)", p.page, p.kind, p.kind)
	}
}
