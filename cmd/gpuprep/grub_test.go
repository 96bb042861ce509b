package main

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// grubRoot copies grub/testdata/<name> into a temporary root and adds files.
func grubRoot(t *testing.T, name string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	// a copy: callers pass package-level maps (intelNode) that later tests
	// reuse; writing the fixture's files into them made those tests read
	// this fixture's GRUB file (TestGrubRunsARootsProgramsOnlyForASystemDisk
	// after TestGrubRefusesNewlineInValue)
	files := maps.Clone(extra)
	src := filepath.Join("..", "..", "grub", "testdata", name)
	require.NoError(t, filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files["/"+rel] = string(b)
		return nil
	}))
	b := fixture.New(dir)
	for p, c := range files {
		b.File(p, c)
	}
	require.NoError(t, b.Err())
	return dir
}

// fakeGrubRunner gives deps whose grub runs its commands on a FakeRunner,
// and whose clock ticks a second at each reading.
func fakeGrubRunner(t *testing.T) (*host.FakeRunner, *deps) {
	t.Helper()
	f := &host.FakeRunner{}
	d := realDeps()
	d.grubRunner = func(*host.Root) host.Runner { return f }
	now := time.Date(2026, 11, 30, 11, 15, 0, 0, time.UTC)
	d.grubNow = func() time.Time { now = now.Add(time.Second); return now.Add(-time.Second) }
	return f, d
}

var intelNode = map[string]string{
	"/sys/firmware/acpi/tables/DMAR": "DMAR",
	"/proc/cmdline":                  "BOOT_IMAGE=/boot/vmlinuz-6.1.0 root=/dev/sda1 ro quiet\n",
	"/usr/sbin/update-grub":          "#!/bin/sh\n",
}

func read(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	require.NoError(t, err)
	return string(b)
}

func TestGrubEnsureDebian(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := grubRoot(t, "debian", intelNode)
	before := read(t, root, "/etc/default/grub")

	out, errOut, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "--- a/etc/default/grub\n+++ b/etc/default/grub\n")
	require.Contains(t, out, "-GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n+GRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt\"\n")
	require.Contains(t, out, "would run: update-grub\n")
	require.Empty(t, run.Calls)
	require.Equal(t, before, read(t, root, "/etc/default/grub"), "--dry-run changed the file")

	out, errOut, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code, errOut)
	require.Contains(t, out, "wrote /etc/default/grub\nran: update-grub\n")
	require.Contains(t, out, "added: intel_iommu=on iommu=pt (to GRUB_CMDLINE_LINUX_DEFAULT)\n")
	require.Equal(t, [][]string{{"update-grub"}}, run.Calls)
	require.Equal(t, strings.Replace(before, `GRUB_CMDLINE_LINUX_DEFAULT="quiet"`, `GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"`, 1), read(t, root, "/etc/default/grub"))

	// backup beside the file, journal entry pointing at it
	bak := "/etc/default/grub.gpuprep-20261130T111500.000000000Z.bak"
	require.Equal(t, before, read(t, root, bak))
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	ents, err := journal.Read(r)
	require.NoError(t, err)
	require.Len(t, ents, 2) // the intent, before the write; the change, after it
	wrote := journal.Hash([]byte(read(t, root, "/etc/default/grub")))
	require.Equal(t, journal.Entry{Time: ents[0].Time, Command: "grub ensure", Kind: journal.KindFileIntent, Path: "/etc/default/grub", Backup: bak,
		Before: journal.Hash([]byte(before)), Wrote: wrote}, ents[0])
	require.Equal(t, journal.Entry{Time: ents[1].Time, Command: "grub ensure", Kind: "file", Path: "/etc/default/grub", Backup: bak,
		Wrote: wrote}, ents[1])

	// second run: nothing to change, still a reboot pending
	run.Calls = nil
	out, _, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code)
	require.Contains(t, out, "already configured: intel_iommu=on\nalready configured: iommu=pt\n")
	require.Contains(t, out, "nothing to change\n")
	require.Empty(t, run.Calls)

	// show: configured, reboot pending
	out, _, code = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code)
	require.Contains(t, out, "intel_iommu=on  intel_iommu=on  -        configured-reboot-pending")

	// remove
	out, errOut, code = gpuprepWith(t, d, "grub", "remove", "intel_iommu", "iommu", "--root", root, "--no-regenerate")
	require.Equal(t, 0, code, errOut) // not in /proc/cmdline: no reboot needed
	require.Contains(t, out, "note: --no-regenerate: not running update-grub")
	require.Equal(t, before, read(t, root, "/etc/default/grub"))
	require.Empty(t, run.Calls)
}

