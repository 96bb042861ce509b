package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// A page's JSON example introduced by "An excerpt of `gpuprep ARGS`" is
// that command's output with list items left out: gpuprep is run and every
// field shown must be in its output with the value shown (each list item
// shown, an item of the output's list). A --root /tmp/NAME is the example
// node NAME, made by the fixture builder.
var excerptIntro = regexp.MustCompile("An excerpt of `gpuprep ([^`]+)`[^`]*(?:`[^`]*`[^`]*)*?```json\n((?s:.*?))\n```")

// jsonCovers reports whether got has every field of want with its value;
// lists: every item of want covered by some item of got.
func jsonCovers(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !jsonCovers(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			if !slices.ContainsFunc(g, func(gv any) bool { return jsonCovers(wv, gv) }) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

func TestDocsJSONExcerpts(t *testing.T) {
	t.Chdir("../..")
	pages, err := filepath.Glob("docs/commands/*.md")
	require.NoError(t, err)
	seen := 0
	for _, p := range pages {
		body, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range excerptIntro.FindAllStringSubmatch(string(body), -1) {
			seen++
			args := strings.Fields(m[1])
			for i, a := range args {
				if i > 0 && args[i-1] == "--root" && strings.HasPrefix(a, "/tmp/") {
					dir := filepath.Join(t.TempDir(), filepath.Base(a))
					require.NoError(t, fixture.Build(filepath.Base(a), dir), p)
					args[i] = dir
				}
			}
			out, errOut, _ := gpuprep(t, args...)
			var want, got any
			require.NoError(t, json.Unmarshal([]byte(m[2]), &want), "%s: the excerpt of gpuprep %s", p, m[1])
			require.NoError(t, json.Unmarshal([]byte(out), &got), "%s: gpuprep %s: %s", p, m[1], errOut)
			require.True(t, jsonCovers(want, got), "%s: the excerpt of gpuprep %s is not what it prints:\n%s", p, m[1], out)
		}
	}
	require.GreaterOrEqual(t, seen, 2, "the JSON excerpts of check.md and vgpu.md")
}
