package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fdExecScript under the real /bin/sh: it runs the file it opened and
// hashed (through /proc/self/fd/3), and a file whose hash differs from the
// verified one not at all.
func TestFdExecScript(t *testing.T) {
	if _, err := os.Stat(execFD); err != nil {
		t.Skip("no /proc/self/fd")
	}
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuprep")
	prog := []byte("#!/bin/sh\necho \"ran $0 $*\"\n")
	require.NoError(t, os.WriteFile(bin, prog, 0o700))
	sum := sha256.Sum256(prog)
	sha := hex.EncodeToString(sum[:])
	run := func(sha string) (string, int) {
		cmd := exec.Command("/bin/sh", "-c", fdExecScript(bin, sha, "'a b' c"))
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()
	}
	out, rc := run(sha)
	assert.Equal(t, 0, rc, out)
	assert.Equal(t, "ran "+execFD+" a b c", out, "executed through the descriptor it hashed")

	other := strings.Repeat("0", 64)
	out, rc = run(other)
	assert.Equal(t, ChangedRC, rc, out)
	assert.Contains(t, out, changedMsg+" (sha256 "+sha+")")
	assert.NotContains(t, out, "ran ")
	assert.True(t, binaryChanged(Output{ExitCode: rc, Stderr: []byte(out)}))
}