func TestGrubEnsureAMDArgs(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := grubRoot(t, "ubuntu-cloudimg", map[string]string{
		"/sys/firmware/acpi/tables/IVRS": "IVRS",
		"/proc/cmdline":                  "root=/dev/vda1 iommu=pt\n",
		"/usr/sbin/grub-mkconfig":        "",
	})
	out, errOut, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-vgpu", "--root", root)
	require.Equal(t, exitOK, code, errOut+out) // running already has iommu=pt
	require.Contains(t, out, "wrote /etc/default/grub.d/kdump-tools.cfg\n")
	require.Equal(t, [][]string{{"grub-mkconfig", "-o", "/boot/grub/grub.cfg"}}, run.Calls)
	require.NotContains(t, read(t, root, "/etc/default/grub.d/kdump-tools.cfg"), "amd_iommu")
}

func TestGrubEnsureBLS(t *testing.T) {
	run, d := fakeGrubRunner(t)
	files := map[string]string{
		"/boot/loader/entries/abc-5.14.0-427.el9.x86_64.conf": "title Rocky Linux\nversion 5.14.0-427.el9.x86_64\nlinux /vmlinuz-5.14.0-427.el9.x86_64\noptions root=/dev/mapper/rl-root ro intel_iommu=off rhgb quiet\n",
		"/boot/loader/entries/abc-0-rescue.conf":              "title Rescue\nlinux /vmlinuz-0-rescue\noptions root=/dev/mapper/rl-root ro iommu=pt\n",
		"/etc/kernel/cmdline":                                 "root=/dev/mapper/rl-root ro rhgb quiet\n",
		"/proc/cmdline":                                       "root=/dev/mapper/rl-root ro intel_iommu=off rhgb quiet\n",
		"/sys/firmware/acpi/tables/DMAR":                      "DMAR",
	}
	root := grubRoot(t, "rhel", files)
	out, errOut, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code, errOut)
	require.Equal(t, [][]string{
		{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=off"},
		{"grubby", "--update-kernel=ALL", "--args=intel_iommu=on iommu=pt"},
	}, run.Calls)
	require.Contains(t, out, "wrote /etc/default/grub\nwrote /etc/kernel/cmdline\n")
	require.Contains(t, read(t, root, "/etc/default/grub"), `rd.lvm.lv=rl/swap intel_iommu=on iommu=pt"`)
	require.Equal(t, "root=/dev/mapper/rl-root ro rhgb quiet intel_iommu=on iommu=pt\n", read(t, root, "/etc/kernel/cmdline"))

	// remove goes through grubby and both files too
	run.Calls = nil
	_, errOut, code = gpuprepWith(t, d, "grub", "remove", "intel_iommu", "--root", root)
	require.Equal(t, exitNeedReboot, code, errOut)
	require.Equal(t, [][]string{{"grubby", "--update-kernel=ALL", "--remove-args=intel_iommu=off"}}, run.Calls)
	require.Equal(t, "root=/dev/mapper/rl-root ro rhgb quiet iommu=pt\n", read(t, root, "/etc/kernel/cmdline"))
}

