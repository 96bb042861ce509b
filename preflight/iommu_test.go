package preflight_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// build makes a scenario root: base, then the changes of edit.
func build(t *testing.T, base func(*fixture.Builder), edit func(*fixture.Builder)) string {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	base(b)
	if edit != nil {
		edit(b)
	}
	require.NoError(t, b.Err())
	return dir
}

// one returns the single finding of check for subject (that counts for
// mode, when given).
func one(t *testing.T, res *preflight.Result, check, subject string, mode ...preflight.Mode) preflight.Finding {
	t.Helper()
	w := want{check: check, subject: subject}
	if len(mode) > 0 {
		w.mode = mode[0]
	}
	f := find(res, w)
	require.Len(t, f, 1, "%s %s %v in %+v", check, subject, mode, res.Findings)
	return f[0]
}

const ubuntuCmdline = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash "

// grubDefaults writes /etc/default/grub with cmdline, written well before
// the boot (so no reboot is pending) unless pending.
func grubDefaults(b *fixture.Builder, cmdline string, pending bool) {
	b.File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash "+cmdline+"\"\nGRUB_CMDLINE_LINUX=\"\"\n")
	b.File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic ro quiet splash "+cmdline+"\n}\n")
	at := fixture.BootTime.Add(-48 * time.Hour)
	if pending {
		at = fixture.BootTime.Add(time.Hour)
	}
	b.Touch("/etc/default/grub", at).Touch("/boot/grub/grub.cfg", at.Add(time.Minute))
}

// An argument that turns the IOMMU off is fixed where it is configured, by
// replacing only the disabling value; one the configuration no longer has
// needs only the reboot. grub remove intel_iommu would also take the wanted
// intel_iommu=on.
func TestDisablingArgumentRemedyFollowsTheConfiguration(t *testing.T) {
	// Running intel_iommu=off, /etc/default/grub already has intel_iommu=on: reboot pending.
	dir := build(t, fixture.RebootPending, func(b *fixture.Builder) {
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=off\n")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=off")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "intel_iommu=off in /proc/cmdline turns the IOMMU off; /etc/default/grub does not have it: the next boot drops it (reboot pending)", f.Message)
	require.Equal(t, "reboot the node", f.Remedy)
	require.False(t, f.Fixable)
	require.Empty(t, f.FixCommand)
	f = one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message, "reboot pending: /proc/cmdline has intel_iommu=off, which leaves the Intel IOMMU off")

	// intel_iommu=off running and configured: ensure replaces the value.
	dir = build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=off\n")
		grubDefaults(b, "intel_iommu=off iommu=pt", false)
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "intel_iommu=off")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "intel_iommu=off in /proc/cmdline turns the IOMMU off; /etc/default/grub has it too", f.Message)
	require.True(t, f.Fixable)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough (it replaces every intel_iommu= with intel_iommu=on), then reboot", f.Remedy)

	// iommu=off iommu=pt: pt does not undo off (no_iommu stays set); grub
	// ensure --mode takes out exactly iommu=off and keeps iommu=pt.
	dir = build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=on iommu=off iommu=pt\n")
		grubDefaults(b, "intel_iommu=on iommu=off iommu=pt", false)
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "iommu=off")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "iommu=off in /proc/cmdline turns the IOMMU off; /etc/default/grub has it too", f.Message)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough (it removes iommu=off and keeps iommu=pt), then reboot", f.Remedy)
	f = one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message, "the running kernel was booted with iommu=off")
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
	require.Equal(t, "set the IOMMU kernel arguments and take out those that turn it off (gpuprep grub ensure --mode vm-passthrough, see iommu.cmdline) and reboot", f.Remedy)
}

