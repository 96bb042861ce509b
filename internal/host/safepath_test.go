package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var rootOnly = Owners{Allow: func(u uint32) bool { return u == 0 || u == uint32(os.Geteuid()) }, Name: "root"}

// SafePath in a root: the path as given and resolved, each component up
// to the root's /; missing components only at the deep end when allowed.
func TestSafePathInARoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	d := t.TempDir()
	require.NoError(t, os.Chmod(d, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(d, "usr/local"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(d, "opt/u/libexec"), 0o755))
	require.NoError(t, os.Symlink("/opt/u/libexec", filepath.Join(d, "usr/local/libexec")))
	r, err := NewRoot(d)
	require.NoError(t, err)

	const f = "/usr/local/libexec/gpuprep/gpuprep"
	require.NoError(t, r.SafePath(f, rootOnly, true, true))
	require.ErrorContains(t, r.SafePath(f, rootOnly, false, true), "is missing")

	require.NoError(t, os.Chown(filepath.Join(d, "opt/u"), 1000, 1000))
	var u *UnsafePathError
	require.ErrorAs(t, r.SafePath(f, rootOnly, true, true), &u)
	require.Equal(t, "/opt/u", u.Path, "above the link's target")
	require.Equal(t, "belongs to uid 1000, not to root", u.Why)
	require.NoError(t, os.Chown(filepath.Join(d, "opt/u"), 0, 0))

	require.NoError(t, os.MkdirAll(filepath.Join(d, "opt/u/libexec/gpuprep"), 0o755))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(d, "opt/u/libexec/gpuprep/gpuprep")))
	require.ErrorContains(t, r.SafePath(f, rootOnly, true, true), "is a symbolic link")
}

// A sticky directory writable by all is accepted only when asked (a
// temporary directory), and never when it is not sticky.
func TestJudgePathSticky(t *testing.T) {
	tmp := []PathEntry{{Path: "/tmp", UID: 0, Mode: 0o041777}, {Path: "/", UID: 0, Mode: 0o040755}}
	open := []PathEntry{{Path: "/tmp", UID: 0, Mode: 0o040777}, {Path: "/", UID: 0, Mode: 0o040755}}
	theirs := []PathEntry{{Path: "/tmp", UID: 1000, Mode: 0o041777}, {Path: "/", UID: 0, Mode: 0o040755}}
	sticky := rootOnly
	sticky.Sticky = true
	require.Error(t, JudgePath(tmp, rootOnly, false, false), "OpenSSH's rules")
	require.NoError(t, JudgePath(tmp, sticky, false, false))
	require.Error(t, JudgePath(open, sticky, false, false))
	require.Error(t, JudgePath(theirs, sticky, false, false))
}
