package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// defaultOnNode is hgx-h200 on a kernel built with
// CONFIG_INTEL_IOMMU_DEFAULT_ON=y, booted with iommu=pt alone (configured
// so too): the IOMMU is active without intel_iommu=on.
func defaultOnNode(t *testing.T) string {
	t.Helper()
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	require.NoError(t, fixture.New(root).
		File("/boot/config-6.8.0-45-generic", "CONFIG_INTEL_IOMMU=y\nCONFIG_INTEL_IOMMU_DEFAULT_ON=y\n").
		File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash iommu=pt\n").
		File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash iommu=pt\"\nGRUB_CMDLINE_LINUX=\"\"\n").
		File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash iommu=pt\n}\n").
		Touch("/etc/default/grub", fixture.BootTime.Add(-48*time.Hour)).
		Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(-47*time.Hour)).Err())
	return root
}

// What check calls not needed (intel_iommu=on, the IOMMU active without it)
// gets no kernel-args step, no reboot and no grub edit; the VFIO writes are
// planned now (the IOMMU groups exist).
func TestPlanLeavesOutWhatCheckCallsNotNeeded(t *testing.T) {
	root := defaultOnNode(t)
	out, _, _ := gpuprep(t, "check", "-v", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "intel_iommu=on: not needed: the IOMMU is active without it (the kernel's default: CONFIG_INTEL_IOMMU_DEFAULT_ON=y)")

	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-bind", "label"}, p.ids(), out)
	require.False(t, p.Steps[0].Deferred, "the IOMMU groups exist: the writes are planned now")
	require.NotEmpty(t, p.Steps[0].Sysfs)
	require.Contains(t, out, "intel_iommu=on is not needed: the IOMMU is active without it")

	out, errs, code = gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	require.Equal(t, "not-needed", show.Args[0].State, out)
	require.Equal(t, "ok", show.Args[1].State, out)

	run, d := fakeGrubRunner(t)
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "nothing to change")
	require.Empty(t, run.Calls)
}

// The reboot step names what the running kernel lacks, not what it has.
func TestPlanRebootTitleNamesOnlyWhatTheKernelLacks(t *testing.T) {
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	require.NoError(t, fixture.New(root).File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash iommu=pt\n").Err())
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids(), out)
	require.Contains(t, p.Steps[1].Title, "the running kernel lacks intel_iommu=on;")
}

// A BLS node whose boot entries have the arguments is ready for the next
// boot, but kernels installed later get their arguments from
// /etc/kernel/cmdline, which grub2-mkconfig rewrites from /etc/default/grub:
// either lacking them, grub show says not-for-later-kernels, check warns,
// plan has a kernel-args step that keeps them there (no command, no reboot)
// and grub ensure --mode writes exactly that; once done, all four agree there
// is nothing left. A defaults file that only has something to take out (the
// entries do not have it) stays a plan note.
func TestPlanBLSReadyNodePlansNothingForTheNextBoot(t *testing.T) {
	_, d := fakeGrubRunner(t)
	root := fixtureRoot(t, "amd-ready")
	require.NoError(t, fixture.New(root).File("/etc/sysconfig/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\n").Err())
	out, errs, code := gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "iommu=pt  iommu=pt    iommu=pt  not-for-later-kernels\n")
	out, errs, code = gpuprepWith(t, d, "check", "-v", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "/etc/default/grub (GRUB_CMDLINE_LINUX, from which grub2-mkconfig rewrites /etc/kernel/cmdline and the boot entries' options) lacks it: kernels installed later would go without it")
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args"}, p.ids(), out)
	require.Equal(t, "keep iommu=pt for kernels installed later: add it to /etc/default/grub (grub-bls; every installed kernel's boot entry has it already, so no reboot is for it)", p.Steps[0].Title)
	require.Empty(t, p.Steps[0].Commands)
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "wrote /etc/default/grub\n")
	require.Contains(t, out, "note: every boot entry is right already (no grubby, no reboot)")
	out, _, _ = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Contains(t, out, "iommu=pt  iommu=pt    iommu=pt  ok\n")
	out, _, _ = gpuprepWith(t, d, "check", "-v", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "iommu=pt: in effect (/proc/cmdline) and configured in /boot/loader/entries/abc-5.14.0-427.13.1.el9_4.x86_64.conf — ")
	out, _, _ = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	p = planJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Empty(t, p.Steps, out)
	out, _, _ = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Contains(t, out, "nothing to change\n")

	require.NoError(t, fixture.New(root).File("/etc/kernel/cmdline", "root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M rhgb quiet\n").Err())
	out, _, _ = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Contains(t, out, "not-for-later-kernels\n")
	out, _, _ = gpuprepWith(t, d, "check", "-v", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "/etc/kernel/cmdline (what kernel-install gives kernels installed later) lacks it")
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	p = planJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args"}, p.ids(), out)
	require.Equal(t, "keep iommu=pt for kernels installed later: add it to /etc/kernel/cmdline (grub-bls; every installed kernel's boot entry has it already, so no reboot is for it)", p.Steps[0].Title)
	require.Empty(t, p.Steps[0].Commands)

	// only something to take out of the defaults file: a note, as before
	require.NoError(t, fixture.New(root).File("/etc/kernel/cmdline", "root=/dev/mapper/rl-root ro iommu=pt\n").
		File("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"iommu=pt iommu=off\"\nGRUB_ENABLE_BLSCFG=true\n").Err())
	out, _, _ = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	p = planJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Empty(t, p.Steps, out)
	require.Contains(t, out, "/etc/default/grub has iommu=off")
}

