package iommu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
)

func setup(t *testing.T, build func(*fixture.Builder)) (*host.Root, *pci.Inventory) {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	build(b)
	require.NoError(t, b.Err())
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	inv, err := pci.Discover(root)
	require.NoError(t, err)
	return root, inv
}

func u16(v uint16) *uint16 { return &v }

// A small topology: root port → switch upstream → downstream port → GPU,
// with a foreign NIC on a second downstream port in the same group.
func topo(rootACS, downACS *uint16, cfgSize int) func(*fixture.Builder) {
	return func(b *fixture.Builder) {
		b.PCI(fixture.PCI{Addr: "0000:00:01.0", Vendor: 0x8086, Device: 1, Class: 0x060400, Group: 1, PCIeType: fixture.PCIeRootPort, ACS: rootACS, ConfigSize: cfgSize})
		b.PCI(fixture.PCI{Addr: "0000:01:00.0", Parent: "0000:00:01.0", Vendor: 0x10b5, Device: 2, Class: 0x060400, Group: 1, PCIeType: fixture.PCIeUpstream, ConfigSize: cfgSize})
		b.PCI(fixture.PCI{Addr: "0000:02:00.0", Parent: "0000:01:00.0", Vendor: 0x10b5, Device: 2, Class: 0x060400, Group: 1, PCIeType: fixture.PCIeDownstream, ACS: downACS, ConfigSize: cfgSize})
		b.PCI(fixture.PCI{Addr: "0000:02:01.0", Parent: "0000:01:00.0", Vendor: 0x10b5, Device: 2, Class: 0x060400, Group: 1, PCIeType: fixture.PCIeDownstream, ACS: downACS, ConfigSize: cfgSize})
		b.PCI(fixture.PCI{Addr: "0000:03:00.0", Parent: "0000:02:00.0", Vendor: 0x10de, Device: 0x2335, Class: 0x030200, Group: 1, PCIeType: fixture.PCIeEndpoint})
		b.PCI(fixture.PCI{Addr: "0000:03:00.1", Parent: "0000:02:00.0", Vendor: 0x10de, Device: 0x22ba, Class: 0x040300, Group: 1, PCIeType: fixture.PCIeEndpoint})
		b.PCI(fixture.PCI{Addr: "0000:04:00.0", Parent: "0000:02:01.0", Vendor: 0x15b3, Device: 0x1021, Class: 0x020000, Driver: "mlx5_core", Group: 1, PCIeType: fixture.PCIeEndpoint})
	}
}

func TestViabilityRoles(t *testing.T) {
	_, inv := setup(t, topo(u16(fixture.ACSIsolated), nil, 0))
	gpu := inv.Get("0000:03:00.0")
	v := Viability(inv, gpu, []*pci.Device{gpu})
	require.False(t, v.Viable)
	roles := map[string]Role{}
	for _, m := range v.Members {
		roles[m.Dev.Address] = m.Role
	}
	require.Equal(t, map[string]Role{
		"0000:00:01.0": RoleBridge, "0000:01:00.0": RoleBridge, "0000:02:00.0": RoleBridge, "0000:02:01.0": RoleBridge,
		"0000:03:00.0": RoleGPU, "0000:03:00.1": RoleFunction, "0000:04:00.0": RoleForeign,
	}, roles)
	// Selecting the NIC too makes the group viable, shared.
	nic := inv.Get("0000:04:00.0")
	v = Viability(inv, gpu, []*pci.Device{gpu, nic})
	require.True(t, v.Viable)
	require.Equal(t, []*pci.Device{nic}, v.Shared)
	// No group: not viable.
	gpu.IOMMUGroup = ""
	require.False(t, Viability(inv, gpu, nil).Viable)
}

