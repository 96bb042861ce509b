package fleet

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CheckDist on a directory laid out as make dist lays it out, its
// SHA256SUMS written by sha256sum itself.
func TestCheckDist(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	dir := t.TempDir()
	fakeELF(t, filepath.Join(dir, "gpuprep-linux-amd64"), elf.EM_X86_64, "amd")
	fakeELF(t, filepath.Join(dir, "gpuprep-linux-arm64"), elf.EM_AARCH64, "arm")
	sums := func() {
		cmd := exec.Command("sh", "-c", "sha256sum gpuprep-linux-* > SHA256SUMS")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	sums()
	bins, err := CheckDist(dir)
	require.NoError(t, err)
	require.Len(t, bins, 2)
	assert.Equal(t, "x86_64", bins[0].Arch)
	assert.Equal(t, "aarch64", bins[1].Arch)

	arm := filepath.Join(dir, "gpuprep-linux-arm64")
	data, err := os.ReadFile(arm)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(arm, append(data, 'x'), 0o755))
	_, err = CheckDist(dir)
	assert.ErrorContains(t, err, "SHA256SUMS says", "a file changed after its sum")

	sums()
	fakeELF(t, filepath.Join(dir, "gpuprep-linux-riscv64"), elf.EM_RISCV, "unlisted")
	_, err = CheckDist(dir)
	assert.ErrorContains(t, err, "SHA256SUMS lists")
	require.NoError(t, os.Remove(filepath.Join(dir, "gpuprep-linux-riscv64")))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte("not a sum\n"), 0o644))
	_, err = CheckDist(dir)
	assert.ErrorContains(t, err, "not a sha256sum line")
}
