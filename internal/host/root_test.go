package host

import (
	"fmt"
	"os"
	"path/filepath"
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
		_, err = root.Open("/dev/cpu/0/msr")
		require.EqualError(t, err, "open /dev/cpu/0/msr: no such file or directory")
		_, err = root.ReadFile("dev/cpu/0/msr")
		require.EqualError(t, err, "open /dev/cpu/0/msr: no such file or directory")
		_, err = root.Stat("/dev/cpu/link")
		require.EqualError(t, err, "stat /dev/cpu/link: no such file or directory")
		_, err = root.Lstat("/dev/cpu/1")
		require.EqualError(t, err, "lstat /dev/cpu/1: no such file or directory")
		_, err = root.Readlink("/dev/cpu/0")
		require.EqualError(t, err, "readlink /dev/cpu/0: invalid argument")
		_, err = root.ReadDir("/dev/vfio")
		require.ErrorContains(t, err, " /dev/vfio: no such file or directory")
		_, err = root.OpenDir("/dev/vfio")
		require.EqualError(t, err, "open /dev/vfio: no such file or directory")
		require.NotContains(t, fmt.Sprint(err), dir)
	}
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