func TestGrubRefusesUnsafeAndUnsupported(t *testing.T) {
	_, d := fakeGrubRunner(t)
	root := grubRoot(t, "refused-command", intelNode)
	_, errOut, code := gpuprepWith(t, d, "grub", "ensure", "iommu=pt", "--root", root)
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errOut, "/etc/default/grub:2: GRUB_CMDLINE_LINUX_DEFAULT: built from a command's output")

	empty := t.TempDir()
	_, errOut, code = gpuprepWith(t, d, "grub", "ensure", "iommu=pt", "--root", empty)
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errOut, "no bootloader configuration found")

	// no regeneration tool: refuse rather than edit silently
	root = grubRoot(t, "debian", map[string]string{"/proc/cmdline": "quiet\n"})
	_, errOut, code = gpuprepWith(t, d, "grub", "ensure", "iommu=pt", "--root", root)
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errOut, "no update-grub, grub-mkconfig or grub2-mkconfig")

	for _, args := range [][]string{
		{"grub", "ensure"},
		{"grub", "ensure", "iommu=pt", "--mode", "vm-passthrough"},
		{"grub", "ensure", "--mode", "container"},
		{"grub", "ensure", "acpi_osi=!Windows 2012"},
		{"grub", "remove", "iommu=pt"},
	} {
		_, _, code = gpuprepWith(t, d, append(args, "--root", root)...)
		require.Equal(t, exitUsage, code, args)
	}
}

