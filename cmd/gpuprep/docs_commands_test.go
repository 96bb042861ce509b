package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// The command reference, docs/commands/<name>.md: one page per top-level
// command, its prose written by hand above the marker, its usage and flags
// below it generated from the cobra tree, so that a flag added, renamed or
// reworded shows here as a failing test (-update rewrites the generated part).

const (
	docsCommandsDir = "../../docs/commands"
	generatedMarker = "<!-- Generated from the code below this line: go test ./cmd/gpuprep -run TestDocs -update. Do not edit. -->"
)

// docsTree is the full command tree as a user's gpuprep builds it.
func docsTree() *cobra.Command {
	cmd := newRootCmdWith(io.Discard, io.Discard, &globals{})
	cmd.InitDefaultHelpCmd()
	cmd.InitDefaultCompletionCmd()
	return cmd
}

// docsTopLevel are the commands that get a page: every available one but help.
func docsTopLevel(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" {
			out = append(out, c)
		}
	}
	return out
}

// renderCommandRef is the generated part of a command's page: the command and
// each of its subcommands, depth first, with its usage line and its flags.
func renderCommandRef(c *cobra.Command) string {
	var b strings.Builder
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		fmt.Fprintf(&b, "### `%s`\n\n%s\n\n", c.CommandPath(), c.Short)
		if c.Runnable() {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
		} else {
			b.WriteString("Subcommands: ")
			var subs []string
			for _, s := range c.Commands() {
				if s.IsAvailableCommand() {
					subs = append(subs, "`"+s.Name()+"`")
				}
			}
			b.WriteString(strings.Join(subs, ", ") + ".\n\n")
		}
		renderFlags(&b, c)
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				walk(s)
			}
		}
	}
	walk(c)
	return b.String()
}

// renderFlags writes c's own flags as a table (help left out) and names the
// persistent flags it inherits from the commands above it, other than the
// root's global ones (README of docs/commands lists those).
func renderFlags(b *strings.Builder, c *cobra.Command) {
	var own []*pflag.Flag
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" && f.Name != "help" && f.Name != "version" {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
		for _, f := range own {
			fmt.Fprintf(b, "| `%s` | %s | %s |\n", flagSpelling(f), flagDefault(f), cell(f.Usage))
		}
		b.WriteString("\n")
	}
	var inherited []string
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "root" || f.Name == "system-disk" || f.Name == "help" {
			return
		}
		inherited = append(inherited, "`--"+f.Name+"`")
	})
	if len(inherited) > 0 {
		fmt.Fprintf(b, "Also takes the flags of `%s`: %s.\n\n", c.Parent().CommandPath(), strings.Join(inherited, ", "))
	}
}

// flagSpelling is how the flag is typed: "-o, --output string".
func flagSpelling(f *pflag.Flag) string {
	s := "--" + f.Name
	if f.Shorthand != "" {
		s = "-" + f.Shorthand + ", " + s
	}
	if name, _ := pflag.UnquoteUsage(f); name != "" {
		s += " " + name
	}
	return s
}

// flagDefault is the flag's default as help prints it, empty for a zero value.
func flagDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "false", "0", "[]", "0s":
		return ""
	}
	return "`" + f.DefValue + "`"
}

// cell makes s one Markdown table cell, shown as written (a <word> is no
// HTML tag).
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "<", "&lt;")
	return strings.ReplaceAll(s, "|", `\|`)
}

// commandPage is a page with its generated part replaced by ref (a new page
// gets a title and the command's short description as its prose).
func commandPage(old string, c *cobra.Command, ref string) string {
	prose := old
	if i := strings.Index(old, generatedMarker); i >= 0 {
		prose = old[:i]
	}
	if strings.TrimSpace(prose) == "" {
		prose = fmt.Sprintf("# `%s`\n\n%s\n\n", c.CommandPath(), c.Short)
	}
	return strings.TrimRight(prose, "\n") + "\n\n" + generatedMarker + "\n\n## Usage and flags\n\n" + strings.TrimRight(ref, "\n") + "\n"
}

