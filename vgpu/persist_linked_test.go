package vgpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// linkedLibexec is a root whose /usr/local/libexec is a link to
// /home/mallory/libexec (root-owned, 0755) and /home/mallory belongs to
// uid owner: owner can rename libexec away and supply the unit's binary.
func linkedLibexec(t *testing.T, owner int) *host.Root {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	d := t.TempDir()
	require.NoError(t, os.Chmod(d, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(d, "usr/local"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(d, "home/mallory/libexec"), 0o755))
	require.NoError(t, os.Chown(filepath.Join(d, "home/mallory"), owner, owner))
	require.NoError(t, os.Symlink("/home/mallory/libexec", filepath.Join(d, "usr/local/libexec")))
	root, err := host.NewRoot(d)
	require.NoError(t, err)
	return root
}

// A directory above the link's target belongs to another user: refused.
// The same layout with /home/mallory root's is accepted (the link itself
// is fine when every directory it leads through is root's).
func TestPersistChecksAboveALinkedDirectory(t *testing.T) {
	src := filepath.Join(t.TempDir(), "gpuprep")
	require.NoError(t, os.WriteFile(src, []byte("gpuprep v1"), 0o755))

	_, err := planBinary(linkedLibexec(t, 1000), src)
	require.ErrorContains(t, err, "/home/mallory belongs to uid 1000, not to root")

	c, err := planBinary(linkedLibexec(t, 0), src)
	require.NoError(t, err)
	require.NotNil(t, c)
}

// The directory above the target may also be writable by others.
func TestPersistChecksModeAboveALinkedDirectory(t *testing.T) {
	src := filepath.Join(t.TempDir(), "gpuprep")
	require.NoError(t, os.WriteFile(src, []byte("gpuprep v1"), 0o755))
	root := linkedLibexec(t, 0)
	require.NoError(t, os.Chmod(filepath.Join(root.Dir(), "home"), 0o777))
	_, err := planBinary(root, src)
	require.ErrorContains(t, err, "/home is writable by its group or by others")
}