func TestGrubSystemdBootKernelstubRpmOstree(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := grubRoot(t, "configured", map[string]string{}) // only to get a dir
	require.NoError(t, os.RemoveAll(filepath.Join(root, "etc/default")))
	b := fixture.New(root)
	b.File("/etc/kernel/cmdline", "root=UUID=1 rw quiet")
	b.File("/boot/loader/loader.conf", "timeout 3\n")
	b.File("/lib/modules/6.9.1-arch1/vmlinuz", "")
	b.File("/proc/cmdline", "root=UUID=1 rw quiet\n")
	require.NoError(t, b.Err())
	out, errOut, code := gpuprepWith(t, d, "grub", "ensure", "iommu=pt", "--root", root)
	require.Equal(t, exitNeedReboot, code, errOut)
	require.Contains(t, out, "bootloader: systemd-boot\n")
	require.Equal(t, "root=UUID=1 rw quiet iommu=pt", read(t, root, "/etc/kernel/cmdline"))
	require.Equal(t, [][]string{{"kernel-install", "add", "6.9.1-arch1", "/lib/modules/6.9.1-arch1/vmlinuz"}}, run.Calls)

	run.Calls = nil
	ks := t.TempDir()
	b = fixture.New(ks)
	b.File("/etc/kernelstub/configuration", `{"default":{"kernel_options":["quiet","splash"]},"user":{"kernel_options":["quiet","splash","intel_iommu=off"]}}`)
	require.NoError(t, b.Err())
	out, errOut, code = gpuprepWith(t, d, "grub", "ensure", "intel_iommu=on", "--root", ks, "--dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "would run: kernelstub --delete-options intel_iommu=off\nwould run: kernelstub --add-options intel_iommu=on\n")

	os := t.TempDir()
	b = fixture.New(os)
	b.File("/run/ostree-booted", "")
	b.File("/boot/loader/entries/ostree-1-fedora-coreos.conf", "options root=UUID=1 rw ostree=/ostree/boot.1/x iommu=nopt\n")
	require.NoError(t, b.Err())
	out, errOut, code = gpuprepWith(t, d, "grub", "ensure", "iommu=pt", "--root", os, "--dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "would run: rpm-ostree kargs --delete-if-present=iommu=nopt --append-if-missing=iommu=pt\n")
}

func TestGrubShowJSON(t *testing.T) {
	root := grubRoot(t, "configured", map[string]string{
		"/sys/firmware/acpi/tables/DMAR": "DMAR",
		"/proc/cmdline":                  "quiet intel_iommu=on,sm_on iommu=pt\n",
	})
	out, errOut, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"bootloader": "grub"`)
	require.Contains(t, out, `"wanted": "intel_iommu=on",
      "configured": "intel_iommu=on,sm_on",
      "running": "intel_iommu=on,sm_on",
      "state": "ok"`)
}

func TestGrubShowBLSPicksTheRunningKernel(t *testing.T) {
	root := grubRoot(t, "rhel", map[string]string{
		"/boot/loader/entries/abc-0-rescue.conf":              "linux /vmlinuz-0-rescue\noptions root=/dev/sda1 ro\n",
		"/boot/loader/entries/abc-5.14.0-427.el9.x86_64.conf": "linux /vmlinuz-5.14.0-427.el9.x86_64\noptions root=/dev/sda1 ro intel_iommu=on iommu=pt\n",
		"/proc/sys/kernel/osrelease":                          "5.14.0-427.el9.x86_64\n",
		"/proc/cmdline":                                       "root=/dev/sda1 ro\n",
		"/proc/stat":                                          "btime 4102444800\n", // 2100: every file is older than the boot
		"/sys/firmware/acpi/tables/DMAR":                      "DMAR",
	})
	out, errOut, code := gpuprep(t, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "bootloader: grub-bls (/boot/loader/entries/abc-5.14.0-427.el9.x86_64.conf)\n")
	require.Contains(t, out, "iommu=pt        iommu=pt        -        configured-but-not-effective\n")
}

func TestGrubRegenerateCommandPerDistribution(t *testing.T) {
	_, d := fakeGrubRunner(t)
	for _, tc := range []struct{ fixture, tool, want string }{
		{"opensuse", "/usr/sbin/grub2-mkconfig", "would run: grub2-mkconfig -o /boot/grub2/grub.cfg\n"},
		{"arch", "/usr/bin/grub-mkconfig", "would run: grub-mkconfig -o /boot/grub/grub.cfg\n"},
		{"proxmox", "/usr/sbin/update-grub", "would run: update-grub\n"},
	} {
		root := grubRoot(t, tc.fixture, map[string]string{tc.tool: "", "/sys/firmware/acpi/tables/IVRS": "IVRS"})
		out, errOut, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--dry-run", "--root", root)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, tc.want, tc.fixture)
		require.Contains(t, out, " iommu=pt\"\n", tc.fixture)
		require.NotContains(t, out, "intel_iommu", tc.fixture)
	}
}

// update-grub fails after /etc/default/grub was written: the error says the file changed and how to finish or undo;
// the same command run again regenerates the menu (older than the file, and lacking the change) instead of saying
// there is nothing to do; once the menu is regenerated, a run changes nothing.
func TestGrubEnsureFinishesAFailedRegeneration(t *testing.T) {
	run, d := fakeGrubRunner(t)
	run.Responses = map[string]host.FakeResponse{"update-grub": {Out: []byte("/usr/sbin/grub-probe: error: failed to get canonical path of `overlay'.\n"), Err: errors.New("exit status 1")}}
	root := grubRoot(t, "debian", intelNode)
	menu := "menuentry 'Debian' {\n\tlinux /boot/vmlinuz-6.1.0 root=/dev/sda1 ro quiet\n}\n"
	b := fixture.New(root).File("/boot/grub/grub.cfg", menu)
	require.NoError(t, b.Touch("/boot/grub/grub.cfg", time.Now().Add(-time.Hour)).Err())

	out, errs, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitUnknown, code, out+errs)
	require.Contains(t, errs, "update-grub: exit status 1")
	require.Contains(t, errs, "failed to get canonical path")
	require.Contains(t, errs, "/etc/default/grub changed (backed up, in the journal) but the boot menu was not regenerated: fix the cause and run the same command again")
	require.Contains(t, read(t, root, "/etc/default/grub"), "intel_iommu=on iommu=pt")

	run.Responses, run.Calls = nil, nil
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "would run: update-grub\n")
	require.Contains(t, out, "note: /boot/grub/grub.cfg is older than /etc/default/grub and its first entry lacks the change: the boot menu is regenerated\n")
	out, errs, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code, errs)
	require.Contains(t, out, "ran: update-grub\n")
	require.Equal(t, [][]string{{"update-grub"}}, run.Calls)

	// regenerated (by hand, say): the menu has the arguments, whatever its time
	require.NoError(t, fixture.New(root).File("/boot/grub/grub.cfg", strings.Replace(menu, "ro quiet", "ro quiet intel_iommu=on iommu=pt", 1)).Touch("/boot/grub/grub.cfg", time.Now().Add(-time.Hour)).Err())
	run.Calls = nil
	out, _, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, exitNeedReboot, code)
	require.Contains(t, out, "nothing to change\n")
	require.Empty(t, run.Calls)
}

