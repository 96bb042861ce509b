package pci

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jaypipes/ghw"
	ghwpci "github.com/jaypipes/ghw/pkg/pci"
	"github.com/jaypipes/pcidb"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// ghwInventory is what ghw, the field's PCI discovery library, finds under
// dir: the oracle Discover must agree with.
func ghwInventory(t *testing.T, dir string) map[string]Device {
	t.Helper()
	empty := &pcidb.PCIDB{Classes: map[string]*pcidb.Class{}, Vendors: map[string]*pcidb.Vendor{}, Products: map[string]*pcidb.Product{}}
	info, err := ghwpci.New(ghw.WithChroot(dir), ghw.WithDisableTopology(), ghw.WithPCIDB(empty),
		ghw.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	out := map[string]Device{}
	for _, gd := range info.Devices {
		d := Device{Address: gd.Address, VendorID: gd.Vendor.ID, DeviceID: gd.Product.ID, Driver: gd.Driver,
			IOMMUGroup: gd.IOMMUGroup, Parent: gd.ParentAddress,
			Class: gd.Class.ID + gd.Subclass.ID + gd.ProgrammingInterface.ID}
		// ghw does not read physfn
		if t, err := os.Readlink(filepath.Join(dir, "sys/bus/pci/devices", gd.Address, "physfn")); err == nil {
			d.PhysFn = filepath.Base(t)
		}
		out[d.Address] = d
	}
	return out
}

func ours(t *testing.T, dir string) map[string]Device {
	t.Helper()
	return oursWith(t, dir, discovery{})
}

// oursWith is ours, read by dc.
func oursWith(t *testing.T, dir string, dc discovery) map[string]Device {
	t.Helper()
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	inv, err := dc.discover(root)
	require.NoError(t, err)
	out := map[string]Device{}
	for i, d := range inv.Devices {
		require.Same(t, d, inv.Get(d.Address))
		if i > 0 {
			require.Less(t, inv.Devices[i-1].Address, d.Address, "sorted by address")
		}
		out[d.Address] = *d
	}
	return out
}

// Every fixture scenario, discovered by Discover and by ghw: the same
// devices with the same identity, class, driver, group, parent and PF.
func TestDiscoverAgreesWithGHWOnEveryScenario(t *testing.T) {
	for _, n := range fixture.Names() {
		dir := filepath.Join(t.TempDir(), n)
		require.NoError(t, fixture.Build(n, dir))
		want := ghwInventory(t, dir)
		require.NotEmpty(t, want, n)
		require.Equal(t, want, ours(t, dir), n)
	}
}

// The same on this machine's own /sys (virtual devices on a CI runner, a
// real GPU node's hundreds of functions), where there is one.
func TestDiscoverAgreesWithGHWOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no /sys/bus/pci/devices here")
	}
	require.Equal(t, ghwInventory(t, "/"), ours(t, "/"))
}

func TestDiscoverWithoutPCI(t *testing.T) {
	inv := ours(t, t.TempDir())
	require.Empty(t, inv)
}

func TestDiscoverFallsBackToAttributes(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("hgx-h200", dir))
	dev := filepath.Join(dir, "sys/bus/pci/devices/0000:13:00.0")
	want := ours(t, dir)["0000:13:00.0"]
	require.Equal(t, "0302", want.BaseClass())

	for _, modalias := range []string{"", "pci:v000010DEd0000", "pci:v000010DEd00002335sv000010DEsd000018BEbc03sc0Zi00"} {
		require.NoError(t, os.WriteFile(filepath.Join(dev, "modalias"), []byte(modalias), 0o644))
		require.Equal(t, want, ours(t, dir)["0000:13:00.0"], "modalias %q", modalias)
	}
	require.NoError(t, os.Remove(filepath.Join(dev, "modalias")))
	require.Equal(t, want, ours(t, dir)["0000:13:00.0"])

	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dev, "class"), []byte("0x0302\n"), 0o644))
	_, err = Discover(root)
	require.ErrorContains(t, err, `sys/bus/pci/devices/0000:13:00.0/class: "0x0302" is not a PCI class ID`)
	require.NoError(t, os.Remove(filepath.Join(dev, "class")))
	_, err = Discover(root)
	require.ErrorContains(t, err, "/sys/bus/pci/devices/0000:13:00.0: no usable modalias, and open /sys/bus/pci/devices/0000:13:00.0/class: no such file")
}

