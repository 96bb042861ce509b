package host

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestWriteFileAtomicBacksUpAndKeepsMode(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc/default"), 0o755))
	p := filepath.Join(dir, "etc/default/grub")
	require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o600))
	r, _ := NewRoot(dir)
	now := time.Date(2026, 11, 30, 11, 15, 0, 0, time.UTC)
	res, err := r.WriteFileAtomic("/etc/default/grub", []byte("new\n"), 0o644, now)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, "/etc/default/grub.gpuprep-20261130T111500.000000000Z.bak", res.Backup)
	b, _ := os.ReadFile(p)
	require.Equal(t, "new\n", string(b))
	st, _ := os.Stat(p)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, _ = os.ReadFile(filepath.Join(dir, res.Backup))
	require.Equal(t, "old\n", string(b))
	// Same content again: nothing written, no new backup.
	res, err = r.WriteFileAtomic("/etc/default/grub", []byte("new\n"), 0o644, now.Add(time.Second))
	require.NoError(t, err)
	require.False(t, res.Changed)
	ents, _ := os.ReadDir(filepath.Join(dir, "etc/default"))
	require.Len(t, ents, 2, "no temporary files left behind")
	// a temporary file left by a crash is cleaned up by the next write
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etc/default/.grub.gpuprep-tmp-123"), []byte("half"), 0o600))
	_, err = r.WriteFileAtomic("/etc/default/grub", []byte("newer\n"), 0o644, now.Add(2*time.Second))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "etc/default/.grub.gpuprep-tmp-123"))
	require.True(t, os.IsNotExist(err))
	// A new file gets perm and no backup.
	res, err = r.WriteFileAtomic("/etc/default/new", []byte("x"), 0o640, now)
	require.NoError(t, err)
	require.Equal(t, "", res.Backup)
	st, _ = os.Stat(filepath.Join(dir, "etc/default/new"))
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())
}

func TestWriteAttrIsOneWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "driver_override")
	require.NoError(t, os.WriteFile(p, []byte("(null)\n"), 0o644))
	r, _ := NewRoot(dir)
	require.NoError(t, r.WriteAttr("/driver_override", "vfio-pci"))
	b, _ := os.ReadFile(p)
	require.Equal(t, "vfio-pci", string(b))
	require.Error(t, r.WriteAttr("/missing", "x"), "attributes are never created")
}

func TestFakeRunner(t *testing.T) {
	f := &FakeRunner{Responses: map[string]FakeResponse{"update-grub": {Out: []byte("done")}}, Strict: true}
	out, err := f.Run(t.Context(), "update-grub")
	require.NoError(t, err)
	require.Equal(t, "done", string(out))
	_, err = f.Run(t.Context(), "reboot")
	require.Error(t, err)
	require.Equal(t, [][]string{{"update-grub"}, {"reboot"}}, f.Calls)
}

// A file reached through a symlink is written where the link leads and the link stays, on the live root as on a
// fixture root; a link that leads nowhere is refused, not replaced.
func TestWriteFileAtomicWritesThroughSymlinks(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	fixtureDir := t.TempDir()
	fixtureRoot, err := NewRoot(fixtureDir)
	require.NoError(t, err)
	live, err := NewRoot("/")
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		r    *Root
		base string // the host path of the directory the test works in
		dir  string // where that is on this machine
	}{
		"live":    {live, t.TempDir(), ""},
		"fixture": {fixtureRoot, "/etc/default", filepath.Join(fixtureDir, "etc/default")},
	} {
		if tc.dir == "" {
			tc.dir = tc.base
		}
		require.NoError(t, os.MkdirAll(filepath.Join(tc.dir, "managed"), 0o755))
		target := filepath.Join(tc.dir, "managed", "grub")
		require.NoError(t, os.WriteFile(target, []byte("old\n"), 0o640))
		require.NoError(t, os.Symlink("managed/grub", filepath.Join(tc.dir, "grub")))
		res, err := tc.r.WriteFileAtomic(tc.base+"/grub", []byte("new\n"), 0o644, now)
		require.NoError(t, err, name)
		require.True(t, res.Changed, name)
		fi, err := os.Lstat(filepath.Join(tc.dir, "grub"))
		require.NoError(t, err)
		require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "%s: the link stays", name)
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		require.Equal(t, "new\n", string(b), name)
		st, err := os.Stat(target)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o640), st.Mode().Perm(), name)

		require.NoError(t, os.Symlink("managed/nowhere", filepath.Join(tc.dir, "dangling")))
		_, err = tc.r.WriteFileAtomic(tc.base+"/dangling", []byte("x"), 0o644, now)
		require.ErrorContains(t, err, "dangling is a symbolic link to no file", name)
		_, err = os.Stat(filepath.Join(tc.dir, "managed/nowhere"))
		require.ErrorIs(t, err, os.ErrNotExist, name)
		fi, err = os.Lstat(filepath.Join(tc.dir, "dangling"))
		require.NoError(t, err)
		require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "%s: a dangling link is left alone", name)
	}
}

// A rewritten file keeps its extended attributes (an SELinux label, ACLs, user attributes), as an editor keeps them:
// the new content goes in a new inode, which would otherwise have none.
func TestWriteFileAtomicKeepsExtendedAttributes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc/default"), 0o755))
	p := filepath.Join(dir, "etc/default/grub")
	require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o644))
	if err := unix.Setxattr(p, "user.gpuprep-test", []byte("bootloader_etc_t"), 0); err != nil {
		t.Skipf("no user extended attributes on %s: %v", dir, err)
	}
	r, err := NewRoot(dir)
	require.NoError(t, err)
	res, err := r.WriteFileAtomic("/etc/default/grub", []byte("new\n"), 0o644, time.Now())
	require.NoError(t, err)
	require.True(t, res.Changed)
	buf := make([]byte, 64)
	n, err := unix.Getxattr(p, "user.gpuprep-test", buf)
	require.NoError(t, err, "the attribute went with the old inode")
	require.Equal(t, "bootloader_etc_t", string(buf[:n]))
}
