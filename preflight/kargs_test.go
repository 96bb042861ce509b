package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// intel_iommu=on configured for the next boot while the IOMMU is active
// without it: not needed, so no "reboot pending" (plan plans no reboot for it).
func TestIntelIOMMUOnConfiguredButNotNeededAsksNoReboot(t *testing.T) {
	dir := build(t, fixture.HGX, func(b *fixture.Builder) {
		b.File("/boot/config-6.8.0-45-generic", "CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n")
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash iommu=pt\n")
		grubDefaults(b, "intel_iommu=on iommu=pt", true)
	})
	env, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, preflight.Pass, f.Status)
	require.Equal(t, "not needed: the IOMMU is active without it (the kernel's default: CONFIG_INTEL_IOMMU_DEFAULT_ON=y); /etc/default/grub has it for the next boot, where it changes nothing", f.Message)
	require.Empty(t, f.Remedy)
	k := env.KernelArgs()
	require.Len(t, k.Needed, 1)
	require.Equal(t, "iommu=pt", k.Needed[0].String())
	require.Contains(t, k.NotNeeded, "intel_iommu=on")
}
