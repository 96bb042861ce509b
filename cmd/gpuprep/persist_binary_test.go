package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
)

// fakeGpuprep is a stand-in for the running gpuprep where gpuprep fleet
// puts it: a file its user can write, in ~/.cache.
func fakeGpuprep(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), ".cache", "gpuprep", "0123abcd", "gpuprep")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o777))
	require.NoError(t, os.WriteFile(p, []byte("\x7fELF gpuprep stand-in "+t.Name()+"\n"), 0o777))
	return p
}

func sha256Hex(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// requireInstalledGpuprep checks that root holds, as vgpu.InstalledBinary,
// a copy of src that only its owner (this user, root on a node) can
// change, journalled as a new file (so that rollback removes it), and
// that the boot unit runs it, never src.
func requireInstalledGpuprep(t *testing.T, root, src string) {
	t.Helper()
	dst := filepath.Join(root, vgpu.InstalledBinary)
	require.Equal(t, sha256Hex(t, src), sha256Hex(t, dst))
	st, err := os.Lstat(dst)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode())
	require.Equal(t, uint32(os.Geteuid()), st.Sys().(*syscall.Stat_t).Uid)
	unit, err := os.ReadFile(filepath.Join(root, vgpu.ApplyUnit))
	require.NoError(t, err)
	require.Contains(t, string(unit), "\nExecStart="+vgpu.InstalledBinary+" vgpu apply ")
	require.NotContains(t, string(unit), src)
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	entries, err := journal.Read(r)
	require.NoError(t, err)
	var intent, file bool
	for _, e := range entries {
		if e.Path != vgpu.InstalledBinary {
			continue
		}
		intent = intent || e.Kind == journal.KindFileIntent && e.Before == journal.Absent
		file = file || e.Kind == journal.KindFile && e.Backup == ""
	}
	require.True(t, intent && file, "the install of %s is not journalled as a new file: %+v", vgpu.InstalledBinary, entries)
}