// grub ensure killed after it replaced /etc/default/grub and before it recorded the change (simulated: the
// journal's last line, the change's entry, cut off) leaves its intent, and rollback undoes the change from it.
func TestRollbackUndoesAGrubEnsureKilledBeforeItsRecord(t *testing.T) {
	_, d := fakeGrubRunner(t)
	simulatedKernel(t, d)
	root := grubRoot(t, "debian", intelNode)
	before := read(t, root, "/etc/default/grub")
	_, errs, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--no-regenerate")
	require.Equal(t, exitNeedReboot, code, errs)
	jp := filepath.Join(root, journal.Path)
	b, err := os.ReadFile(jp)
	require.NoError(t, err)
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], `"kind":"file-intent"`)
	require.NoError(t, os.WriteFile(jp, []byte(lines[0]), 0o600))

	out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.Contains(t, out, "/etc/default/grub")
	require.Equal(t, before, read(t, root, "/etc/default/grub"))
}

// With --no-regenerate, a menu older than the file and lacking the change is not regenerated, and the note says so
// (it said "is regenerated").
func TestGrubEnsureNoRegenerateSaysTheMenuIsStale(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := grubRoot(t, "debian", intelNode)
	_, errs, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--no-regenerate")
	require.Equal(t, exitNeedReboot, code, errs)
	require.NoError(t, fixture.New(root).File("/boot/grub/grub.cfg", "menuentry 'Debian' {\n\tlinux /boot/vmlinuz-6.1.0 root=/dev/sda1 ro quiet\n}\n").Touch("/boot/grub/grub.cfg", time.Now().Add(-time.Hour)).Err())
	out, errs, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--no-regenerate")
	require.Equal(t, exitNeedReboot, code, errs)
	require.Contains(t, out, "note: /boot/grub/grub.cfg is older than /etc/default/grub and its first entry lacks the change: regenerate the boot menu (update-grub) before rebooting, or the next boot goes without it\n")
	require.NotContains(t, out, "is regenerated")
	require.Empty(t, run.Calls)
}

// check's fix for an argument that turns the IOMMU off, run as it is, takes
// out exactly that argument and keeps the wanted ones (iommu=off goes,
// iommu=pt stays; intel_iommu=off becomes intel_iommu=on).
func TestCheckOffArgumentFixWorks(t *testing.T) {
	root := fixtureRoot(t, "iommu-off-kernel")
	args := "intel_iommu=off iommu=off iommu=pt"
	require.NoError(t, fixture.New(root).File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash "+args+"\n").
		File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash "+args+"\"\nGRUB_CMDLINE_LINUX=\"\"\n").Err())
	out, _, _ := gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	var r struct {
		Findings []struct{ Check, Subject, FixCommand string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	fixes := map[string]bool{}
	for _, f := range r.Findings {
		if f.Check == "iommu.cmdline" && strings.HasSuffix(f.Subject, "=off") {
			fixes[f.FixCommand] = true
		}
	}
	require.Equal(t, map[string]bool{"gpuprep grub ensure --mode vm-passthrough": true}, fixes)
	argv := append(strings.Fields("grub ensure --mode vm-passthrough")[0:], "--root", root, "--dry-run", "--no-regenerate")
	out, errs, code := gpuprep(t, argv...)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, `+GRUB_CMDLINE_LINUX_DEFAULT="quiet splash iommu=pt intel_iommu=on"`)
}

