package journal

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

func TestAppendRead(t *testing.T) {
	dir := t.TempDir()
	root, _ := host.NewRoot(dir)
	e1 := Entry{Time: time.Unix(1, 0).UTC(), Command: "grub ensure", Kind: "file", Path: "/etc/default/grub", Backup: "/etc/default/grub.x.bak"}
	e2 := Entry{Time: time.Unix(2, 0).UTC(), Command: "vfio bind", Kind: "driver", Device: "0000:41:00.0", Before: "nvidia", After: "vfio-pci"}
	require.NoError(t, Append(root, e1))
	require.NoError(t, Append(root, e2))
	got, err := Read(root)
	require.NoError(t, err)
	require.Equal(t, []Entry{e1, e2}, got)
	// a torn last line (crash mid-write) is skipped and reported
	f, _ := os.OpenFile(filepath.Join(dir, Path), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-`)
	f.Close()
	got, err = Read(root)
	require.ErrorContains(t, err, "unreadable lines [3]")
	require.Len(t, got, 2)
	// the next entry starts on a line of its own
	require.NoError(t, Append(root, e1))
	got, err = Read(root)
	require.ErrorContains(t, err, "unreadable lines [3]")
	require.Equal(t, []Entry{e1, e2, e1}, got)
}

func TestWroteRoundTrips(t *testing.T) {
	root, _ := host.NewRoot(t.TempDir())
	e := Entry{Time: time.Unix(1, 0).UTC(), Command: "apply", Kind: "file", Path: "/etc/default/grub", Wrote: Hash([]byte("x\n"))}
	require.Equal(t, "sha256:"+"73cb3858a687a8494ca3323053016282f3dad39d42cf62ca4e79dda2aac7d9ac", e.Wrote)
	require.NoError(t, Append(root, e))
	got, err := Read(root)
	require.NoError(t, err)
	require.Equal(t, []Entry{e}, got)
}

// WriteFile makes the directories a new file needs, each journalled before
// its mkdir, outermost first; those that exist, and the journal's own, are
// not recorded.
func TestWriteFileJournalsDirectoriesItMakes(t *testing.T) {
	dir := t.TempDir()
	root, _ := host.NewRoot(dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	now := time.Unix(1, 0).UTC()
	_, err := WriteFile(root, "/etc/a/b/f.conf", []byte("x\n"), 0o644, "apply", now)
	require.NoError(t, err)
	_, err = WriteFile(root, "/etc/a/g.conf", []byte("y\n"), 0o644, "apply", now)
	require.NoError(t, err)
	_, err = WriteFile(root, "/var/lib/gpuprep/x/h", []byte("z\n"), 0o644, "apply", now)
	require.NoError(t, err)
	es, err := Read(root)
	require.NoError(t, err)
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind+" "+e.Path)
	}
	require.Equal(t, []string{
		"dir /etc/a", "dir /etc/a/b", "file-intent /etc/a/b/f.conf", "file /etc/a/b/f.conf",
		"file-intent /etc/a/g.conf", "file /etc/a/g.conf",
		"dir /var/lib/gpuprep/x", "file-intent /var/lib/gpuprep/x/h", "file /var/lib/gpuprep/x/h",
	}, kinds)
	require.Equal(t, []string{"/etc/c", "/etc/c/d"}, Missing(root, "/etc/c/d"))
	require.Empty(t, Missing(root, "/etc/a/b"))
}
