package host

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRootResolvesLinksInsideTheRoot(t *testing.T) {
	dir := t.TempDir()
	mk := func(p, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644))
	}
	mk("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", "0x10de\n")
	mk("sys/bus/pci/drivers/vfio-pci/bind", "")
	mk("etc/real", "inside\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/bus/pci/devices"), 0o755))
	// relative link, as sysfs has
	require.NoError(t, os.Symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", filepath.Join(dir, "sys/bus/pci/devices/0000:01:00.0")))
	require.NoError(t, os.Symlink("../../../../bus/pci/drivers/vfio-pci", filepath.Join(dir, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver")))
	// absolute link: resolves inside the root, never on this machine's /etc
	require.NoError(t, os.Symlink("/etc/real", filepath.Join(dir, "etc/abs")))
	// a link that climbs above / stays at /
	require.NoError(t, os.Symlink("../../../../../../etc/real", filepath.Join(dir, "etc/climb")))
	require.NoError(t, os.Symlink("loop2", filepath.Join(dir, "etc/loop1")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(dir, "etc/loop2")))

	plain, walk := bothWays(t, dir)
	for _, r := range []*Root{plain, plain.ReadOnly(), walk, walk.ReadOnly()} {
		resolvesInside(t, r)
	}
	// Entries listed through an absolute link describe the root's files,
	// not this machine's.
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "etclink")))
	ents, err := plain.ReadDir("/etclink")
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if e.Name() == "real" {
			fi, err := e.Info()
			require.NoError(t, err)
			require.Equal(t, int64(len("inside\n")), fi.Size())
		}
	}
	require.Contains(t, names, "real")
	_, ok := plain.rootFD()
	require.True(t, ok, "this kernel has openat2: the tests above used it")
	require.False(t, plain.rfd.off.Load())

	// Both ways give the same answers, errors included, on every path.
	paths := []string{"/", "/etc", "/etc/abs", "/etc/climb", "/etc/loop1", "/etc/missing", "/etc/real/x", "/../etc/real",
		"/sys/bus/pci/devices", "/sys/bus/pci/devices/0000:01:00.0", "/sys/bus/pci/devices/0000:01:00.0/driver",
		"/sys/bus/pci/devices/0000:01:00.0/driver/../../../../devices", "/sys/bus/pci/devices/0000:01:00.0/vendor/"}
	for _, p := range paths {
		b1, e1 := plain.ReadFile(p)
		b2, e2 := walk.ReadFile(p)
		require.Equal(t, string(b2), string(b1), p)
		require.Equal(t, e2 == nil, e1 == nil, "%s: %v / %v", p, e1, e2)
		s1, e1 := plain.Stat(p)
		s2, e2 := walk.Stat(p)
		require.Equal(t, e2 == nil, e1 == nil, "%s: %v / %v", p, e1, e2)
		if e1 == nil {
			require.Equal(t, s2.Mode(), s1.Mode(), p)
			require.True(t, os.SameFile(s1, s2), p)
		} else {
			require.Equal(t, os.IsNotExist(e2), os.IsNotExist(e1), "%s: %v / %v", p, e1, e2)
		}
		require.Equal(t, walk.Names(p), plain.Names(p), p)
		l1, e1 := plain.Readlink(p)
		l2, e2 := walk.Readlink(p)
		require.Equal(t, l2, l1, p)
		require.Equal(t, e2 == nil, e1 == nil, "%s: %v / %v", p, e1, e2)
	}
}