// intel_iommu=off does nothing on an AMD IOMMU: a leftover is a warning, not
// a blocker.
func TestIntelIOMMUOffOnAnAMDIOMMUDoesNothing(t *testing.T) {
	dir := build(t, fixture.AMDReady, func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-427.13.1.el9_4.x86_64 root=/dev/mapper/rl-root ro iommu=pt intel_iommu=off\n")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=off")
	require.Equal(t, preflight.Warn, f.Status)
	require.Equal(t, "intel_iommu=off in /proc/cmdline does nothing here: intel_iommu= acts on an Intel (VT-d) IOMMU only, and this node's is an AMD (AMD-Vi); /boot/loader/entries/abc-5.14.0-427.13.1.el9_4.x86_64.conf does not have it: the next boot drops it", f.Message)
	require.Empty(t, f.Remedy)
	require.False(t, f.Fixable)
	require.True(t, res.Modes[preflight.VMPassthrough].Ready, "%+v", res.Modes[preflight.VMPassthrough])

	// Configured too: removing it is an optional tidy-up.
	dir = build(t, fixture.AMDReady, func(b *fixture.Builder) {
		const kernel = "5.14.0-427.13.1.el9_4.x86_64"
		b.File("/proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-"+kernel+" root=/dev/mapper/rl-root ro iommu=pt intel_iommu=off\n")
		b.File("/boot/loader/entries/abc-"+kernel+".conf", "title Rocky Linux ("+kernel+")\nversion "+kernel+"\nlinux /vmlinuz-"+kernel+"\noptions root=/dev/mapper/rl-root ro iommu=pt intel_iommu=off\n")
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "intel_iommu=off")
	require.Equal(t, preflight.Warn, f.Status)
	require.Equal(t, "intel_iommu=off in /proc/cmdline does nothing here: intel_iommu= acts on an Intel (VT-d) IOMMU only, and this node's is an AMD (AMD-Vi)", f.Message)
	require.Equal(t, "to tidy up (optional): gpuprep grub remove intel_iommu", f.Remedy)
	require.Equal(t, "gpuprep grub remove intel_iommu", f.FixCommand)
	require.True(t, res.Modes[preflight.VMPassthrough].Ready)
}

// iommu.kernel asks for a reboot only when one would bring the arguments.
func TestIOMMUKernelRemedyFollowsWhatTheKernelRuns(t *testing.T) {
	// AMD: iommu=pt running and configured, no IOMMU: firmware or kernel, not a reboot.
	dir := build(t, fixture.AMDReady, func(b *fixture.Builder) {
		b.Remove("/sys/class/iommu").Remove("/sys/kernel/iommu_groups").Mkdir("/sys/class/iommu").Mkdir("/sys/kernel/iommu_groups")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "IOMMU not active in the kernel: /sys/class/iommu is empty; the running kernel already has iommu=pt", f.Message)
	require.Equal(t, "rebooting will not help: the kernel log says why it did not start the IOMMU (journalctl -k -b | grep -i -e DMAR -e IOMMU -e AMD-Vi): AMD IOMMU (AMD-Vi) disabled or broken in the firmware (check the BIOS/UEFI setting; update the firmware), or a kernel built without CONFIG_AMD_IOMMU", f.Remedy)
	require.False(t, f.Fixable)

	// Intel: the arguments running on a kernel built without the driver.
	dir = build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=on iommu=pt\n")
		grubDefaults(b, "intel_iommu=on iommu=pt", false)
		b.File("/boot/config-5.15.0-91-generic", "# CONFIG_INTEL_IOMMU is not set\n")
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, "the running kernel is built without CONFIG_INTEL_IOMMU (/boot/config-5.15.0-91-generic): boot a kernel built with it; rebooting this one will not help", f.Remedy)

	// Configured long before the boot, not running: the last boot did not use them.
	dir = build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) { grubDefaults(b, "intel_iommu=on iommu=pt", false) })
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, "the IOMMU arguments are configured in /etc/default/grub but the last boot did not use them (see iommu.cmdline for why): another reboot alone will not help", f.Remedy)

	// Configured after the boot: the reboot is what is missing.
	_, res = run(t, "reboot-pending")
	f = one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, "the IOMMU arguments are configured in /etc/default/grub (see iommu.cmdline): reboot the node", f.Remedy)
}

// A boot menu older than /etc/default/grub and lacking the change must be
// regenerated before the reboot, and the fix says so.
func TestStaleBootMenuIsRegeneratedBeforeTheReboot(t *testing.T) {
	const lacking = "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash\n}\n"
	dir := build(t, fixture.RebootPending, func(b *fixture.Builder) {
		b.File("/boot/grub/grub.cfg", lacking).Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(-time.Hour))
		b.File("/usr/sbin/update-grub", "#!/bin/sh\n")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "configured in /etc/default/grub, reboot pending: not yet in /proc/cmdline; the boot menu /boot/grub/grub.cfg does not have the change yet (its first entry), and is older than /etc/default/grub: regenerate it (update-grub) before rebooting — needed to turn the Intel IOMMU on", f.Message)
	require.Equal(t, "regenerate the boot menu (update-grub), then reboot the node", f.Remedy)
	require.False(t, f.Fixable)
	f = one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, "the IOMMU arguments are configured in /etc/default/grub (see iommu.cmdline) but the boot menu does not have them yet: regenerate it (update-grub), then reboot the node", f.Remedy)

	// openSUSE layout without a known tool: the command for that menu.
	dir = build(t, fixture.RebootPending, func(b *fixture.Builder) {
		b.Remove("/boot/grub").File("/boot/grub2/grub.cfg", lacking).Touch("/boot/grub2/grub.cfg", fixture.BootTime.Add(-time.Hour))
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, "regenerate the boot menu (grub2-mkconfig -o /boot/grub2/grub.cfg), then reboot the node", f.Remedy)
}

