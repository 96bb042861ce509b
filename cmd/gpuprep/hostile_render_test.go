package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

// Every hostile report renders in every format as the benign one does:
// nothing a terminal acts on in text and Markdown, the same lines (no host
// string adds one), the same JSON keys, the same JUnit and HTML elements
// and attributes, no raw HTML in Markdown.
func TestHostileReportsRenderSafely(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	benign := filepath.Join("testdata", "hostile", "benign.json")
	want := map[string]string{}
	for _, f := range report.Formats {
		out, stderr, code := gpuprep(t, "report", "render", benign, "-o", f)
		require.Equal(t, 0, code, stderr)
		want[f] = out
	}
	for _, file := range hostileFiles(t) {
		name := filepath.Base(file)
		for _, f := range report.Formats {
			out, stderr, code := gpuprep(t, "report", "render", file, "-o", f)
			require.Equal(t, 0, code, "%s %s: %s", name, f, stderr)
			shape := hostileShape(name)
			switch f {
			case "text", "markdown":
				terminalSafe(t, name+" "+f, out)
				for _, l := range strings.Split(out, "\n") {
					require.False(t, strings.HasPrefix(strings.TrimSpace(l), "ALL HOSTS READY"), "%s %s: a line of its own: %q", name, f, l)
					require.False(t, strings.HasPrefix(strings.TrimSpace(l), "# ALL HOSTS READY"), "%s %s: a heading of its own: %q", name, f, l)
				}
				if f == "markdown" {
					require.Equal(t, htmlTags(want[f]), htmlTags(out), "%s: raw HTML in Markdown", name)
				}
				if shape {
					require.Equal(t, strings.Count(want[f], "\n"), strings.Count(out, "\n"), "%s: lines of %s", name, f)
				}
			case "json":
				require.Equal(t, jsonKeys(t, want[f]), jsonKeys(t, out), name)
			case "junit":
				if shape {
					require.Equal(t, xmlSkeleton(t, want[f]), xmlSkeleton(t, out), name)
				} else {
					require.Subset(t, xmlSkeleton(t, want[f]), xmlSkeleton(t, out), name)
				}
			case "html":
				if shape {
					require.Equal(t, htmlSkeleton(t, want[f]), htmlSkeleton(t, out), name)
				} else {
					require.Subset(t, htmlSkeleton(t, want[f]), htmlSkeleton(t, out), name)
				}
			}
		}
	}
}