func resolvesInside(t *testing.T, r *Root) {
	require.False(t, r.IsLive())
	v, err := r.ReadString("/sys/bus/pci/devices/0000:01:00.0/vendor")
	require.NoError(t, err)
	require.Equal(t, "0x10de", v)
	require.Equal(t, "vfio-pci", r.LinkBase("/sys/bus/pci/devices/0000:01:00.0/driver"))
	require.True(t, r.Exists("/sys/bus/pci/devices/0000:01:00.0/driver/bind"))
	rp, err := r.Realpath("/sys/bus/pci/devices/0000:01:00.0")
	require.NoError(t, err)
	require.Equal(t, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", rp)
	for _, p := range []string{"/etc/abs", "/etc/climb"} {
		v, err = r.ReadString(p)
		require.NoError(t, err, p)
		require.Equal(t, "inside", v, p)
	}
	_, err = r.ReadFile("/etc/loop1")
	require.ErrorContains(t, err, "too many levels of symbolic links")
	require.Equal(t, "", r.LinkBase("/sys/bus/pci/devices/0000:99:00.0/driver"))
	m, err := r.Glob("/sys/bus/pci/devices/*/vendor")
	require.NoError(t, err)
	require.Equal(t, []string{"/sys/bus/pci/devices/0000:01:00.0/vendor"}, m)
	require.Equal(t, []string{"0000:01:00.0"}, r.Names("/sys/bus/pci/devices"))
}

// Errors from a fixture root name host paths, as on the live host: a report made from a node's snapshot reads as
// the one made on the node (a real H200's MSR message differed only in naming the snapshot's directory).
func TestRootErrorsNameHostPaths(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev/cpu/0"), 0o755))
	require.NoError(t, os.Symlink("../../dev/cpu/9", filepath.Join(dir, "dev/cpu/link")))
	r, err := NewRoot(dir)
	require.NoError(t, err)
	for _, root := range []*Root{r, r.ReadOnly()} {
		var errs []error
		_, err = root.Open("/dev/cpu/0/msr")
		errs = append(errs, err)
		require.EqualError(t, err, "open /dev/cpu/0/msr: no such file or directory")
		_, err = root.ReadFile("dev/cpu/0/msr")
		errs = append(errs, err)
		require.EqualError(t, err, "open /dev/cpu/0/msr: no such file or directory")
		_, err = root.Stat("/dev/cpu/link")
		errs = append(errs, err)
		require.EqualError(t, err, "stat /dev/cpu/link: no such file or directory")
		_, err = root.Lstat("/dev/cpu/1")
		errs = append(errs, err)
		require.EqualError(t, err, "lstat /dev/cpu/1: no such file or directory")
		_, err = root.Readlink("/dev/cpu/0")
		errs = append(errs, err)
		require.EqualError(t, err, "readlink /dev/cpu/0: invalid argument")
		_, err = root.ReadDir("/dev/vfio")
		errs = append(errs, err)
		require.ErrorContains(t, err, " /dev/vfio: no such file or directory")
		_, err = root.OpenDir("/dev/vfio")
		errs = append(errs, err)
		require.EqualError(t, err, "open /dev/vfio: no such file or directory")
		_, err = root.ReadAt("/dev/cpu/link", 0x3a, 8)
		errs = append(errs, err)
		require.EqualError(t, err, "open /dev/cpu/link: no such file or directory")
		for _, e := range errs {
			require.NotContains(t, fmt.Sprint(e), dir)
		}
	}
}

// A file read only at offsets is kept in a snapshot as text (SparseMagic), and ReadAt answers from it as the host
// answered: the bytes, or the same error (a non-root user's open, an MSR the CPU refuses).
func TestSparseTextAnswersAsTheHostDid(t *testing.T) {
	dir := t.TempDir()
	spans := []Span{
		{Off: 0x3a, N: 8, Seen: Seen{Data: []byte{5, 0, 0, 0, 0, 0, 0, 0}}},
		{Off: 0xc0010114, N: 8, Seen: Seen{Err: &fs.PathError{Op: "read", Path: "/dev/cpu/0/msr", Err: syscall.EIO}}},
		{Off: 0x10, N: 8, Seen: Seen{Err: &fs.PathError{Op: "open", Path: "/dev/cpu/0/msr", Err: syscall.EACCES}}},
		{Off: 0x20, N: 8, Seen: Seen{Err: io.EOF}},
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev/cpu/0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev/cpu/0/msr"), SparseText(spans), 0o644))
	r, err := NewRoot(dir)
	require.NoError(t, err)
	b, err := r.ReadAt("/dev/cpu/0/msr", 0x3a, 8)
	require.NoError(t, err)
	require.Equal(t, []byte{5, 0, 0, 0, 0, 0, 0, 0}, b)
	_, err = r.ReadAt("/dev/cpu/0/msr", 0xc0010114, 8)
	require.EqualError(t, err, "read /dev/cpu/0/msr: input/output error")
	_, err = r.ReadAt("/dev/cpu/0/msr", 0x10, 8)
	require.EqualError(t, err, "open /dev/cpu/0/msr: permission denied")
	require.ErrorIs(t, err, fs.ErrPermission)
	_, err = r.ReadAt("/dev/cpu/0/msr", 0x20, 8)
	require.ErrorIs(t, err, io.EOF)
	_, err = r.ReadAt("/dev/cpu/0/msr", 0x99, 8)
	require.ErrorIs(t, err, io.EOF, "an offset never read reads as the end of the file")

	// A binary sparse file (as the fixtures write MSRs) still reads as bytes at offsets.
	bin := make([]byte, 0x3a+8)
	bin[0x3a] = 7
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev/cpu/0/msr"), bin, 0o644))
	b, err = r.ReadAt("/dev/cpu/0/msr", 0x3a, 8)
	require.NoError(t, err)
	require.Equal(t, byte(7), b[0])
}

// A recording root notes how each path was read and what whole-file reads returned; a directory only opened
// (attributes read by name) is not noted as listed.
func TestRecorderNotesWhatWasRead(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/dev"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sys/dev/vendor"), []byte("0x10de\n"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sys/dev/unread"), []byte("x\n"), 0o644))
	plain, err := NewRoot(dir)
	require.NoError(t, err)
	rec := NewRecorder()
	r := plain.Recording(rec).ReadOnly()
	require.True(t, r.IsRecording())
	require.False(t, plain.IsRecording())
	d, err := r.OpenDir("/sys/dev")
	require.NoError(t, err)
	v, err := d.ReadString("vendor")
	require.NoError(t, err)
	require.Equal(t, "0x10de", v)
	_, err = d.ReadString("missing")
	require.Error(t, err)
	require.NoError(t, d.Close())
	require.False(t, r.Exists("/sys/nothing"))
	_, err = r.ReadFile("/sys/dev/unread")
	require.NoError(t, err)
	require.Equal(t, []string{"unread", "vendor"}, r.Names("/sys/dev"))

	paths, acc := rec.Paths()
	require.Equal(t, []string{"/sys/dev", "/sys/dev/missing", "/sys/dev/unread", "/sys/dev/vendor", "/sys/nothing"}, paths)
	require.Equal(t, AccessStat|AccessList, acc["/sys/dev"], "opened, then listed by Names")
	require.Equal(t, AccessFile, acc["/sys/dev/vendor"])
	require.Equal(t, AccessStat, acc["/sys/nothing"])
	seen, ok := rec.Seen("/sys/dev/vendor")
	require.True(t, ok)
	require.Equal(t, "0x10de\n", string(seen.Data), "as read, before trimming")
	seen, ok = rec.Seen("/sys/dev/missing")
	require.True(t, ok)
	require.ErrorIs(t, seen.Err, fs.ErrNotExist)
	_, ok = rec.Seen("/sys/dev")
	require.False(t, ok)

	// Only the first read of a file is kept: what gpuprep's verdict came from.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sys/dev/unread"), []byte("changed\n"), 0o644))
	_, err = r.ReadFile("/sys/dev/unread")
	require.NoError(t, err)
	seen, _ = rec.Seen("/sys/dev/unread")
	require.Equal(t, "x\n", string(seen.Data))
}

func TestRunnersTakeArgvOnly(t *testing.T) {
	out, err := ExecRunner{}.Run(t.Context(), "printf", "%s", "a; echo injected")
	require.NoError(t, err)
	require.Equal(t, "a; echo injected", string(out))
	_, err = ExecRunner{}.Run(t.Context(), "false")
	require.Error(t, err)
	r, _ := NewRoot(t.TempDir())
	_, err = DefaultRunner(r).Run(t.Context(), "true")
	require.ErrorIs(t, err, ErrNoCommands)
}

// bothWays returns two Roots for dir: one that resolves paths with
// openat2, one that walks them itself, as on a kernel without openat2.
func bothWays(t *testing.T, dir string) (plain, walk *Root) {
	t.Helper()
	plain, err := NewRoot(dir)
	require.NoError(t, err)
	walk, err = NewRoot(dir)
	require.NoError(t, err)
	walk.rfd.off.Store(true)
	return plain, walk
}

// A part of a file read twice (two commands replayed in one snapshot read
// the same MSR) is recorded once.
func TestRecorderKeepsEachSpanOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev/cpu/0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev/cpu/0/msr"), []byte("0123456789abcdef"), 0o600))
	r, err := NewRoot(dir)
	require.NoError(t, err)
	rec := NewRecorder()
	rr := r.Recording(rec)
	for i := 0; i < 2; i++ {
		_, err := rr.ReadAt("/dev/cpu/0/msr", 8, 8)
		require.NoError(t, err)
	}
	_, err = rr.ReadAt("/dev/cpu/0/msr", 0, 8)
	require.NoError(t, err)
	spans := rec.Spans()["/dev/cpu/0/msr"]
	require.Len(t, spans, 2)
	require.Equal(t, []byte("89abcdef"), spans[0].Data)
}

// A regular file larger than gpuprep reads whole (a snapshot's file can be
// of any size) is refused before anything is allocated for it.
func TestReadFileRefusesAHugeRegularFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30)) // sparse: no disk used
	require.NoError(t, f.Close())
	root, err := NewRoot(dir)
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = root.ReadFile("/big")
	runtime.ReadMemStats(&after)
	require.ErrorContains(t, err, "/big")
	require.ErrorContains(t, err, "more than gpuprep reads")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "allocated for a file it refuses")
}
