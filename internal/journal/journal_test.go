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
	appendTo(t, filepath.Join(dir, Path), `{"time":"2026-`)
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

// Records carry their version; those of a gpuprep from before they had one
// read with their fields as they were; one of a newer gpuprep is read and
// reported.
func TestRecordVersion(t *testing.T) {
	dir := t.TempDir()
	root, _ := host.NewRoot(dir)
	require.NoError(t, Append(root, LabelRecord{Node: "n1", Kubeconfig: "/k", Before: "a=b", Keys: "c"}.Entry("label", time.Unix(1, 0).UTC())))
	b, err := os.ReadFile(filepath.Join(dir, Path))
	require.NoError(t, err)
	require.Contains(t, string(b), `{"v":1,"time"`)
	// as main's gpuprep (c1dcee8) wrote a label entry: no "v"
	appendTo(t, filepath.Join(dir, Path), `{"time":"2026-01-02T03:04:10Z","command":"apply","kind":"label","path":"/root/.kube/config","device":"node-a","before":"x=y","after":"nvidia.com/gpu.workload.config"}`+"\n")
	got, err := Read(root)
	require.NoError(t, err)
	require.Equal(t, LabelRecord{Node: "node-a", Kubeconfig: "/root/.kube/config", Before: "x=y", Keys: "nvidia.com/gpu.workload.config"}, got[1].Label())
	require.Equal(t, LabelRecord{Node: "n1", Kubeconfig: "/k", Before: "a=b", Keys: "c"}, got[0].Label())
	appendTo(t, filepath.Join(dir, Path), `{"v":2,"time":"2026-01-02T03:04:10Z","command":"apply","kind":"step","before":"label","after":"done"}`+"\n")
	got, err = Read(root)
	require.ErrorContains(t, err, "lines [3] were written by a newer gpuprep")
	require.Len(t, got, 3)
}

// Each payload type round-trips through its entry.
func TestPayloadsRoundTrip(t *testing.T) {
	s := StepRecord{ID: "reboot", State: StepStarted, BootID: "b1", Reason: "kernel-args"}
	require.Equal(t, s, s.Entry("apply", time.Time{}).Step())
	b := BootArgsRecord{Loader: "grub-bls", Add: "iommu=pt", Kept: "/boot/loader/entries/x.conf"}
	require.Equal(t, b, b.Entry("apply", time.Time{}).BootArgs())
	u := UndoneRecord{Index: 7, Kind: KindFile, Path: "/etc/default/grub", Saved: "/etc/default/grub.bak"}
	got, ok := u.Entry("rollback", time.Time{}).Undone()
	require.True(t, ok)
	require.Equal(t, u, got)
	d := DriverRecord{Device: "0000:41:00.0", Before: "nvidia", After: "vfio-pci"}
	require.Equal(t, d, d.Intent("apply", time.Time{}).Driver())
	require.Equal(t, d, d.Done("apply", time.Time{}).Driver())
}

// appendTo appends text to the file p, as a writer other than Append.
func appendTo(t *testing.T, p, text string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
