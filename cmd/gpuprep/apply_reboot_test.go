package main

import (
	"encoding/json"
	"fmt"
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

// rebootAsk is the time and boot ID of the newest reboot apply recorded
// asking for ({kind step, before reboot, after started}).
func rebootAsk(t *testing.T, dir string) journal.Entry {
	t.Helper()
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	for i := len(es) - 1; i >= 0; i-- {
		if e := es[i]; e.Kind == "step" && e.Command == "apply" && e.Before == "reboot" && e.After == "started" {
			return e
		}
	}
	t.Fatal("the journal records no reboot asked for by apply")
	return journal.Entry{}
}

// setBootTime writes btime (whole seconds) into the fixture's /proc/stat.
func setBootTime(t *testing.T, dir string, bt time.Time) {
	t.Helper()
	require.NoError(t, fixture.New(dir).File("/proc/stat", fmt.Sprintf("cpu  1 0 1 1 0 0 0 0 0 0\nbtime %d\n", bt.Unix())).Err())
}

func setBootID(t *testing.T, dir, id string) {
	t.Helper()
	require.NoError(t, fixture.New(dir).File("/proc/sys/kernel/random/boot_id", id+"\n").Err())
}

func hasCommand(cmds [][]string, argv ...string) bool {
	for _, c := range cmds {
		if strings.Join(c, "\x00") == strings.Join(argv, "\x00") {
			return true
		}
	}
	return false
}

// firstApply runs apply on a fresh iommu-off-kernel root up to the reboot
// step (exit 4) and returns the root.
func firstApply(t *testing.T, d *deps) string {
	t.Helper()
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	return root
}

// (a) the node rebooted after apply asked and the arguments are in effect:
// apply goes on as it always did.
func TestApplyRebootedArgsEffectiveContinues(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := firstApply(t, d)
	ask := rebootAsk(t, root)
	simulateReboot(t, root)
	setBootTime(t, root, ask.Time.Add(2*time.Minute))

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-bind", "label"}, p.ids())

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Contains(t, []int{exitOK, exitNotReady}, code, out+errs) // the check decides
	require.NotContains(t, out+errs, "NOT EFFECTIVE")
	require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
}

// (b) and (d): the node rebooted after apply asked, and the arguments are
// still not on the running kernel: plan shows why instead of asking for a
// reboot, apply fails (exit 1) with the diagnosis, changes nothing, and
// does not reboot with --reboot.
func TestApplyRebootedArgsNotEffective(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := firstApply(t, d)
	ask := rebootAsk(t, root)
	booted := ask.Time.Add(3 * time.Minute)
	setBootTime(t, root, booted) // rebooted; /proc/cmdline unchanged: the boot did not use the new configuration
	n := journalLen(t, root)
	before := tree(t, root)

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitNotReady, code, out+errs)
	require.NotContains(t, out, "REBOOT REQUIRED HERE")
	require.Contains(t, out, "1. reboot: NOT EFFECTIVE AFTER THE REBOOT")
	require.Contains(t, out, "error: the node has rebooted since gpuprep apply asked for a reboot, and the running kernel still lacks intel_iommu=on iommu=pt")
	require.NotContains(t, out, "kernel-args:", "the configuration already has them")
	require.Contains(t, errs, "gpuprep apply would fail")

	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, exitNotReady, code, errs)
	var p struct {
		Steps []struct {
			ID     string   `json:"id"`
			Reboot bool     `json:"reboot"`
			Error  string   `json:"error"`
			Notes  []string `json:"notes"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Len(t, p.Steps, 3, out)
	require.Equal(t, "reboot", p.Steps[0].ID)
	require.False(t, p.Steps[0].Reboot, "no reboot is asked for")
	require.Contains(t, p.Steps[0].Error, "still lacks intel_iommu=on iommu=pt")

	for _, args := range [][]string{{}, {"--reboot"}} {
		out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--root", root, "--mode", "vm-passthrough", "--yes"}, args...)...)
		require.Equal(t, exitNotReady, code, "%v: %s", args, out+errs)
		for _, want := range []string{
			"the node has rebooted since gpuprep apply asked for a reboot, and the running kernel still lacks intel_iommu=on iommu=pt",
			"the node booted at " + booted.UTC().Format(time.RFC3339) + " (btime in /proc/stat), after gpuprep apply asked for the reboot at " + ask.Time.UTC().Format(time.RFC3339),
			"/proc/cmdline: BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash",
			"bootloader grub: /etc/default/grub has intel_iommu=on iommu=pt for the next boot",
			"likely cause: the boot menu was not regenerated, or lives elsewhere: there is no /boot/grub/grub.cfg",
			"fix the cause, reboot the node yourself and run gpuprep apply again; or run gpuprep rollback",
		} {
			require.Contains(t, errs, want, "%v", args)
		}
		require.NotContains(t, errs, "run gpuprep apply again to retry")
		require.False(t, hasCommand((*sim).Commands, "systemctl", "reboot"), "%v: no reboot again", args)
		require.Empty(t, (*sim).Commands, "%v", args)
		require.Equal(t, n, journalLen(t, root), "%v: nothing recorded", args)
		require.Equal(t, before, tree(t, root), "%v: nothing changed", args)
	}

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes", "--reboot", "-o", "json")
	require.Equal(t, exitNotReady, code, errs)
	var a struct {
		Outcome struct {
			Steps []struct {
				ID, Status, Error string
			} `json:"steps"`
			Reboot bool `json:"rebootRequired"`
		} `json:"outcome"`
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &a), out)
	require.Len(t, a.Outcome.Steps, 1)
	require.Equal(t, "reboot", a.Outcome.Steps[0].ID)
	require.Equal(t, "failed", a.Outcome.Steps[0].Status)
	require.False(t, a.Outcome.Reboot)
	require.Contains(t, a.Error, "/proc/cmdline: BOOT_IMAGE=")
	require.Empty(t, (*sim).Commands)

	// rollback undoes the ask with the rest: apply starts over
	_, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, errs) // the running kernel never had the arguments
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "2. reboot: REBOOT REQUIRED HERE")
}

// (c) and the other half of (d): no reboot since apply asked (the boot is
// older than the ask): apply still stops at the reboot step, and --reboot
// reboots.
func TestApplyNotRebootedYetStillStops(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := firstApply(t, d)
	ask := rebootAsk(t, root)
	setBootTime(t, root, ask.Time.Add(-time.Hour))

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "reboot: REBOOT REQUIRED HERE")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "reboot required")

	// the boot within the ask's own second is not the reboot it asked for
	setBootTime(t, root, rebootAsk(t, root).Time.Truncate(time.Second))
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes", "--reboot")
	require.Equal(t, exitNeedReboot, code, errs)
	require.True(t, hasCommand((*sim).Commands, "systemctl", "reboot"))
}

// The boot ID, recorded with the ask, decides over the clock: a clock set
// forward past the ask without a reboot is not a reboot, and a reboot with
// a clock set back is one.
func TestApplyRebootBootIDBeatsClock(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	setBootID(t, root, "0b9a7c1e-5f8d-4c44-9a51-6f2f3f1d8a01")
	_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, errs)
	ask := rebootAsk(t, root)
	require.Equal(t, "0b9a7c1e-5f8d-4c44-9a51-6f2f3f1d8a01", ask.Device)

	// same boot, NTP stepped the clock forward: btime moved past the ask
	setBootTime(t, root, ask.Time.Add(time.Hour))
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)

	// a new boot whose clock is behind: btime before the ask
	setBootID(t, root, "5d1e2f3a-0c4b-4e6d-8f70-1a2b3c4d5e6f")
	setBootTime(t, root, rebootAsk(t, root).Time.Add(-time.Hour))
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNotReady, code, errs)
	require.Contains(t, errs, "the boot ID changed from 0b9a7c1e-5f8d-4c44-9a51-6f2f3f1d8a01 to 5d1e2f3a-0c4b-4e6d-8f70-1a2b3c4d5e6f")
	require.Contains(t, errs, "the clock was set between the two, and the boot ID decides")
}

// What the diagnosis says about the boot menu follows what it holds.
func TestApplyRebootDiagnosisGrubMenu(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	for _, tc := range []struct{ menu, want string }{
		{"menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash\n}\n",
			"likely cause: the boot menu /boot/grub/grub.cfg does not contain intel_iommu=on iommu=pt: it was not regenerated after the change (it is older than /etc/default/grub); run update-grub, check with grep -c -- intel_iommu=on /boot/grub/grub.cfg"},
		{"menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash intel_iommu=on iommu=pt\n}\n",
			"/boot/grub/grub.cfg contains intel_iommu=on iommu=pt, so the node booted another entry or another menu; likely causes: the recovery entry"},
	} {
		root := fixtureRoot(t, "iommu-off-kernel")
		withTools(t, root)
		b := fixture.New(root).File("/boot/grub/grub.cfg", tc.menu).File("/boot/vmlinuz-6.8.0-45-generic", "")
		b.Touch("/boot/grub/grub.cfg", fixture.BootTime)
		require.NoError(t, b.Err())
		_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
		require.Equal(t, exitNeedReboot, code, errs)
		setBootTime(t, root, rebootAsk(t, root).Time.Add(time.Minute))
		_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
		require.Equal(t, exitNotReady, code, errs)
		require.Contains(t, errs, tc.want)
		require.Contains(t, errs, "other kernels are installed (6.8.0-45-generic)")
	}
}

// When the configuration lost the arguments after apply configured them,
// the diagnosis says so rather than plan the edit and another reboot.
func TestApplyRebootConfigurationRewritten(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := firstApply(t, d)
	setBootTime(t, root, rebootAsk(t, root).Time.Add(time.Minute))
	orig := "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX=\"\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/default/grub"), []byte(orig), 0o644))

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitNotReady, code, out+errs)
	require.NotContains(t, out, "kernel-args:")
	require.Contains(t, out, "bootloader grub: /etc/default/grub lacks intel_iommu=on, iommu=pt now; gpuprep apply's kernel-args step configured them at ")
	require.Contains(t, out, "gpuprep grub ensure --mode vm-passthrough puts them back")
	_, _, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes", "--reboot")
	require.Equal(t, exitNotReady, code)
	require.Empty(t, (*sim).Commands)
	got, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Equal(t, orig, string(got))
}

// The arguments are configured but the boot menu is older than
// /etc/default/grub and lacks them (its regeneration failed): plan
// regenerates it before the reboot, and apply runs that, else the reboot
// would boot without them. A menu that has them, however old, is left alone.
func TestPlanRegeneratesAStaleBootMenuBeforeTheReboot(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := fixtureRoot(t, "reboot-pending")
	withTools(t, root)
	require.NoError(t, fixture.New(root).Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(-time.Hour)).Err())
	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var has planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &has))
	require.Equal(t, []string{"reboot", "vfio-bind", "label"}, has.ids(), "the old menu has the arguments")

	b := fixture.New(root).File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash\n}\n")
	require.NoError(t, b.Touch("/boot/grub/grub.cfg", fixture.BootTime.Add(-time.Hour)).Err())

	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids())
	require.Equal(t, "regenerate the boot menu: /boot/grub/grub.cfg is older than /etc/default/grub and its first entry lacks the change, so the next boot would not get it", p.Steps[0].Title)
	require.Equal(t, []string{"update-grub"}, p.Steps[0].Commands)
	require.Empty(t, p.Steps[0].Files)

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.True(t, hasCommand((*sim).Commands, "update-grub"), "%v", (*sim).Commands)
}

// A second reboot ask in a new boot, for another reason: on an NVSwitch
// board, container mode takes the GPU on VFIO off it at the next boot (the
// vfio-unbind reboot) and, with nouveau in use on another GPU, can take
// nouveau away only with a reboot of its own, which the plan puts after the
// first (its step runs once the first reboot is done). apply -o json says
// why it asks (rebootFor), in which boot (bootID), and which earlier asks
// the node has rebooted since (rebootedFor): what fleet apply --reboot
// tells a host that needs a second reboot from one not back yet by.
func TestApplySecondRebootForAnotherReason(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	require.NoError(t, fixture.New(root).Module("nouveau", nil).Err())
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--select", hgxGPUs[0], "--yes")
	require.Equal(t, exitOK, code, out+errs)
	rebind(t, root, hgxGPUs[1], "nouveau")
	nouveauInUse(t, d)
	type outcome struct {
		Outcome struct {
			Steps []struct {
				ID, Status string
			} `json:"steps"`
			Reboot      bool     `json:"rebootRequired"`
			RebootFor   string   `json:"rebootFor"`
			BootID      string   `json:"bootID"`
			RebootedFor []string `json:"rebootedFor"`
		} `json:"outcome"`
	}
	apply := func(want int) outcome {
		t.Helper()
		out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
		require.Equal(t, want, code, out+errs)
		var a outcome
		require.NoError(t, json.Unmarshal([]byte(out), &a), out)
		return a
	}
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-unbind", "reboot", "nouveau", "reboot", "label"}, p.ids(), out)

	a := apply(exitNeedReboot)
	require.Equal(t, "vfio-unbind", a.Outcome.RebootFor)
	require.Equal(t, "11111111-1111-1111-1111-111111111111", a.Outcome.BootID)
	require.Empty(t, a.Outcome.RebootedFor)
	// run again before the reboot: the same ask, the same boot
	a = apply(exitNeedReboot)
	require.Equal(t, "vfio-unbind", a.Outcome.RebootFor)
	require.Empty(t, a.Outcome.RebootedFor)

	// the reboot: the GPU leaves VFIO for nvidia; nouveau still drives the other
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	rebind(t, root, hgxGPUs[0], "nvidia")
	a = apply(exitNeedReboot)
	require.Equal(t, "nouveau", a.Outcome.RebootFor, "%+v", a.Outcome)
	require.Equal(t, "22222222-2222-2222-2222-222222222222", a.Outcome.BootID)
	require.Equal(t, []string{"vfio-unbind"}, a.Outcome.RebootedFor)
	require.Equal(t, "nouveau", a.Outcome.Steps[0].ID)
	// again in the same boot (a fleet client lost the first answer): it
	// still says the node rebooted for vfio-unbind
	a = apply(exitNeedReboot)
	require.Equal(t, "nouveau", a.Outcome.RebootFor)
	require.Equal(t, []string{"vfio-unbind"}, a.Outcome.RebootedFor)
}
