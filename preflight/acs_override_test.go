package preflight_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
)

// A GPU alone in its IOMMU group on a kernel booted with
// pcie_acs_override= (Proxmox VE's kernel carries the patch), below a
// root port with no ACS capability: the group may be the override's, so
// iommu.groups does not pass on it (it did: "IOMMU group 6: the GPU").
func TestACSOverrideGroupIsNotProof(t *testing.T) {
	_, res := run(t, "proxmox-acs-override")
	f := one(t, res, "iommu.groups", "0000:02:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "booted with pcie_acs_override=downstream,multifunction")
	require.Contains(t, f.Message, "0000:00:1c.0 (root port) has no ACS capability")
	require.Contains(t, f.Message, "is not known from its log")
	require.Contains(t, f.Remedy, "boot without pcie_acs_override=")
}

// The patched kernel's own warning, where its log is read, is named.
func TestACSOverrideNamesTheKernelsWarning(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("proxmox-acs-override", dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	sel, _ := pci.ParseSelector(nil)
	env, err := preflight.NewEnv(root, host.NoRunner{}, sel, "")
	require.NoError(t, err)
	env.KernelLog = func() ([]byte, error) {
		return []byte("[    0.000000] Warning: PCIe ACS overrides enabled; This may allow non-IOMMU protected peer-to-peer DMA\n"), nil
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{})
	require.NoError(t, err)
	f := one(t, res, "iommu.groups", "0000:02:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, `the kernel logged "PCIe ACS overrides enabled; This may allow non-IOMMU protected peer-to-peer DMA"`)
}

// Where every port above the GPU has ACS of its own the override changes
// nothing for it (pcie_acs_overrides returns early for a device with an
// ACS capability), and without the argument the group stands: both pass.
func TestACSOverrideLeavesPortsWithACS(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.ProxmoxACSOverride(b)
	on := uint16(fixture.ACSIsolated)
	b.PCI(fixture.PCI{Addr: "0000:00:1c.0", Vendor: 0x8086, Device: 0xa190, Class: 0x060400, Driver: "pcieport", Group: 5, PCIeType: fixture.PCIeRootPort, ACS: &on})
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.groups", "0000:02:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "leaves ports with ACS of their own")

	dir = t.TempDir()
	b = fixture.New(dir)
	fixture.ProxmoxACSOverride(b)
	cmdline, err := os.ReadFile(filepath.Join(dir, "proc/cmdline"))
	require.NoError(t, err)
	b.File("/proc/cmdline", strings.Replace(string(cmdline), " pcie_acs_override=downstream,multifunction", "", 1))
	require.NoError(t, b.Err())
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.groups", "0000:02:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Equal(t, "IOMMU group 6: the GPU", f.Message)
}
