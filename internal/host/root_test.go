package host

import (
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

	plain, err := NewRoot(dir)
	require.NoError(t, err)
	for _, r := range []*Root{plain, plain.ReadOnly()} {
		resolvesInside(t, r)
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
