package fleet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// checkLocalPath on real directories: OpenSSH's rules, on the path as given
// and as resolved.
func TestCheckLocalPath(t *testing.T) {
	top := safeTempDir(t)
	me := uint32(os.Getuid())
	owners := func(u uint32) bool { return u == 0 || u == me }
	mk := func(p string, mode os.FileMode) string {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o700))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	ok := mk(filepath.Join(top, "ok", "sha", "gpuprep"), 0o700)
	assert.NoError(t, checkLocalPath(ok, owners))

	// a group-writable directory on the way
	gw := mk(filepath.Join(top, "gw", "sha", "gpuprep"), 0o700)
	require.NoError(t, os.Chmod(filepath.Join(top, "gw"), 0o775))
	err := checkLocalPath(gw, owners)
	var u *UnsafePathError
	require.ErrorAs(t, err, &u)
	assert.Equal(t, filepath.Join(top, "gw"), u.Path)
	assert.Contains(t, err.Error(), "writable by its group or by others (mode 0775")

	// a world-writable file
	ww := mk(filepath.Join(top, "ww", "gpuprep"), 0o757)
	require.ErrorAs(t, checkLocalPath(ww, owners), &u)
	assert.Equal(t, ww, u.Path)

	// someone else's file
	if os.Getuid() == 0 {
		theirs := mk(filepath.Join(top, "theirs", "gpuprep"), 0o700)
		require.NoError(t, os.Chown(theirs, 65534, 65534))
		require.ErrorAs(t, checkLocalPath(theirs, owners), &u)
		assert.Contains(t, u.Why, "belongs to uid 65534, not to root or the login user")
	}

	// the file a symbolic link
	link := filepath.Join(top, "ok", "sha", "link")
	require.NoError(t, os.Symlink(ok, link))
	require.ErrorAs(t, checkLocalPath(link, owners), &u)
	assert.Contains(t, u.Why, "symbolic link")

	// a safe-looking path through a link into an unsafe directory
	unsafe := filepath.Join(top, "unsafe")
	target := mk(filepath.Join(unsafe, "real", "gpuprep"), 0o700)
	require.NoError(t, os.Chmod(unsafe, 0o777))
	require.NoError(t, os.Symlink(filepath.Dir(target), filepath.Join(top, "ok", "via")))
	require.ErrorAs(t, checkLocalPath(filepath.Join(top, "ok", "via", "gpuprep"), owners), &u)
	assert.Equal(t, unsafe, u.Path)
}

// judgePath on entries as the host's stat reports them.
func TestJudgePathMissing(t *testing.T) {
	owners := func(u uint32) bool { return u == 0 || u == 1000 }
	dir := pathEntry{path: "/home/a", uid: 1000, mode: 0o040755}
	missing := []pathEntry{{path: "/home/a/c/x", missing: true}, {path: "/home/a/c", missing: true}, dir, {path: "/home", uid: 0, mode: 0o040755}, {path: "/", uid: 0, mode: 0o040755}}
	assert.NoError(t, judgePath(missing, owners, true, true), "not made yet: gpuprep makes it")
	assert.Error(t, judgePath(missing, owners, false, true), "the resolved path must exist")
	gap := []pathEntry{{path: "/home/a/c/x", uid: 1000, mode: 0o100700}, {path: "/home/a/c", missing: true}, dir}
	assert.Error(t, judgePath(gap, owners, true, true), "a file below a missing directory")
	notFile := []pathEntry{{path: "/home/a/c", uid: 1000, mode: 0o040700}, dir}
	assert.Error(t, judgePath(notFile, owners, true, true))
	assert.NoError(t, judgePath(notFile, owners, false, false), "a directory first")
}

// What the warm binary's own check of its path costs (lstat of each
// component, twice; no fork).
func BenchmarkCheckCacheChain(b *testing.B) {
	dir, err := sshdtest.SafeTempDir("gpuprep-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d := filepath.Join(dir, ".cache", "gpuprep", "0123")
	if err := os.MkdirAll(d, 0o700); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"gpuprep", stampName} {
		if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if err := checkCacheChain(filepath.Join(d, stampName)); err != nil {
			b.Fatal(err)
		}
	}
}