// iommu.passthrough=1 is iommu=pt's equivalent: show names it in the
// CONFIGURED and RUNNING columns of the iommu=pt row (not "-" beside a
// configured state), ensure leaves it and says so, check says it is in
// effect through it; iommu.passthrough=0 after iommu=pt is what the row shows
// beside "missing".
func TestGrubShowNamesTheEquivalentOfIommuPt(t *testing.T) {
	_, d := fakeGrubRunner(t)
	node := map[string]string{
		"/etc/default/grub":              "GRUB_CMDLINE_LINUX=\"iommu.passthrough=1 intel_iommu=on\"\n",
		"/boot/grub/grub.cfg":            "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-6.1.0 root=/dev/sda1 ro iommu.passthrough=1 intel_iommu=on\n}\n",
		"/proc/cmdline":                  "BOOT_IMAGE=/boot/vmlinuz-6.1.0 root=/dev/sda1 ro iommu.passthrough=1 intel_iommu=on\n",
		"/sys/firmware/acpi/tables/DMAR": "DMAR",
		"/usr/sbin/update-grub":          "#!/bin/sh\n",
	}
	root := t.TempDir()
	b := fixture.New(root)
	for p, c := range node {
		b.File(p, c)
	}
	require.NoError(t, b.Err())
	out, errOut, code := gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "iommu=pt        iommu.passthrough=1  iommu.passthrough=1  ok\n")
	require.Contains(t, out, "iommu=pt: met by iommu.passthrough=1 (configured and running), its equivalent\n")
	out, errOut, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "already configured: iommu=pt (as iommu.passthrough=1, its equivalent)\n")
	require.Contains(t, out, "nothing to change\n")
	out, _, _ = gpuprepWith(t, d, "check", "-v", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "iommu=pt: in effect (/proc/cmdline, as iommu.passthrough=1, its equivalent) and configured in /etc/default/grub (as iommu.passthrough=1, its equivalent)")

	require.NoError(t, fixture.New(root).File("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"iommu=pt intel_iommu=on iommu.passthrough=0\"\n").Err())
	out, errOut, code = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "iommu=pt        iommu.passthrough=0  iommu.passthrough=1  running-not-configured\n")
	out, _, _ = gpuprepWith(t, d, "check", "-v", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "iommu=pt: in effect now (as iommu.passthrough=1, its equivalent) but not configured in /etc/default/grub: the next boot loses it")
}

// RHEL 8's BLS entries say "options $kernelopts": the arguments are
// grubenv's kernelopts. grub show and grub ensure read them as check does
// (show said running-not-configured, ensure ran grubby for what the entries
// already pass); with kernelopts lacking one, all three say so.
func TestGrubBLSKerneloptsFromGrubenv(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := grubRoot(t, "rhel", map[string]string{
		"/boot/loader/entries/abc-4.18.0-513.el8.x86_64.conf": "title Rocky Linux\nlinux /vmlinuz-4.18.0-513.el8.x86_64\noptions $kernelopts $tuned_params\n",
		"/boot/grub2/grubenv":            "# GRUB Environment Block\nkernelopts=root=/dev/mapper/rl-root ro intel_iommu=on iommu=pt\n",
		"/proc/sys/kernel/osrelease":     "4.18.0-513.el8.x86_64\n",
		"/proc/cmdline":                  "BOOT_IMAGE=(hd0,msdos1)/vmlinuz-4.18.0-513.el8.x86_64 root=/dev/mapper/rl-root ro intel_iommu=on iommu=pt\n",
		"/etc/kernel/cmdline":            "root=/dev/mapper/rl-root ro intel_iommu=on iommu=pt\n",
		"/sys/firmware/acpi/tables/DMAR": "DMAR",
	})
	require.NoError(t, fixture.New(root).File("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"\nGRUB_ENABLE_BLSCFG=true\n").Err())
	out, errOut, code := gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "iommu=pt        iommu=pt        iommu=pt        ok\n")
	out, errOut, code = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nothing to change\n")
	require.Empty(t, run.Calls)

	require.NoError(t, fixture.New(root).File("/boot/grub2/grubenv", "kernelopts=root=/dev/mapper/rl-root ro intel_iommu=on\n").Err())
	out, _, _ = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Contains(t, out, "iommu=pt        -               iommu=pt        running-not-configured\n")
	out, _, _ = gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root, "--dry-run")
	require.Contains(t, out, "would run: grubby --update-kernel=ALL --args=iommu=pt\n")
}

