package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The warm path with a binary per architecture, under the real /bin/sh: the
// script reads the host's architecture (here from a file standing in for
// /proc/sys/kernel/arch) and starts the cached binary built for it, and
// none on a host of an architecture it has no binary for. Each fake binary
// prints its own directory; through sudo (a login user) the fake sudo
// prints the path it was asked to run.
func TestStampedScriptPicksByArch(t *testing.T) {
	top := t.TempDir()
	base := filepath.Join(top, "cache")
	bins := []*Binary{{Arch: "x86_64", SHA256: strings.Repeat("a", 64)}, {Arch: "aarch64", SHA256: strings.Repeat("b", 64)}}
	old := time.Now().Add(-time.Hour)
	for _, b := range bins {
		d := filepath.Join(base, b.SHA256)
		require.NoError(t, os.MkdirAll(d, 0o700))
		bin := filepath.Join(d, "gpuprep")
		require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho ran "+b.SHA256+"\n"), 0o700))
		require.NoError(t, os.Chtimes(bin, old, old))
		require.NoError(t, os.WriteFile(filepath.Join(d, stampName), []byte("stamp\n"), 0o600))
	}
	fakes := filepath.Join(top, "bin")
	require.NoError(t, os.MkdirAll(fakes, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fakes, "sudo"), []byte("#!/bin/sh\necho ran \"$(basename \"$(dirname \"$3\")\")\"\n"), 0o755))

	archFile := filepath.Join(top, "arch")
	run := func(hostArch string) (string, int) {
		require.NoError(t, os.WriteFile(archFile, []byte(hostArch+"\n"), 0o644))
		cmd := exec.Command("/bin/sh", "-c", stampedScript(Quote(base), bins, "check", false, archFile))
		cmd.Env = []string{"HOME=/nonexistent", "PATH=" + fakes + ":/usr/bin:/bin"}
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()
	}
	for _, b := range bins {
		out, rc := run(b.Arch)
		require.Equal(t, 0, rc, out)
		assert.Equal(t, "ran "+b.SHA256, out, "a %s host runs the %s binary", b.Arch, b.Arch)
	}
	out, rc := run("riscv64")
	assert.Equal(t, NotStampedRC, rc, out)
	assert.Equal(t, notStampedMsg, out, "no binary for the host's architecture: none is started")

	// the script forks nothing before the binary: no command substitution
	// but uname's fallback, no other program named
	script := stampedScript(Quote(base), bins, "check", false, archFile)
	assert.Equal(t, 1, strings.Count(script, "$("), script)
}
