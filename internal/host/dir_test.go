package host

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestDirReadsEntriesByName(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/bus/pci/devices"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etc/secret"), []byte("outside the device\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dev, "vendor"), []byte("0x10de\n"), 0o644))
	big := strings.Repeat("0123456789abcdef", 1000) // 16000 bytes: more than one read
	require.NoError(t, os.WriteFile(filepath.Join(dev, "big"), []byte(big+"\n"), 0o644))
	long := "../../../../bus/pci/drivers/" + strings.Repeat("d", 300) // more than the first buffer
	require.NoError(t, os.Symlink(long, filepath.Join(dev, "driver")))
	require.NoError(t, os.Symlink("/etc/secret", filepath.Join(dev, "modalias")))
	require.NoError(t, os.Symlink("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", filepath.Join(dir, "sys/bus/pci/devices/0000:01:00.0")))
	require.NoError(t, unix.Mkfifo(filepath.Join(dev, "fifo"), 0o644))
	zero := unix.Mknod(filepath.Join(dev, "zero"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))) == nil // /dev/zero; root only

	plain, walk := bothWays(t, dir)
	for _, r := range []*Root{plain, walk, walk.ReadOnly()} {
		d, err := r.OpenDir("/sys/bus/pci/devices/0000:01:00.0")
		require.NoError(t, err)
		require.Equal(t, "/sys/bus/pci/devices/0000:01:00.0", d.Path())

		s, err := d.ReadString("vendor")
		require.NoError(t, err)
		require.Equal(t, "0x10de", s)
		s, err = d.ReadString("big")
		require.NoError(t, err)
		require.Equal(t, big, s)

		target, err := d.Readlink("driver")
		require.NoError(t, err)
		require.Equal(t, long, target)
		require.Equal(t, strings.Repeat("d", 300), d.LinkBase("driver"))
		require.Equal(t, "", d.LinkBase("iommu_group"))

		// an attribute that is a link is refused, never followed
		_, err = d.ReadString("modalias")
		require.EqualError(t, err, "open /sys/bus/pci/devices/0000:01:00.0/modalias: too many levels of symbolic links",
			"the error names the host path, not the file standing in for it")
		for _, bad := range []string{"", ".", "..", "../vendor", "x/y"} {
			_, err = d.ReadString(bad)
			require.ErrorContains(t, err, "not a single path element", "%q", bad)
			_, err = d.Readlink(bad)
			require.ErrorContains(t, err, "not a single path element", "%q", bad)
		}
		_, err = d.ReadString("missing")
		require.ErrorContains(t, err, "no such file or directory")
		// a FIFO is refused without blocking; a file without end is not
		// read forever
		_, err = d.ReadString("fifo")
		require.ErrorIs(t, err, ErrNotRegular)
		require.ErrorContains(t, err, "/sys/bus/pci/devices/0000:01:00.0/fifo: not a regular file (a FIFO)")
		if zero {
			_, err = d.ReadString("zero")
			require.ErrorContains(t, err, "more than 64 KiB: not an attribute")
		}

		// Names twice: the directory is read from its start each time
		for i := 0; i < 2; i++ {
			names, err := d.Names()
			require.NoError(t, err)
			sort.Strings(names)
			want := []string{"big", "driver", "fifo", "modalias", "vendor", "zero"}
			if !zero {
				want = want[:5]
			}
			require.Equal(t, want, names)
		}
		require.NoError(t, d.Close())

		_, err = r.OpenDir("/sys/bus/pci/devices/0000:02:00.0")
		require.ErrorIs(t, err, os.ErrNotExist)
		_, err = r.OpenDir("/etc/secret")
		require.Error(t, err, "not a directory")
	}
}