// Arguments configured for the next boot that turn the IOMMU or interrupt
// remapping off: grub show names them with their file and line, grub ensure
// --mode and plan's kernel-args step take them out (and only them), with no
// reboot while the running kernel does not have them, and a reboot titled
// for them when it does.
func TestGrubAndPlanTakeOutWhatTurnsItOff(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	const grubDefaults = "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on iommu=pt iommu=off intremap=off\"\nGRUB_CMDLINE_LINUX=\"\"\n"
	require.NoError(t, fixture.New(root).File("/etc/default/grub", grubDefaults).Err())

	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	require.Equal(t, []offState{
		{Arg: "iommu=off", Configured: "/etc/default/grub:2", State: "next-boot-breaks", Reason: "the next boot turns the IOMMU off; the running kernel does not have it: gpuprep grub ensure --mode vm-passthrough removes it before the node reboots"},
		{Arg: "intremap=off", Configured: "/etc/default/grub:2", State: "next-boot-breaks", Reason: "the next boot turns interrupt remapping off; the running kernel does not have it: gpuprep grub ensure --mode vm-passthrough removes it before the node reboots"},
	}, show.Off, out)

	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "vfio-bind", "label"}, p.ids(), out)
	require.Equal(t, "remove iommu=off intremap=off from the next boot's kernel command line (grub)", p.Steps[0].Title)
	require.Equal(t, []string{"update-grub"}, p.Steps[0].Commands)

	run, d := fakeGrubRunner(t)
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--root", root, "--mode", "vm-passthrough", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "-GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on iommu=pt iommu=off intremap=off\"\n+GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on iommu=pt\"\n")
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs) // the running kernel does not have them: no reboot
	require.Contains(t, out, "removed: iommu=off intremap=off\n")
	require.Equal(t, [][]string{{"update-grub"}}, run.Calls)
	require.Equal(t, "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on iommu=pt\"\nGRUB_CMDLINE_LINUX=\"\"\n", read(t, root, "/etc/default/grub"))
	require.Equal(t, 2, journalLen(t, root), "journalled: the intent, then the file with its backup")

	// running with iommu=off (the configuration still has it): the reboot is for it
	require.NoError(t, fixture.New(root).File("/etc/default/grub", grubDefaults).
		File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash intel_iommu=on iommu=pt iommu=off\n").Err())
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	p = planJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids(), out)
	require.Contains(t, p.Steps[1].Title, "REBOOT REQUIRED HERE: the running kernel runs with iommu=off, which turns the IOMMU off;")
}

// grub show and plan read the boot menu's content, not its age: a menu newer
// than /etc/default/grub that lacks the arguments is regenerated before the
// reboot (which alone would not bring them); an older one that has them is
// only waiting for the reboot.
func TestGrubShowAndPlanJudgeTheBootMenuByContent(t *testing.T) {
	root := fixtureRoot(t, "reboot-pending")
	withTools(t, root)
	require.NoError(t, fixture.New(root).
		File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash\n}\n").
		Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(2*time.Hour)).Err())
	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	require.Equal(t, "configured-not-in-boot-menu", show.Args[0].State, out)
	require.Equal(t, "configured, but the boot menu /boot/grub/grub.cfg does not have it (its first entry): the next boot goes without it until it is regenerated (update-grub; gpuprep grub ensure runs it)", show.Args[0].Reason)

	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids(), out)
	require.Equal(t, []string{"update-grub"}, p.Steps[0].Commands)
	require.Equal(t, "regenerate the boot menu: /boot/grub/grub.cfg's first entry lacks the change, so the next boot would not get it", p.Steps[0].Title)

	// older than /etc/default/grub, with the arguments: the reboot is pending
	require.NoError(t, fixture.New(root).
		File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash intel_iommu=on iommu=pt\n}\n").
		Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(30*time.Minute)).Err())
	out, errs, code = gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	show = showReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &show))
	require.Equal(t, argState{Wanted: "intel_iommu=on", Configured: "intel_iommu=on", State: "configured-reboot-pending", Reason: "changed after the last boot"}, show.Args[0])
}

// Planned against a root without update-grub (a fixture, a snapshot), the
// kernel-args step shows the command the node's distribution regenerates its
// boot menu with, and says so; grub ensure, which has --no-regenerate, still
// refuses and points to it.
func TestPlanOnARootWithoutTheBootMenuTool(t *testing.T) {
	root := fixtureRoot(t, "iommu-off-kernel") // Ubuntu, no update-grub
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids(), out)
	require.Equal(t, []string{"update-grub"}, p.Steps[0].Commands)
	require.Contains(t, p.Steps[0].Notes, "no boot-menu tool under this root (a snapshot or a copy of the node): update-grub is what this node's distribution regenerates its boot menu with; gpuprep apply, which runs on the node itself, runs the tool it finds there")

	// a grub2 layout (openSUSE): grub2-mkconfig
	require.NoError(t, fixture.New(root).File("/boot/grub2/grub.cfg", "menuentry 'x' {\n\tlinux /boot/vmlinuz root=/dev/sda1\n}\n").
		File("/etc/os-release", "NAME=\"openSUSE Leap\"\nID=\"opensuse-leap\"\nID_LIKE=\"suse opensuse\"\n").Err())
	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	p = planJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"grub2-mkconfig -o /boot/grub2/grub.cfg"}, p.Steps[0].Commands)

	_, errs, code = gpuprep(t, "grub", "ensure", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errs, "(use --no-regenerate and regenerate it yourself)")
}
