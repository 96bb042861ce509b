package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// The README's tour is run as written: every `$ ` line of its console blocks
// is a gpuprep command line (run here, its exit code and the output lines
// shown checked) or a fixture made with go run ./internal/fixture/mkroot.

// tourStep is one `$ ` line of a console block and the output lines below it.
type tourStep struct {
	line string
	want []string
}

func readmeTourSteps(t *testing.T, readme string) []tourStep {
	t.Helper()
	var steps []tourStep
	in := false
	for _, l := range strings.Split(readme, "\n") {
		switch {
		case l == "```console":
			in = true
		case in && l == "```":
			in = false
		case in && strings.HasPrefix(l, "$ "):
			steps = append(steps, tourStep{line: strings.TrimPrefix(l, "$ ")})
		case in:
			require.NotEmpty(t, steps, "output before any command: %q", l)
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
		}
	}
	return steps
}

var tourExit = regexp.MustCompile(`#.*\bexits? (\d+)\b`)

// jqPath applies a jq path filter of the form .a.b[].c to a JSON document,
// as jq -c (or, with raw, jq -r) prints its results.
func jqPath(t *testing.T, doc, filter string, raw bool) []string {
	t.Helper()
	vals := []json.RawMessage{json.RawMessage(doc)}
	rest := filter
	require.True(t, strings.HasPrefix(rest, "."), "jq filter %q", filter)
	for rest != "" && rest != "." {
		var next []json.RawMessage
		switch {
		case strings.HasPrefix(rest, "[]"):
			rest = rest[2:]
			for _, v := range vals {
				var a []json.RawMessage
				require.NoError(t, json.Unmarshal(v, &a), "jq %s", filter)
				next = append(next, a...)
			}
		case strings.HasPrefix(rest, "."):
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			key := rest[:end]
			rest = rest[end:]
			for _, v := range vals {
				var m map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(v, &m), "jq %s", filter)
				val, ok := m[key]
				if !ok {
					val = json.RawMessage("null")
				}
				next = append(next, val)
			}
		default:
			t.Fatalf("jq filter %q: only .key and [] are understood here", filter)
		}
		vals = next
	}
	var out []string
	for _, v := range vals {
		var s string
		if raw && json.Unmarshal(v, &s) == nil {
			out = append(out, s)
			continue
		}
		var b bytes.Buffer
		require.NoError(t, json.Compact(&b, v))
		out = append(out, b.String())
	}
	return out
}

// containsInOrder reports whether every line of want is a line of got, in order.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func TestReadmeTour(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	t.Setenv("HOME", t.TempDir()) // no ~/.ssh/config of whoever runs the test
	body, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	steps := readmeTourSteps(t, string(body))
	require.GreaterOrEqual(t, len(steps), 8, "the tour has lost its commands")
	t.Chdir("../..") // the tour runs in the repository's root
	tmp := t.TempDir()
	dirs := map[string]string{} // a fixture's directory in the README -> here
	for _, st := range steps {
		line := st.line
		comment := ""
		if i := strings.Index(line, " # "); i >= 0 {
			line, comment = strings.TrimSpace(line[:i]), line[i:]
		}
		for from, to := range dirs {
			line = strings.ReplaceAll(line, from, to)
		}
		cmd, pipe, _ := strings.Cut(line, " | ")
		words := shellWords(t, cmd, nil)
		switch {
		case len(words) == 5 && strings.Join(words[:3], " ") == "go run ./internal/fixture/mkroot":
			dir := filepath.Join(tmp, filepath.Base(words[4]))
			require.NoError(t, fixture.Build(words[3], dir), st.line)
			dirs[words[4]] = dir
			require.Empty(t, st.want, st.line)
			continue
		case words[0] != "gpuprep":
			t.Fatalf("README tour: %q is neither gpuprep nor a fixture", st.line)
		}
		out, errOut, code := gpuprep(t, words[1:]...)
		if m := tourExit.FindStringSubmatch(comment); m != nil {
			want, _ := strconv.Atoi(m[1])
			require.Equal(t, want, code, "%s: %s", st.line, errOut)
		} else {
			require.NotEqual(t, exitUsage, code, "%s: %s", st.line, errOut)
		}
		got := strings.Split(out, "\n")
		if pipe != "" {
			jq := shellWords(t, pipe, nil)
			require.Len(t, jq, 3, "%s: the tour pipes only into jq -c|-r FILTER", st.line)
			require.Equal(t, "jq", jq[0], st.line)
			require.Contains(t, []string{"-c", "-r"}, jq[1], st.line)
			got = jqPath(t, out, jq[2], jq[1] == "-r")
		}
		require.True(t, containsInOrder(got, st.want), "%s: the README shows\n%s\nit prints\n%s", st.line, strings.Join(st.want, "\n"), strings.Join(got, "\n"))
	}
}
