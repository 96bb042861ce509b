package preflight_test

import (
	"testing"
	"time"

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
		// the menu boots this node's own kernel (grubDefaults' names 5.15)
		b.File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic ro quiet splash intel_iommu=on iommu=pt\n}\n")
		b.Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(2*time.Hour))
	})
	env, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Equal(t, "not needed: the IOMMU is active without it (the kernel's default: CONFIG_INTEL_IOMMU_DEFAULT_ON=y); /etc/default/grub has it for the next boot, where it changes nothing", f.Message)
	require.Empty(t, f.Remedy)
	k := env.KernelArgs()
	require.Len(t, k.Needed, 1)
	require.Equal(t, "iommu=pt", k.Needed[0].String())
	require.Contains(t, k.NotNeeded, "intel_iommu=on")
}

// Arguments the next boot's configuration has and the running kernel does
// not, that turn the IOMMU or interrupt remapping off: a warn naming the file
// and line (the node works now; the next boot breaks it), fixed by grub
// ensure --mode. One that a later argument undoes is not named.
func TestNextBootArgumentsThatTurnItOffAreNamed(t *testing.T) {
	const kernel = "5.14.0-427.13.1.el9_4.x86_64"
	dir := build(t, fixture.AMDReady, func(b *fixture.Builder) {
		b.File("/boot/loader/entries/abc-"+kernel+".conf", "title Rocky Linux ("+kernel+")\nversion "+kernel+"\nlinux /vmlinuz-"+kernel+"\noptions root=/dev/mapper/rl-root ro iommu=pt amd_iommu=off\n")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "amd_iommu=off")
	require.Equal(t, preflight.Warn, f.Status)
	require.Equal(t, "amd_iommu=off in /boot/loader/entries/abc-"+kernel+".conf:4 turns the IOMMU off at the next boot: the running kernel was booted without it, so this node works now, and a reboot breaks it", f.Message)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
	require.True(t, res.Modes[preflight.VMPassthrough].Ready)

	for _, c := range []struct{ args, check, subject, what string }{
		{"intel_iommu=on iommu=pt iommu=off", "iommu.cmdline", "iommu=off", "turns the IOMMU off"},
		{"intel_iommu=on iommu=pt intremap=off", "iommu.interrupt-remapping", "intremap=off", "turns interrupt remapping off (VFIO then refuses to attach devices)"},
		{"intel_iommu=on iommu=pt nointremap", "iommu.interrupt-remapping", "nointremap", "turns interrupt remapping off (VFIO then refuses to attach devices)"},
	} {
		dir := build(t, fixture.HGX, func(b *fixture.Builder) { grubDefaults(b, c.args, false) })
		_, res := runRoot(t, dir)
		f := one(t, res, c.check, c.subject)
		require.Equal(t, preflight.Warn, f.Status, c.args)
		require.Equal(t, c.subject+" in /etc/default/grub:2 "+c.what+" at the next boot: the running kernel was booted without it, so this node works now, and a reboot breaks it", f.Message)
		require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
	}

	dir = build(t, fixture.HGX, func(b *fixture.Builder) { grubDefaults(b, "intel_iommu=on iommu=pt nointremap intremap=on", false) })
	_, res = runRoot(t, dir)
	for _, f := range res.Findings {
		if f.Check == "iommu.cmdline" || f.Check == "iommu.interrupt-remapping" {
			require.Equal(t, preflight.Pass, f.Status, "%+v", f)
		}
	}
}

// Whether the boot menu has the change is read from it, not from its age:
// older than /etc/default/grub but with the arguments, a reboot is all it
// takes; newer but without them, the reboot would not bring them (and a
// reboot loop follows): regenerate first.
func TestBootMenuJudgedByContentNotAge(t *testing.T) {
	dir := build(t, fixture.RebootPending, func(b *fixture.Builder) {
		b.File("/usr/sbin/update-grub", "#!/bin/sh\n")
		b.Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(30*time.Minute)) // older than /etc/default/grub, has them
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, "configured in /etc/default/grub, reboot pending: not yet in /proc/cmdline — needed to turn the Intel IOMMU on", f.Message)
	require.Equal(t, "reboot the node", f.Remedy)
	require.Equal(t, "the IOMMU arguments are configured in /etc/default/grub (see iommu.cmdline): reboot the node", one(t, res, "iommu.kernel", "/sys/class/iommu").Remedy)

	dir = build(t, fixture.RebootPending, func(b *fixture.Builder) {
		b.File("/usr/sbin/update-grub", "#!/bin/sh\n")
		b.File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash\n}\n").
			Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(2*time.Hour)) // newer, lacks them
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, "configured in /etc/default/grub, reboot pending: not yet in /proc/cmdline; the boot menu /boot/grub/grub.cfg does not have the change yet (its first entry): regenerate it (update-grub) before rebooting — needed to turn the Intel IOMMU on", f.Message)
	require.Equal(t, "regenerate the boot menu (update-grub), then reboot the node", f.Remedy)
	require.Equal(t, "the IOMMU arguments are configured in /etc/default/grub (see iommu.cmdline) but the boot menu does not have them yet: regenerate it (update-grub), then reboot the node", one(t, res, "iommu.kernel", "/sys/class/iommu").Remedy)
}