func TestDocsCommandPages(t *testing.T) {
	root := docsTree()
	want := map[string]bool{"README.md": true}
	for _, c := range docsTopLevel(root) {
		name := c.Name() + ".md"
		want[name] = true
		p := filepath.Join(docsCommandsDir, name)
		old, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			require.NoError(t, err)
		}
		got := commandPage(string(old), c, renderCommandRef(c))
		if *update {
			require.NoError(t, os.MkdirAll(docsCommandsDir, 0o755))
			require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
			continue
		}
		require.NoError(t, err, "docs/commands/%s is missing: go test ./cmd/gpuprep -run TestDocsCommandPages -update writes it", name)
		require.Equal(t, got, string(old), "docs/commands/%s is stale: go test ./cmd/gpuprep -run TestDocsCommandPages -update", name)
	}
	entries, err := os.ReadDir(docsCommandsDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.True(t, want[e.Name()], "docs/commands/%s documents no command gpuprep has", e.Name())
	}
}

// The index, docs/commands/README.md: a table of the commands, and the global
// flags, below its hand-written part.
func TestDocsCommandIndex(t *testing.T) {
	root := docsTree()
	var b strings.Builder
	b.WriteString("\n| command | what it does |\n| --- | --- |\n")
	for _, c := range docsTopLevel(root) {
		fmt.Fprintf(&b, "| [`%s`](%s.md) | %s |\n", c.CommandPath(), c.Name(), cell(c.Short))
	}
	b.WriteString("\nGlobal flags, taken by every command:\n\n")
	renderFlags(&b, root)
	p := filepath.Join(docsCommandsDir, "README.md")
	old, err := os.ReadFile(p)
	require.NoError(t, err)
	prose := string(old)
	if i := strings.Index(prose, generatedMarker); i >= 0 {
		prose = prose[:i]
	}
	got := strings.TrimRight(prose, "\n") + "\n\n" + generatedMarker + "\n" + strings.TrimRight(b.String(), "\n") + "\n"
	if *update {
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
		return
	}
	require.Equal(t, got, string(old), "docs/commands/README.md is stale: go test ./cmd/gpuprep -run TestDocsCommandIndex -update")
}

// Every page links only to pages and files that exist.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	more, err := filepath.Glob("../../docs/commands/*.md")
	require.NoError(t, err)
	pages = append(slices.Concat(pages, more), "../../README.md", "../../examples/README.md")
	for _, p := range pages {
		body, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, target := range markdownLinks(string(body)) {
			target, anchor, _ := strings.Cut(target, "#")
			if target == "" {
				target = filepath.Base(p)
			}
			full := filepath.Join(filepath.Dir(p), target)
			if anchor != "" {
				page, err := os.ReadFile(full)
				require.NoError(t, err, "%s links to %s#%s", p, target, anchor)
				require.Contains(t, headingAnchors(string(page)), anchor, "%s links to %s#%s, a heading that is not there", p, target, anchor)
				continue
			}
			_, err := os.Stat(full)
			require.NoError(t, err, "%s links to %s, which is not there", p, target)
		}
	}
}

// markdownLinks are the relative link targets of body's [text](target)
// links (web links left out), anchors kept.
func markdownLinks(body string) []string {
	var out []string
	for {
		i := strings.Index(body, "](")
		if i < 0 {
			return out
		}
		body = body[i+2:]
		j := strings.IndexByte(body, ')')
		if j < 0 {
			return out
		}
		target := body[:j]
		if target != "" && !strings.Contains(target, "://") && !strings.HasPrefix(target, "mailto:") {
			out = append(out, target)
		}
	}
}

// docs/example-nodes.md lists every scenario the fixture builder makes (go
// run ./internal/fixture/mkroot lists the same), below its hand-written part.
func TestDocsExampleNodes(t *testing.T) {
	var b strings.Builder
	b.WriteString("\n| name | the node |\n| --- | --- |\n")
	for _, n := range fixture.Names() {
		fmt.Fprintf(&b, "| `%s` | %s |\n", n, cell(fixture.Scenarios()[n].About))
	}
	p := "../../docs/example-nodes.md"
	old, err := os.ReadFile(p)
	require.NoError(t, err)
	prose := string(old)
	if i := strings.Index(prose, generatedMarker); i >= 0 {
		prose = prose[:i]
	}
	got := strings.TrimRight(prose, "\n") + "\n\n" + generatedMarker + "\n" + b.String()
	if *update {
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
		return
	}
	require.Equal(t, got, string(old), "docs/example-nodes.md is stale: go test ./cmd/gpuprep -run TestDocsExampleNodes -update")
}

// headingAnchors are the anchors GitHub gives body's headings: lower case,
// spaces as -, punctuation other than - and _ dropped.
func headingAnchors(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
