package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// ReplaceFile: atomic, no backup and no temporary file left beside the
// file (a reader of the directory, NFD, would read them), unchanged content
// not rewritten, a link or a frozen root refused.
func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRoot(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "d"), 0o755))
	changed, err := r.ReplaceFile("/d/f", []byte("one\n"), 0o644)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = r.ReplaceFile("/d/f", []byte("two\n"), 0o644)
	require.NoError(t, err)
	require.True(t, changed)
	st1, _ := os.Stat(filepath.Join(dir, "d/f"))
	changed, err = r.ReplaceFile("/d/f", []byte("two\n"), 0o644)
	require.NoError(t, err)
	require.False(t, changed)
	st2, _ := os.Stat(filepath.Join(dir, "d/f"))
	require.True(t, os.SameFile(st1, st2), "the same content is not rewritten")
	names, err := os.ReadDir(filepath.Join(dir, "d"))
	require.NoError(t, err)
	require.Len(t, names, 1, "no backup, no temporary file")
	b, _ := os.ReadFile(filepath.Join(dir, "d/f"))
	require.Equal(t, "two\n", string(b))
	require.Equal(t, os.FileMode(0o644), st2.Mode().Perm())

	outside := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(outside, []byte("keep"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "d/link")))
	_, err = r.ReplaceFile("/d/link", []byte("x"), 0o644)
	require.Error(t, err)
	b, _ = os.ReadFile(outside)
	require.Equal(t, "keep", string(b))

	_, err = r.Frozen("a snapshot").ReplaceFile("/d/f", []byte("three\n"), 0o644)
	require.ErrorContains(t, err, "a snapshot")
}