// A node whose only GRUB defaults are /etc/default/grub.d/*.cfg (Ubuntu's
// cloud-image drop-in, no /etc/default/grub: grub-mkconfig sources each part
// only where it exists). grub show reads it, in text and JSON, and ensure
// edits the drop-in's assignment, the one grub-mkconfig uses.
func TestGrubDropinOnly(t *testing.T) {
	_, d := fakeGrubRunner(t)
	root := grubRoot(t, "dropin-only", map[string]string{
		"/sys/firmware/acpi/tables/DMAR": "DMAR",
		"/proc/cmdline":                  "BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=/dev/sda1 ro console=tty1 console=ttyS0\n",
		"/usr/sbin/update-grub":          "#!/bin/sh\n",
	})
	out, errOut, code := gpuprepWith(t, d, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, "grub", doc["bootloader"])
	require.Contains(t, out, "console=tty1 console=ttyS0")

	out, errOut, code = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "/etc/default/grub.d/50-cloudimg-settings.cfg")
	require.Regexp(t, `\nintel_iommu=on +- +- +missing\n`, out)

	// check reads the same files and agrees
	out, _, _ = gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Contains(t, out, "missing from /proc/cmdline; missing from /etc/default/grub.d/50-cloudimg-settings.cfg")

	out, errOut, code = gpuprepWith(t, d, "grub", "ensure", "intel_iommu=on", "--root", root)
	require.Equal(t, exitNeedReboot, code, errOut)
	require.Contains(t, out, "wrote /etc/default/grub.d/50-cloudimg-settings.cfg\n")
	b, err := os.ReadFile(filepath.Join(root, "etc/default/grub.d/50-cloudimg-settings.cfg"))
	require.NoError(t, err)
	require.Contains(t, string(b), "\nGRUB_CMDLINE_LINUX_DEFAULT=\"console=tty1 console=ttyS0 intel_iommu=on\"\n")
	require.NoFileExists(t, filepath.Join(root, "etc/default/grub"))
}

// A GRUB_CMDLINE value with a newline inside its quotes (grub-mkconfig would
// paste the newline into grub.cfg's linux line, which GRUB ends there):
// ensure refuses, naming the file and line, and writes nothing; show refuses
// to report the words after the newline as configured.
func TestGrubRefusesNewlineInValue(t *testing.T) {
	run, d := fakeGrubRunner(t)
	root := grubRoot(t, "refused-multiline", intelNode)
	before := read(t, root, "/etc/default/grub")
	_, errOut, code := gpuprepWith(t, d, "grub", "ensure", "--mode", "vm-passthrough", "--root", root)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "/etc/default/grub:2: GRUB_CMDLINE_LINUX's value goes on past the end of this line")
	require.Equal(t, before, read(t, root, "/etc/default/grub"))
	require.Empty(t, run.Calls)

	_, errOut, code = gpuprepWith(t, d, "grub", "show", "--root", root)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "/etc/default/grub:2:")
}