func TestIsolationNamesThePortWithoutACS(t *testing.T) {
	root, inv := setup(t, topo(u16(fixture.ACSIsolated), nil, 0))
	// The switch's upstream port has no ACS either, and is not named: the kernel asks ACS of an upstream port
	// only in a multi-function device.
	require.Equal(t, []string{
		"0000:02:00.0 (switch downstream port) has no ACS capability",
	}, Isolation(root, inv, inv.Get("0000:03:00.0")))
	// A multi-function upstream port (another function in its slot) is named.
	root, inv = setup(t, func(b *fixture.Builder) {
		topo(u16(fixture.ACSIsolated), nil, 0)(b)
		b.PCI(fixture.PCI{Addr: "0000:01:00.1", Parent: "0000:00:01.0", Vendor: 0x10b5, Device: 3, Class: 0x088000, Group: 1, PCIeType: fixture.PCIeEndpoint})
	})
	require.Equal(t, []string{
		"0000:02:00.0 (switch downstream port) has no ACS capability",
		"0000:01:00.0 (switch upstream port) has no ACS capability",
	}, Isolation(root, inv, inv.Get("0000:03:00.0")))
}

func TestIsolationNamesDisabledACSBits(t *testing.T) {
	root, inv := setup(t, topo(u16(fixture.ACSIsolated), u16(fixture.ACSSV), 0))
	got := Isolation(root, inv, inv.Get("0000:03:00.0"))
	require.Contains(t, got[0], "0000:02:00.0 (switch downstream port) has ACS but RR (P2P request redirect), CR (P2P completion redirect), UF (upstream forwarding) disabled (control 0x0001)")
}

func TestIsolationWithoutExtendedConfigSaysSo(t *testing.T) {
	root, inv := setup(t, topo(u16(fixture.ACSIsolated), u16(fixture.ACSIsolated), 64))
	got := Isolation(root, inv, inv.Get("0000:03:00.0"))
	require.Contains(t, got[0], "cannot read the extended config space of 0000:02:00.0 (only 64 bytes readable: run as root to read ACS)")
	root, inv = setup(t, topo(u16(fixture.ACSIsolated), u16(fixture.ACSIsolated), 256))
	got = Isolation(root, inv, inv.Get("0000:03:00.0"))
	require.Contains(t, got[0], "cannot read the extended config space of 0000:02:00.0 (only 256 bytes readable: run as root to read ACS)")
}

func TestIsolationPCIeToPCIBridge(t *testing.T) {
	root, inv := setup(t, func(b *fixture.Builder) {
		b.PCI(fixture.PCI{Addr: "0000:00:05.0", Vendor: 0x1b36, Device: 0xc, Class: 0x060400, Group: 9, PCIeType: fixture.PCIeRootPort, ACS: u16(fixture.ACSIsolated)})
		b.PCI(fixture.PCI{Addr: "0000:02:00.0", Parent: "0000:00:05.0", Vendor: 0x1b36, Device: 0xe, Class: 0x060400, Group: 10, PCIeType: fixture.PCIeToPCIBridge})
		b.PCI(fixture.PCI{Addr: "0000:03:01.0", Parent: "0000:02:00.0", Vendor: 0x1234, Device: 0x11e8, Class: 0x00ff00, Group: 10, PCIeType: -1})
	})
	got := Isolation(root, inv, inv.Get("0000:03:01.0"))
	require.Equal(t, "0000:02:00.0 is a PCIe-to-PCI bridge: devices behind it share its requester ID and cannot be isolated from each other", got[0])
}

func TestRemappingEvidence(t *testing.T) {
	root, _ := setup(t, func(b *fixture.Builder) {
		b.IOMMU("dmar0", 1<<3).IOMMU("dmar1", 0)
		b.Interrupts("IR-IO-APIC", "IR-PCI-MSI-0000:00:14.0", "DMAR-MSI")
		b.Module("vfio_iommu_type1", map[string]string{"allow_unsafe_interrupts": "Y"})
	})
	k := ReadKernel(root)
	r := ReadRemapping(root, k)
	require.True(t, r.Known && r.Enabled && r.Unsafe)
	require.Equal(t, "IR-IO-APIC, IR-PCI-MSI-0000:00:14.0", r.Evidence)
	require.Equal(t, []string{"dmar0"}, r.Capable)
	require.Equal(t, []string{"dmar1"}, r.Incapable)
}
