package vfio

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// The consumer-shared-group remedy once was "--select the other devices
// too": the plan then bound (and persisted, ids= and softdeps) the host's
// SATA, NIC and USB controllers to vfio-pci. Each is refused, named with its
// class and driver, and nothing is written.
func TestPlanRefusesSelectedHostDevices(t *testing.T) {
	t.Parallel()
	k := sim(t, "consumer-shared-group")
	inv := inventory(t, k)
	for _, persist := range []bool{false, true} {
		o := opts()
		o.Persist = persist
		_, err := NewPlan(k.Root, inv, selector(t, "10de", "00:14.0", "00:17.0", "03:00.0"), o)
		var r *Refused
		require.ErrorAs(t, err, &r)
		require.Len(t, r.Reasons, 3, "%v", r.Reasons)
		for i, want := range []string{
			"0000:00:14.0 (USB controller 8086:7ae0, driver xhci_hcd) is selected but drives host USB ports",
			"0000:00:17.0 (SATA controller 8086:7ae2, driver ahci) is selected but holds host storage",
			"0000:03:00.0 (Ethernet controller 8086:15f3, driver igc) is selected but carries host network traffic",
		} {
			require.Contains(t, r.Reasons[i], want)
			require.Contains(t, r.Reasons[i], "gpuprep does not give storage, network, USB or other host controllers to VMs")
			require.Contains(t, r.Reasons[i], "--allow-host-devices")
		}
	}
	require.Empty(t, k.Writes)
}

// With AllowHostDevices they go, and the plan says what the host loses.
func TestAllowHostDevicesWarns(t *testing.T) {
	t.Parallel()
	k := sim(t, "consumer-shared-group")
	o := opts()
	o.AllowHostDevices = true
	_, p := plan(t, k, o, "10de", "00:14.0", "00:17.0", "03:00.0")
	require.Len(t, p.Targets, 5)
	w := strings.Join(p.Warnings, "\n")
	require.Contains(t, w, "--allow-host-devices: 0000:00:17.0 (SATA controller, driver ahci) goes to VFIO: the host loses it")
	require.Contains(t, w, "0000:00:14.0 (USB controller")
	require.Contains(t, w, "0000:03:00.0 (Ethernet controller")
}

// A NIC alone in its group (an HGX ConnectX) was bound when selected.
func TestPlanRefusesAHostDeviceInItsOwnGroup(t *testing.T) {
	t.Parallel()
	k := sim(t, "hgx-h200")
	inv := inventory(t, k)
	_, err := NewPlan(k.Root, inv, selector(t, "0000:14:00.0"), opts())
	var r *Refused
	require.ErrorAs(t, err, &r)
	require.Contains(t, err.Error(), "0000:14:00.0 (InfiniBand controller 15b3:1021, driver mlx5_core) is selected but carries host network traffic")

	// a GPU beside it is fine
	_, p := plan(t, k, opts(), "0000:13:00.0")
	require.Len(t, p.Targets, 1)
}

// The default hint for a shared group ("select it too") only where the
// other members may go to a VM: another GPU yes, the host's controllers no.
func TestSharedGroupHint(t *testing.T) {
	t.Parallel()
	k := sim(t, "consumer-shared-group")
	_, err := NewPlan(k.Root, inventory(t, k), pci.Selector{}, opts())
	require.ErrorContains(t, err, "move the card to a slot with its own IOMMU group")
	require.ErrorContains(t, err, "0000:00:17.0 (SATA controller) holds host storage")
	require.NotContains(t, err.Error(), "select it too")

	k = sim(t, "two-gpus-one-group")
	inv := inventory(t, k)
	_, err = NewPlan(k.Root, inv, selector(t, "0000:03:00.0"), opts())
	require.ErrorContains(t, err, "IOMMU group 3 also holds 0000:04:00.0")
	require.ErrorContains(t, err, "select it too")
	// and selecting both GPUs works
	p, err := NewPlan(k.Root, inv, selector(t, "0000:03:00.0", "0000:04:00.0"), opts())
	require.NoError(t, err)
	require.Len(t, p.Targets, 2)
	require.Empty(t, p.Warnings)
}

