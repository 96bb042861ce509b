package vgpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The scratch directory's parents are checked, not only the directory:
// /var/lib reached through a link into another user's directory, or a
// parent writable by others, is refused before anything is copied there.
func TestPrivateDirChecksItsParents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	layout := func(t *testing.T) (string, *host.Root) {
		d := t.TempDir()
		require.NoError(t, os.Chmod(d, 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(d, "var"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(d, "home/mallory/lib"), 0o755))
		require.NoError(t, os.Symlink("/home/mallory/lib", filepath.Join(d, "var/lib")))
		root, err := host.NewRoot(d)
		require.NoError(t, err)
		return d, root
	}

	d, root := layout(t)
	require.NoError(t, privateDir(root, InstallerScratch), "root's all the way up")
	st, err := os.Stat(filepath.Join(d, "home/mallory/lib/gpuprep/installer"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	d, root = layout(t)
	require.NoError(t, os.Chown(filepath.Join(d, "home/mallory"), 1000, 1000))
	require.ErrorContains(t, privateDir(root, InstallerScratch), "/home/mallory belongs to uid 1000")
	_, err = os.Stat(filepath.Join(d, "home/mallory/lib/gpuprep"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing made in a directory another user can change")

	d, root = layout(t)
	require.NoError(t, os.MkdirAll(filepath.Join(d, "home/mallory/lib/gpuprep"), 0o700))
	require.NoError(t, os.Chmod(filepath.Join(d, "home/mallory/lib/gpuprep"), 0o777))
	require.ErrorContains(t, privateDir(root, InstallerScratch), "/lib/gpuprep is writable by its group or by others")
}
