package preflight_test

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

const offKernel = "5.15.0-91-generic" // fixture.IOMMUOffKernel's

// An Intel node whose kernel is built CONFIG_INTEL_IOMMU_DEFAULT_ON=y
// (Ubuntu 24.04's and Proxmox VE's 6.8: debian.master/config/annotations)
// and whose IOMMU did not start, with nothing on the command line turning
// it off: intel_iommu=on only sets dmar_disabled = 0, which the kernel
// already did, so iommu.cmdline does not ask for it (it failed with "the
// kernel enables the Intel IOMMU by default (…) yet it is not active" and
// sent the node to grub ensure), and says as iommu.kernel does that it
// changes nothing; plan and grub ensure leave it out.
func TestIntelDefaultOnInactiveAgreesWithIOMMUKernel(t *testing.T) {
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/boot/config-"+offKernel, "CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n")
	})
	env, res := runRoot(t, dir)
	k := one(t, res, "iommu.kernel", "/sys/class/iommu", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, k.Status)
	require.Contains(t, k.Message, "the kernel enables the Intel IOMMU by default (CONFIG_INTEL_IOMMU_DEFAULT_ON=y in /boot/config-5.15.0-91-generic), so intel_iommu=on changes nothing")
	require.Contains(t, k.Remedy, "rebooting will not help")
	require.False(t, k.Fixable)

	f := one(t, res, "iommu.cmdline", "intel_iommu=on", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Equal(t, "not needed: the kernel enables the Intel IOMMU by default (CONFIG_INTEL_IOMMU_DEFAULT_ON=y in /boot/config-5.15.0-91-generic), so it changes nothing; the IOMMU is inactive for another reason (see iommu.kernel)", f.Message)
	require.False(t, f.Fixable)
	require.Empty(t, f.FixCommand)

	ka := env.KernelArgs()
	require.Len(t, ka.Needed, 1)
	require.Equal(t, "iommu=pt", ka.Needed[0].String())
	require.Contains(t, ka.NotNeeded, "intel_iommu=on")
	require.Contains(t, res.Modes[preflight.VMPassthrough].Blockers, "iommu.kernel")
}

// Debian's choice (intel-iommu-add-kconfig-option-to-exclude-igpu-by-default
// .patch): "on, integrated GPU off" is on.
func TestIntelDefaultOnIntGPUOffIsOn(t *testing.T) {
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/boot/config-"+offKernel, "CONFIG_INTEL_IOMMU=y\n# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set\nCONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y\n# CONFIG_INTEL_IOMMU_DEFAULT_OFF is not set\n")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y in /boot/config-5.15.0-91-generic")
}

// No /boot/config for the running kernel and no /proc/config.gz: whether
// the kernel turns the IOMMU on by default is unknown, and both checks say
// what was missing; iommu.cmdline warns instead of calling the argument
// needed (it failed with "needed to turn the Intel IOMMU on").
func TestIntelDefaultUnreadableSaysWhatWasMissing(t *testing.T) {
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) { b.Remove("/boot/config-" + offKernel) })
	env, res := runRoot(t, dir)
	const missing = "whether the running kernel turns the Intel IOMMU on by default is unknown: neither /boot/config-5.15.0-91-generic (missing) nor /proc/config.gz (missing) could be read"
	f := one(t, res, "iommu.cmdline", "intel_iommu=on", preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, missing)
	require.Contains(t, f.Message, "where it does not, intel_iommu=on is what turns the IOMMU on")
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)

	k := one(t, res, "iommu.kernel", "/sys/class/iommu", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, k.Status)
	require.Contains(t, k.Message, missing)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", k.FixCommand)
	// adding it is harmless and may be what turns it on: grub ensure adds it
	require.Len(t, env.KernelArgs().Needed, 2)
}

// Arch Linux installs no /boot/config: the running kernel's configuration
// is /proc/config.gz (CONFIG_IKCONFIG_PROC).
func TestIntelDefaultFromProcConfigGz(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, err := w.Write([]byte("CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.Remove("/boot/config-"+offKernel).Bytes("/proc/config.gz", z.Bytes())
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "CONFIG_INTEL_IOMMU_DEFAULT_ON=y in /proc/config.gz")
}

// A default-on kernel booted with intel_iommu=off: what keeps the IOMMU off
// is that argument (its own finding fails, and grub ensure takes it out);
// intel_iommu=on is not what is missing.
func TestIntelDefaultOnTurnedOffNamesTheArgument(t *testing.T) {
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/boot/config-"+offKernel, "CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n")
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=off\n")
		grubDefaults(b, "intel_iommu=off", false)
	})
	env, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "; intel_iommu=off on the running kernel's command line keeps the IOMMU off (see intel_iommu=off)")
	off := one(t, res, "iommu.cmdline", "intel_iommu=off", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, off.Status, off.Message)
	require.Contains(t, env.KernelArgs().NotOff, "intel_iommu")
}

// A kernel built without CONFIG_INTEL_IOMMU: no argument starts a driver it
// does not have; both checks say so (iommu.kernel sent the node to grub
// ensure and a reboot).
func TestIntelIOMMUNotBuiltNoArgumentHelps(t *testing.T) {
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/boot/config-"+offKernel, "# CONFIG_INTEL_IOMMU is not set\n")
	})
	_, res := runRoot(t, dir)
	k := one(t, res, "iommu.kernel", "/sys/class/iommu", preflight.VMPassthrough)
	require.Contains(t, k.Message, "the running kernel is built without CONFIG_INTEL_IOMMU (/boot/config-5.15.0-91-generic)")
	require.Equal(t, "the running kernel is built without CONFIG_INTEL_IOMMU (/boot/config-5.15.0-91-generic): boot a kernel built with it; rebooting this one will not help", k.Remedy)
	require.False(t, k.Fixable)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message, "needed, and not enough: the kernel is built without CONFIG_INTEL_IOMMU (/boot/config-5.15.0-91-generic)")
}