// intel_iommu=on,off is off (the kernel applies the options in order), and
// iommu=off is not undone by a later iommu=pt.
func TestLaterOffWinsWithinAndAcrossOccurrences(t *testing.T) {
	dir := build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=on,off iommu=pt\n")
		grubDefaults(b, "intel_iommu=on,off iommu=pt", false)
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "/proc/cmdline has intel_iommu=on,off, which leaves the Intel IOMMU off; /etc/default/grub has intel_iommu=on,off, which leaves the Intel IOMMU off — needed to turn the Intel IOMMU on", f.Message)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)
	f = one(t, res, "iommu.cmdline", "intel_iommu=on,off")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)

	dir = build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) {
		b.File("/proc/cmdline", ubuntuCmdline+"intel_iommu=on iommu=off iommu=pt\n")
		grubDefaults(b, "intel_iommu=on iommu=pt", true)
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "iommu=off")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "iommu=off in /proc/cmdline turns the IOMMU off; /etc/default/grub does not have it: the next boot drops it (reboot pending)", f.Message)
	require.Equal(t, "reboot the node", f.Remedy)
	require.Contains(t, one(t, res, "iommu.kernel", "/sys/class/iommu").Message, "the running kernel was booted with iommu=off")
}

// An /etc/default/grub that does not parse is named with its line; the
// remedy is to fix it, not grub ensure (which would refuse it).
func TestUnparsableGrubDefaultsIsNamed(t *testing.T) {
	const unterminated = "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on iommu=pt\nGRUB_CMDLINE_LINUX=\"\"\n"
	dir := build(t, fixture.HGX, func(b *fixture.Builder) { b.File("/etc/default/grub", unterminated) })
	_, res := runRoot(t, dir)
	f := one(t, res, "iommu.cmdline", "iommu=pt")
	require.Equal(t, preflight.Pass, f.Status)
	require.Equal(t, "in effect (/proc/cmdline); whether it persists is unknown: /etc/default/grub:1 (GRUB_CMDLINE_LINUX_DEFAULT: unterminated double quote) cannot be parsed — recommended: host devices get identity mappings (faster DMA); devices given to VMs are still translated", f.Message)

	dir = build(t, fixture.IOMMUOffKernel, func(b *fixture.Builder) { b.File("/etc/default/grub", unterminated) })
	_, res = runRoot(t, dir)
	f = one(t, res, "iommu.cmdline", "intel_iommu=on")
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "missing from /proc/cmdline; /etc/default/grub:1 (GRUB_CMDLINE_LINUX_DEFAULT: unterminated double quote) cannot be parsed — needed to turn the Intel IOMMU on", f.Message)
	require.Equal(t, "fix /etc/default/grub:1 (GRUB_CMDLINE_LINUX_DEFAULT: unterminated double quote) first, then run gpuprep check again", f.Remedy)
	require.False(t, f.Fixable)
	f = one(t, res, "iommu.kernel", "/sys/class/iommu")
	require.Equal(t, "fix /etc/default/grub:1 (GRUB_CMDLINE_LINUX_DEFAULT: unterminated double quote) first (see iommu.cmdline), then set the IOMMU kernel arguments and reboot", f.Remedy)
	require.False(t, f.Fixable)
}

// With the IOMMU active, an absent intel_iommu=on passes as "not needed",
// and a bare intel_iommu is named as doing nothing.
func TestIntelIOMMUOnNotNeededWhenActive(t *testing.T) {
	for _, c := range []struct{ arg, msg string }{
		{"", "not needed: the IOMMU is active without it"},
		{"intel_iommu ", "not needed: the IOMMU is active without it; the bare intel_iommu (no value) in /proc/cmdline and /etc/default/grub does nothing"},
	} {
		dir := build(t, fixture.HGX, func(b *fixture.Builder) {
			b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash "+c.arg+"iommu=pt\n")
			b.File("/etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash "+c.arg+"iommu=pt\"\nGRUB_CMDLINE_LINUX=\"\"\n")
		})
		_, res := runRoot(t, dir)
		f := one(t, res, "iommu.cmdline", "intel_iommu=on")
		require.Equal(t, preflight.Pass, f.Status)
		require.Equal(t, c.msg, f.Message)
		require.Empty(t, f.Remedy)
	}
}