// A Turing card's USB and UCSI functions are part of the card: selecting
// the GPU, or the USB function itself, takes the whole card. An APU's USB
// controllers share the slot of its GPU but are the chipset's (another
// vendor): not part of a card.
func TestSameSlotFunctions(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction", func(b *fixture.Builder) {
		b.PCI(fixture.PCI{Addr: "0000:00:08.1", Vendor: 0x1022, Device: 0x14eb, Class: 0x060400, Driver: "pcieport", Group: 9, PCIeType: fixture.PCIeRootPort})
		for _, f := range []fixture.PCI{
			{Addr: "0000:c5:00.0", Vendor: 0x1002, Device: 0x15bf, Class: 0x030000, Driver: "amdgpu"},
			{Addr: "0000:c5:00.1", Vendor: 0x1002, Device: 0x1640, Class: 0x040300, Driver: "snd_hda_intel"},
			{Addr: "0000:c5:00.3", Vendor: 0x1022, Device: 0x15b9, Class: 0x0c0330, Driver: "xhci_hcd"},
		} {
			f.Parent, f.Group, f.PCIeType = "0000:00:08.1", 9, fixture.PCIeEndpoint
			b.PCI(f)
		}
	})
	_, err := NewPlan(k.Root, inventory(t, k), selector(t, "0000:c5:00.0"), opts())
	require.ErrorContains(t, err, "0000:c5:00.3 (USB controller 1022:15b9, driver xhci_hcd) is a function of the same device as 0000:c5:00.0 and drives host USB ports")
	require.NotContains(t, err.Error(), "0000:c5:00.1", "the GPU's own audio function is fine")

	for _, s := range []string{"0000:01:00.0", "0000:01:00.2"} {
		_, p := plan(t, k, opts(), s)
		require.Len(t, p.Targets, 4, s)
		require.Empty(t, p.Warnings, s)
	}
}

// A bridge is never a target: vfio-pci takes none, and unbinding pcieport
// from a root port takes hotplug and AER from what is below it.
func TestPlanRefusesASelectedBridge(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction")
	o := opts()
	o.AllowHostDevices = true
	_, err := NewPlan(k.Root, inventory(t, k), selector(t, "0000:00:01.0"), o)
	require.ErrorContains(t, err, "0000:00:01.0 is a PCI bridge (class 060400, driver pcieport): vfio-pci does not take bridges")
	require.Empty(t, k.Writes)
}

func TestHostDeviceClasses(t *testing.T) {
	t.Parallel()
	dev := func(addr, vendor, class string) *pci.Device {
		return &pci.Device{Address: addr, VendorID: vendor, DeviceID: "0001", Class: class}
	}
	gpu := dev("0000:01:00.0", "10de", "030000")
	inv := &pci.Inventory{Devices: []*pci.Device{gpu}}
	for _, tc := range []struct {
		class, kind string
	}{
		{"010802", "NVMe controller"}, {"010400", "RAID controller"}, {"018000", "mass storage controller"},
		{"020000", "Ethernet controller"}, {"028000", "network controller"}, {"0d8000", "wireless controller"},
		{"0c0330", "USB controller"}, {"0c0500", "SMBus controller"}, {"0c0400", "Fibre Channel controller"},
		{"060100", "ISA/LPC bridge"}, {"080600", "IOMMU"}, {"088000", "system peripheral"}, {"090000", "input device controller"},
		{"050000", "memory controller"}, {"ff0000", "class ff00 device"},
	} {
		u, ok := HostDevice(inv, dev("0000:00:1f.0", "8086", tc.class))
		require.True(t, ok, tc.class)
		require.Equal(t, tc.kind, u.Kind, tc.class)
		require.NotEmpty(t, u.Why, tc.class)
	}
	for _, c := range []string{"030000", "030200", "038000", "040300", "048000", "120000"} {
		_, ok := HostDevice(inv, dev("0000:41:00.0", "1234", c))
		require.False(t, ok, c)
	}
	_, ok := HostDevice(inv, dev("0000:91:00.0", "10de", "068000"))
	require.False(t, ok, "an NVSwitch")
	_, ok = HostDevice(inv, dev("0000:91:00.0", "8086", "068000"))
	require.True(t, ok, "another vendor's bridge")
	// a function of the GPU card (same slot and vendor) is part of it
	_, ok = HostDevice(inv, dev("0000:01:00.2", "10de", "0c0330"))
	require.False(t, ok)
	_, ok = HostDevice(inv, dev("0000:01:00.2", "1022", "0c0330"))
	require.True(t, ok, "same slot, other vendor")
	_, ok = HostDevice(inv, dev("0000:02:00.2", "10de", "0c0330"))
	require.True(t, ok, "same vendor, other slot")
}
