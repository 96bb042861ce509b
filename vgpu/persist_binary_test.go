package vgpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The unit runs InstalledBinary, never the file gpuprep ran from; a place
// others can write (the file, or a directory above it) is refused, since
// the unit runs as root at every boot.
func TestPersistRunsARootOwnedCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "gpuprep")
	require.NoError(t, os.WriteFile(src, []byte("gpuprep v1"), 0o777))
	dir := t.TempDir()
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	r := &host.FakeRunner{}

	p, err := PlanPersist(context.Background(), root, r, src, []byte("version: v1\n"), []string{"-c", "x"})
	require.NoError(t, err)
	require.NotNil(t, p.Binary)
	require.Contains(t, string(p.Files[1].New), "\nExecStart="+InstalledBinary+" vgpu apply -f "+PersistedConfig+" -c x\n")
	require.NotContains(t, string(p.Files[1].New), src)
	require.NoError(t, p.Apply(context.Background(), root, r, time.Unix(1, 0)))
	got, err := os.ReadFile(filepath.Join(dir, InstalledBinary))
	require.NoError(t, err)
	require.Equal(t, "gpuprep v1", string(got))

	// in place: nothing to install; a new gpuprep replaces it
	p, err = PlanPersist(context.Background(), root, r, src, []byte("version: v1\n"), []string{"-c", "x"})
	require.NoError(t, err)
	require.Nil(t, p.Binary)
	require.NoError(t, os.WriteFile(src, []byte("gpuprep v2"), 0o777))
	p, err = PlanPersist(context.Background(), root, r, src, []byte("version: v1\n"), []string{"-c", "x"})
	require.NoError(t, err)
	require.NotNil(t, p.Binary)

	for name, spoil := range map[string]func(string) error{
		"file writable by others": func(f string) error { return os.Chmod(f, 0o757) },
		"directory writable by others": func(f string) error {
			return os.Chmod(filepath.Dir(f), 0o777)
		},
		"a symlink": func(f string) error {
			if err := os.Remove(f); err != nil {
				return err
			}
			return os.Symlink(src, f)
		},
	} {
		d := t.TempDir()
		f := filepath.Join(d, InstalledBinary)
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("old"), 0o755))
		require.NoError(t, spoil(f))
		root, err := host.NewRoot(d)
		require.NoError(t, err)
		_, err = PlanPersist(context.Background(), root, r, src, nil, nil)
		require.Error(t, err, name)
	}
}