// A symlink where an attribute should be is not followed: a fixture tree
// cannot make discovery read a file outside the root.
func TestDiscoverDoesNotFollowAttributeLinks(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("hgx-h200", dir))
	outside := filepath.Join(t.TempDir(), "modalias")
	require.NoError(t, os.WriteFile(outside, []byte("pci:v00001234d00005678sv00000000sd00000000bc03sc00i00\n"), 0o644))
	dev := filepath.Join(dir, "sys/bus/pci/devices/0000:13:00.0")
	require.NoError(t, os.Remove(filepath.Join(dev, "modalias")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dev, "modalias")))
	d := ours(t, dir)["0000:13:00.0"]
	require.Equal(t, "10de", d.VendorID, "the attributes, not the linked modalias")
}

func TestDiscoverRejectsBadEntries(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("hgx-h200", dir))
	devs := filepath.Join(dir, "sys/bus/pci/devices")
	root, err := host.NewRoot(dir)
	require.NoError(t, err)

	require.NoError(t, os.Symlink("../../../devices/nowhere", filepath.Join(devs, "0000:ff:00.0")))
	_, err = Discover(root)
	require.ErrorContains(t, err, "PCI discovery: ")
	require.ErrorContains(t, err, "0000:ff:00.0: no such file or directory")
	require.NoError(t, os.Remove(filepath.Join(devs, "0000:ff:00.0")))

	require.NoError(t, os.Mkdir(filepath.Join(devs, "bogus"), 0o755))
	_, err = Discover(root)
	require.ErrorContains(t, err, "/sys/bus/pci/devices/bogus: not a PCI address")
}

func TestIsAddress(t *testing.T) {
	for _, s := range []string{"0000:41:00.0", "0000:ff:1f.7", "10000:e1:00.0", "ffff:00:00.1"} {
		require.True(t, IsAddress(s), s)
	}
	for _, s := range []string{"", "41:00.0", "000:41:00.0", "0000:41:00.8", "0000:41:00", "0000:41:0g.0",
		"0000:41:00.0 ", "0000:4100.0", "00000:41:00.0", "0000:41:00:0", "0000:41:00.00", "000000000:41:00.0", "0000:41:00.", "abcd"} {
		require.False(t, IsAddress(s), s)
	}
}

// A device removed between the listing and its reading (SR-IOV VFs torn
// down, a hot unplug) is not there; the others are found.
func TestDiscoverSkipsADeviceRemovedMeanwhile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("hgx-h200", dir))
	want := ours(t, dir)
	require.Contains(t, want, "0000:13:00.0")
	link := filepath.Join(dir, "sys/bus/pci/devices/0000:13:00.0")
	target, err := os.Readlink(link)
	require.NoError(t, err)
	devDir := filepath.Join(filepath.Dir(link), target)

	got := oursWith(t, dir, discovery{beforeRead: func(addr string) {
		if addr == "0000:13:00.0" {
			require.NoError(t, os.Remove(link))
			require.NoError(t, os.RemoveAll(devDir))
		}
	}})
	delete(want, "0000:13:00.0")
	require.Equal(t, want, got)
}

// A device removed and added again at its address while it is read (VFs
// re-created) is read once more, afresh: the new device is found. One that
// keeps failing while listed is an error naming it.
func TestDiscoverRereadsADeviceAddedAgainMeanwhile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("hgx-h200", dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	const addr = "0000:13:00.0"
	devDir, err := filepath.EvalSymlinks(filepath.Join(dir, "sys/bus/pci/devices", addr))
	require.NoError(t, err)
	saved := filepath.Join(t.TempDir(), "saved")
	require.NoError(t, os.Rename(devDir, saved))
	recreate := func(deviceID string) {
		require.NoError(t, os.RemoveAll(devDir))
		require.NoError(t, exec.Command("cp", "-a", saved, devDir).Run())
		require.NoError(t, os.Remove(filepath.Join(devDir, "modalias"))) // read from the attribute files
		require.NoError(t, os.WriteFile(filepath.Join(devDir, "device"), []byte(deviceID+"\n"), 0o644))
	}
	recreate("0x2335")

	opens := 0
	inv, err := discovery{afterOpen: func(a string) {
		if a == addr {
			opens++
			if opens == 1 { // the open directory is gone; a new device is there
				recreate("0x2336")
			}
		}
	}}.discover(root)
	require.NoError(t, err)
	require.Equal(t, 2, opens, "read once more")
	d := inv.Get(addr)
	require.NotNil(t, d)
	require.Equal(t, "2336", d.DeviceID, "the device that is there now")

	opens = 0
	_, err = discovery{afterOpen: func(a string) {
		if a == addr {
			opens++
			recreate(fmt.Sprintf("0x%04x", 0x2340+opens))
		}
	}}.discover(root)
	require.ErrorContains(t, err, "PCI discovery: ")
	require.ErrorContains(t, err, addr)
	require.Equal(t, 2, opens, "not read a third time")
}
