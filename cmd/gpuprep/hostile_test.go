package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
	"gopkg.in/yaml.v3"
)

// The hostile-report corpus (testdata/hostile, README.md there) and what
// its tests compare.

// hostileShape are the corpus files whose hostile strings change no
// structure (no status, mode, verdict, outcome or phase is changed): what
// gpuprep renders for them has the lines, elements and keys it renders for
// the benign report.
func hostileShape(name string) bool { return name != "enums.json" }

func hostileFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "hostile", "*.json"))
	require.NoError(t, err)
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "benign.json" })
	require.GreaterOrEqual(t, len(files), 10)
	return files
}

// terminalSafe fails when s holds what a terminal acts on besides the
// newline: C0 and C1 controls, DEL, format characters (bidi controls,
// zero-width and other invisible characters), line separators, bytes that
// are not UTF-8.
func terminalSafe(t *testing.T, what, s string) {
	t.Helper()
	require.True(t, utf8.ValidString(s), "%s: not UTF-8", what)
	for i, r := range s {
		bad := r < 0x20 && r != '\n' || r >= 0x7f && r < 0xa0 ||
			unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) // bidi controls, zero-width and other invisible characters
		if bad {
			lo := max(0, i-40)
			require.Failf(t, "raw control", "%s: %U at %d: %q", what, r, i, s[lo:min(len(s), i+40)])
		}
	}
}

// jsonKeys is the set of key paths of a JSON document (list items as []).
func jsonKeys(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(doc), &v), doc[:min(len(doc), 400)])
	return keyPaths(v)
}

// yamlKeys is the set of key paths of a YAML document.
func yamlKeys(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal([]byte(doc), &v), doc[:min(len(doc), 400)])
	return keyPaths(v)
}

func keyPaths(v any) []string {
	set := map[string]bool{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				set[p+"."+k] = true
				walk(p+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(p+"[]", e)
			}
		}
	}
	walk("", v)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// htmlTags is the set of the raw HTML tags in a Markdown document
// (where "<" starts one outside a code span, whose text is literal).
func htmlTags(doc string) []string {
	// CommonMark: outside a code span a backslash escapes the next
	// character; inside one it is literal, and the next backtick ends it
	var text strings.Builder
	code := false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case c == '`':
			code = !code
		case code:
		case c == '\\' && i+1 < len(doc):
			text.WriteByte(c)
			text.WriteByte(doc[i+1])
			i++
		default:
			text.WriteByte(c)
		}
	}
	set := map[string]bool{}
	for _, part := range strings.Split(text.String(), "<")[1:] {
		end := strings.IndexAny(part, " >\n")
		if end < 0 {
			end = len(part)
		}
		set[part[:end]] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// xmlSkeleton is the XML document's elements, in order, each with its
// attributes' names.
func xmlSkeleton(t *testing.T, doc string) []string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	var out []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok {
			out = append(out, se.Name.Local+attrNames(len(se.Attr), func(i int) string { return se.Attr[i].Name.Local }))
		}
	}
}

// htmlSkeleton is the HTML page's elements, as a browser's parser reads
// them, in order, each with its attributes' names.
func htmlSkeleton(t *testing.T, doc string) []string {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	require.NoError(t, err)
	var out []string
	for n := range root.Descendants() {
		if n.Type == html.ElementNode {
			out = append(out, n.Data+attrNames(len(n.Attr), func(i int) string { return n.Attr[i].Key }))
		}
	}
	return out
}

func attrNames(n int, name func(int) string) string {
	var b bytes.Buffer
	for i := range n {
		b.WriteString(" " + name(i))
	}
	return b.String()
}
