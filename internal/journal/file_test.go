package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The typed file and directory records write the lines main's gpuprep
// (855ce7e) wrote field by field in WriteFile, RemoveFile, MkdirAll and
// FileIntent, and read back as they were written; a line of a gpuprep from
// before Wrote was recorded (a removal said only by After "removed") reads
// as a removal.
func TestFileRecordsKeepTheirLines(t *testing.T) {
	dir := t.TempDir()
	root, _ := host.NewRoot(dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	_, err := WriteFile(root, "/etc/m/a.conf", []byte("a\n"), 0o644, "vfio bind", now)
	require.NoError(t, err)
	_, err = WriteFile(root, "/etc/m/a.conf", []byte("b\n"), 0o644, "vfio bind", now)
	require.NoError(t, err)
	later := now.Add(time.Second)
	_, err = RemoveFile(root, "/etc/m/a.conf", "vfio unbind", later)
	require.NoError(t, err)
	in := FileIntent("/etc/m/a.conf", []byte("b\n"), true, "apply", "", now)
	require.True(t, in.Time.IsZero(), "FileIntent leaves the time to its caller")
	in.Time = now.UTC()
	require.NoError(t, Append(root, in))
	b, err := os.ReadFile(filepath.Join(dir, Path))
	require.NoError(t, err)
	at := `{"v":1,"time":"2026-01-02T02:04:05Z",`
	at2 := `{"v":1,"time":"2026-01-02T02:04:06Z",`
	bak := "/etc/m/a.conf.gpuprep-20260102T020405.000000000Z.bak"
	bak2 := "/etc/m/a.conf.gpuprep-20260102T020406.000000000Z.bak"
	ha, hb := Hash([]byte("a\n")), Hash([]byte("b\n"))
	require.Equal(t, []string{
		at + `"command":"vfio bind","kind":"dir","path":"/etc/m"}`,
		at + `"command":"vfio bind","kind":"file-intent","path":"/etc/m/a.conf","before":"absent","wrote":"` + ha + `"}`,
		at + `"command":"vfio bind","kind":"file","path":"/etc/m/a.conf","wrote":"` + ha + `"}`,
		at + `"command":"vfio bind","kind":"file-intent","path":"/etc/m/a.conf","backup":"` + bak + `","before":"` + ha + `","wrote":"` + hb + `"}`,
		at + `"command":"vfio bind","kind":"file","path":"/etc/m/a.conf","backup":"` + bak + `","wrote":"` + hb + `"}`,
		at2 + `"command":"vfio unbind","kind":"file-intent","path":"/etc/m/a.conf","backup":"` + bak2 + `","before":"` + hb + `","wrote":"absent"}`,
		at2 + `"command":"vfio unbind","kind":"file","path":"/etc/m/a.conf","backup":"` + bak2 + `","after":"removed","wrote":"absent"}`,
		at + `"command":"apply","kind":"file-intent","path":"/etc/m/a.conf","backup":"` + bak + `","before":"` + hb + `"}`,
	}, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"))
	// as a gpuprep from before Wrote wrote a removal: no "v", no "wrote"
	appendTo(t, filepath.Join(dir, Path), `{"time":"2026-01-02T03:04:10Z","command":"vfio unbind","kind":"file","path":"/etc/modprobe.d/gpuprep-vfio.conf","backup":"/etc/modprobe.d/gpuprep-vfio.conf.bak","after":"removed"}`+"\n")
	es, err := Read(root)
	require.NoError(t, err)
	require.Equal(t, DirRecord{Path: "/etc/m"}, es[0].Dir())
	require.Equal(t, FileRecord{Path: "/etc/m/a.conf", Before: Absent, Wrote: ha}, es[1].File())
	require.Equal(t, FileRecord{Path: "/etc/m/a.conf", Wrote: ha}, es[2].File())
	require.Equal(t, FileRecord{Path: "/etc/m/a.conf", Backup: bak, Before: ha, Wrote: hb}, es[3].File())
	require.Equal(t, ha, es[3].File().BackedUp())
	require.Empty(t, es[1].File().BackedUp(), "a new file has no backup to check")
	require.Equal(t, FileRecord{Path: "/etc/m/a.conf", Backup: bak2, Wrote: Absent, Removed: true}, es[6].File())
	require.True(t, es[6].File().Gone())
	require.False(t, es[4].File().Gone())
	old := es[8].File()
	require.Equal(t, FileRecord{Path: "/etc/modprobe.d/gpuprep-vfio.conf", Backup: "/etc/modprobe.d/gpuprep-vfio.conf.bak", Removed: true}, old)
	require.True(t, old.Gone(), "an older removal, without Wrote")
}
