package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeInstallLines are the command lines of the README's "## Install"
// section's first sh block, comments cut off.
func readmeInstallLines(t *testing.T) []string {
	t.Helper()
	body, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(body), "\n## Install\n")
	require.True(t, ok, "README.md has no ## Install section")
	_, block, ok := strings.Cut(sec, "```sh\n")
	require.True(t, ok, "the Install section has no sh block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// requireStatic fails unless p is an ELF executable without a program
// interpreter (no dynamic loader: the binary gpuprep fleet copies to hosts
// whose C library may differ).
func requireStatic(t *testing.T, p string) {
	t.Helper()
	f, err := elf.Open(p)
	require.NoError(t, err, p)
	defer f.Close()
	for _, prog := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, prog.Type, "%s is dynamically linked", p)
	}
}

// The README's install commands work as written, from this clone: each of
// its lines is run (go install into a temporary GOBIN, make install into a
// temporary DESTDIR), and what it installs is a static gpuprep that
// starts. make dist is not run here (two cross builds): make test runs it,
// and its dist-check, every time; dist-repro checks that it is
// reproducible. A line the test does not know fails it, so that nothing in
// the section goes untried.
func TestReadmeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpuprep twice")
	}
	lines := readmeInstallLines(t)
	tmp := t.TempDir()
	seen := map[string]bool{}
	var installed []string
	for _, l := range lines {
		require.NotContains(t, l, "@latest", "the module is not published: go install …@latest fails")
		var cmd *exec.Cmd
		switch {
		case l == "CGO_ENABLED=0 go install -trimpath ./cmd/gpuprep": // -trimpath: make dist's packages, from the build cache
			gobin := filepath.Join(tmp, "gobin")
			cmd = exec.Command("go", "install", "-trimpath", "./cmd/gpuprep")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOBIN="+gobin)
			installed = append(installed, filepath.Join(gobin, "gpuprep"))
		case l == "make install":
			// BIN: the build goes to tmp, not to this checkout's bin/
			root := filepath.Join(tmp, "root")
			cmd = exec.Command("make", "install", "BIN="+filepath.Join(tmp, "bin", "gpuprep"), "DESTDIR="+root)
			installed = append(installed, filepath.Join(root, "usr/local/bin/gpuprep"))
		case l == "make dist", l == "gpuprep --version":
			seen[l] = true
			continue
		default:
			t.Fatalf("README Install: %q: a line this test does not run", l)
		}
		seen[l] = true
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", l, out)
	}
	for _, l := range []string{"CGO_ENABLED=0 go install -trimpath ./cmd/gpuprep", "make install", "make dist", "gpuprep --version"} {
		require.True(t, seen[l], "README Install lacks %q", l)
	}
	for _, p := range installed {
		requireStatic(t, p)
		out, err := exec.Command(p, "--version").CombinedOutput()
		require.NoError(t, err, "%s --version: %s", p, out)
		require.True(t, strings.HasPrefix(string(out), "gpuprep "), "%s --version: %s", p, out)
	}
}
