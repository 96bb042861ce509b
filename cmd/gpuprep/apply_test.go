package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// simulatedKernel makes apply and rollback act on fixture roots through the
// kernel simulator (a new one per command, as a new process would see the
// tree), and returns a pointer to the last simulator, for its commands.
func simulatedKernel(t *testing.T, d *deps) **fixture.Kernel {
	t.Helper()
	last := new(*fixture.Kernel)
	d.provisionKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		*last = k
		return k, k, err
	}
	return last
}

// withTools adds the boot-menu and initramfs tools apply runs (through the
// simulator's runner), as a Debian/Ubuntu root has them.
func withTools(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"/usr/sbin/update-grub", "/usr/sbin/update-initramfs"} {
		require.NoError(t, fixture.New(dir).File(f, "#!/bin/sh\n").Err())
	}
}

// simulateReboot makes the fixture look like the node after a reboot with
// intel_iommu=on iommu=pt: the arguments on /proc/cmdline, the IOMMU units
// and one IOMMU group per PCI function, remapped interrupts.
func simulateReboot(t *testing.T, dir string) {
	t.Helper()
	b := fixture.New(dir)
	raw, err := os.ReadFile(filepath.Join(dir, "proc/cmdline"))
	require.NoError(t, err)
	b.File("/proc/cmdline", strings.TrimSpace(string(raw))+" intel_iommu=on iommu=pt\n")
	b.IOMMU("dmar0", 0xf020df)
	b.Interrupts("IR-IO-APIC", "IR-PCI-MSI-0000:00:14.0", "DMAR-MSI")
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	for i, a := range root.Names("/sys/bus/pci/devices") {
		dev, err := root.Realpath("/sys/bus/pci/devices/" + a)
		require.NoError(t, err)
		g := "/sys/kernel/iommu_groups/" + string(rune('0'+i))
		b.File(g+"/type", "DMA\n").Link(dev+"/iommu_group", g).Link(g+"/devices/"+a, dev)
	}
	require.NoError(t, b.Err())
}

// tree is every regular file, symlink and empty directory (as "<dir>") of
// a root outside the kernel's virtual file systems and gpuprep's state
// (journal, lock, the directories above them), backups excluded (and so a directory that holds only
// backups).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == "sys" || rel == "proc" || rel == "dev" || rel == "var/lib/gpuprep":
			return filepath.SkipDir
		case d.IsDir():
			// run/ is the simulators' (systemd's state), not the node's
			// files; var/lib the journal's parent
			if es, err := os.ReadDir(p); err == nil && len(es) == 0 && rel != "var" && rel != "var/lib" && rel != "run" && !strings.HasPrefix(rel, "run/") {
				out[rel+"/"] = "<dir>"
			}
			return nil
		case strings.Contains(d.Name(), ".gpuprep-") && strings.HasSuffix(d.Name(), host.BackupSuffix):
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			out[rel] = "-> " + l
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	}))
	return out
}

func driverOf(t *testing.T, dir, addr string) string {
	t.Helper()
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r.LinkBase("/sys/bus/pci/devices/" + addr + "/driver")
}

func journalLen(t *testing.T, dir string) int {
	t.Helper()
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	return len(es)
}

type planJSON struct {
	Steps []struct {
		ID       string `json:"id"`
		Title    string `json:"title"`
		Deferred bool   `json:"deferred"`
		Reboot   bool   `json:"reboot"`
		Files    []struct {
			Path string `json:"path"`
		} `json:"files"`
		Sysfs    []string `json:"sysfs"`
		Commands []string `json:"commands"`
		Notes    []string `json:"notes"`
	} `json:"steps"`
}

func (p planJSON) ids() []string {
	var s []string
	for _, x := range p.Steps {
		s = append(s, x.ID)
	}
	return s
}

type applyJSON struct {
	Outcome struct {
		Steps []struct {
			ID, Status string
		} `json:"steps"`
		Reboot bool `json:"rebootRequired"`
	} `json:"outcome"`
	Report *struct {
		Ready    bool `json:"ready"`
		Findings []struct {
			Check, Status, Subject string
		} `json:"findings"`
	} `json:"report"`
}

func findingStatus(a applyJSON, check, subject string) string {
	for _, f := range a.Report.Findings {
		if f.Check == check && (subject == "" || f.Subject == subject) {
			return f.Status
		}
	}
	return ""
}

const offGPU = "0000:17:00.0" // the GPU of iommu-off-kernel

func TestPlanAndApplyVMPassthroughAcrossReboot(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	orig := tree(t, root)

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids())
	require.True(t, p.Steps[1].Reboot)
	require.True(t, p.Steps[2].Deferred)
	require.Equal(t, orig, tree(t, root), "plan changes nothing")
	require.Equal(t, 0, journalLen(t, root))

	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `+GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt"`)
	require.Contains(t, out, "run: update-grub")
	require.Contains(t, out, "2. reboot: REBOOT REQUIRED HERE")

	// first apply: kernel arguments, then it stops at the reboot
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "reboot required")
	grubFile, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Contains(t, string(grubFile), `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt"`)
	require.Equal(t, [][]string{{"update-grub"}}, (*sim).Commands)
	require.Equal(t, "nvidia", driverOf(t, root, offGPU))
	require.NoFileExists(t, filepath.Join(root, "etc/default/kubelet"), "nothing after the reboot step runs before it")

	// again before the reboot: still stops there, changes nothing
	n := journalLen(t, root)
	_, _, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code)
	require.Empty(t, (*sim).Commands)
	require.Equal(t, n+1, journalLen(t, root), "only the reboot step is recorded again")

	simulateReboot(t, root)
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	p = planJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-bind", "label"}, p.ids(), "after the reboot: no kernel-args, no reboot")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes", "-o", "json")
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.NotNil(t, a.Report, out)
	require.Equal(t, "pass", findingStatus(a, "vfio.binding", offGPU), out)
	require.Equal(t, "pass", findingStatus(a, "iommu.kernel", ""), out)
	if a.Report.Ready {
		require.Equal(t, 0, code, errs)
	} else {
		require.Equal(t, exitNotReady, code, errs)
	}
	require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
	require.FileExists(t, filepath.Join(root, vfio.ModprobeConf))
	kubelet, err := os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.Contains(t, string(kubelet), "nvidia.com/gpu.workload.config=vm-passthrough")
	require.Contains(t, (*sim).Commands, []string{"update-initramfs", "-u"})

	// a re-run is a no-op
	n = journalLen(t, root)
	after := tree(t, root)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Contains(t, out, "Nothing to do", errs)
	require.Equal(t, n, journalLen(t, root))
	require.Equal(t, after, tree(t, root))
	require.Empty(t, (*sim).Commands)
	_ = code

	// rollback: every file byte-identical, the driver back, a reboot needed
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "reboot the node")
	require.Equal(t, orig, tree(t, root))
	require.Equal(t, "nvidia", driverOf(t, root, offGPU))
	require.Contains(t, (*sim).Commands, []string{"update-grub"})
	require.Contains(t, (*sim).Commands, []string{"update-initramfs", "-u"})

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to roll back.")
	require.Equal(t, orig, tree(t, root))
}

func TestApplyContainerOnVFIOBound(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "vfio-bound")
	orig := tree(t, root)
	gpus := []string{"0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:41:00.0"}

	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.NotNil(t, a.Report, out)
	for _, g := range gpus {
		require.Equal(t, "", driverOf(t, root, g))
		require.Equal(t, "pass", findingStatus(a, "vfio.binding", g), out)
	}
	require.True(t, a.Report.Ready, out)
	require.Equal(t, 0, code, errs)
	kubelet, err := os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.Equal(t, "KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=container,topology.kubernetes.io/zone=r1\"\n", string(kubelet))

	out, _, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Nothing to do")

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, orig, tree(t, root))
	for _, g := range gpus {
		require.Equal(t, "vfio-pci", driverOf(t, root, g))
	}
	out, _, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code)
	require.Contains(t, out, "Nothing to roll back.")
}

func TestPlanReadyNodePlansNothing(t *testing.T) {
	for _, sc := range []struct{ name, mode string }{{"vfio-bound", "vm-passthrough"}, {"hgx-h200", "container"}} {
		root := fixtureRoot(t, sc.name)
		if sc.name == "vfio-bound" { // and at boot
			require.NoError(t, fixture.New(root).File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:2331\n").File("/etc/modules-load.d/vfio.conf", "vfio_pci\n").Err())
		}
		if sc.name == "hgx-h200" {
			require.NoError(t, fixture.New(root).File("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=container\n").Err())
		}
		out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", sc.mode, "-o", "json")
		require.Equal(t, 0, code, errs)
		var p planJSON
		require.NoError(t, json.Unmarshal([]byte(out), &p))
		require.Empty(t, p.Steps, "%s: %s", sc.name, out)
	}
}

func TestPlanNoBootloaderArgsEffective(t *testing.T) {
	root := fixtureRoot(t, "turing-multifunction")
	require.NoError(t, os.Remove(filepath.Join(root, "etc/default/grub")))
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-bind", "label"}, p.ids())
	require.Contains(t, out, "no bootloader configuration found, but the running kernel already has intel_iommu=on iommu=pt")

	// without the arguments on the running kernel, it cannot be planned
	require.NoError(t, fixture.New(root).File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=UUID=1 ro quiet\n").Err())
	_, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errs, "no bootloader configuration found")
	// the IOMMU is active without intel_iommu=on: only iommu=pt is needed
	require.Contains(t, errs, "the running kernel lacks iommu=pt: add them where this node's kernel command line is made (the PXE/iPXE boot configuration")
}

func TestApplyConfirmation(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "turing-multifunction")
	orig := tree(t, root)

	d.stdinTTY = func() bool { return false }
	_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "run it on a terminal to confirm, or pass --yes")

	d.stdinTTY = func() bool { return true }
	d.confirmInput = strings.NewReader("n\n")
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, exitNotReady, code)
	require.Contains(t, errs, "Apply these steps? [y/N]")
	require.Contains(t, errs, "not confirmed: nothing was changed")
	require.Equal(t, orig, tree(t, root))
	require.Equal(t, 0, journalLen(t, root))

	d.confirmInput = strings.NewReader("y\n")
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, []int{0, 1}, code, out+errs)
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:01:00.0"))

	// rollback --to keeps the steps up to the named one
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--to", "nonsense")
	require.Equal(t, exitUsage, code, out)
	require.Contains(t, errs, "done: vfio-bind, label")
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--to", "vfio-bind")
	require.Equal(t, 0, code, out+errs)
	require.NoFileExists(t, filepath.Join(root, "etc/default/kubelet"))
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:01:00.0"))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, "nvidia", driverOf(t, root, "0000:01:00.0"))
	require.Equal(t, "snd_hda_intel", driverOf(t, root, "0000:01:00.1"))
	require.Equal(t, orig, tree(t, root))
}

func TestApplyRefusesOtherRoots(t *testing.T) {
	root := fixtureRoot(t, "turing-multifunction")
	_, errs, code := gpuprep(t, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "only gpuprep plan works")
	_, _, code = gpuprep(t, "plan", "--root", root, "--mode", "bogus")
	require.Equal(t, exitUsage, code)
	_, _, code = gpuprep(t, "plan", "--root", root)
	require.Equal(t, exitUsage, code)
	_, errs, code = gpuprep(t, "plan", "--root", fixtureRoot(t, "consumer-shared-group"), "--mode", "vm-passthrough")
	require.Equal(t, exitNotReady, code)
	require.Contains(t, errs, "IOMMU group 5 also holds")
}

// apply --mode container on a GPU that nouveau drives: the nouveau step
// blacklists it, regenerates the initramfs and unloads it; once unloaded,
// the reboot step after it is skipped and the node is ready. rollback
// removes the blacklist (regenerating the initramfs) and leaves nouveau
// unloaded.
func TestApplyContainerUnloadsNouveau(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	withTools(t, root)
	orig := tree(t, root)
	const gpu = "0000:21:00.0"
	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"nouveau", "reboot", "label"}, p.ids())
	require.Equal(t, []string{"update-initramfs -u", "modprobe -r nouveau"}, p.Steps[0].Commands)
	require.True(t, p.Steps[1].Reboot)
	out, _, _ = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container")
	require.Contains(t, out, "REBOOT REQUIRED HERE unless nouveau could be unloaded: nouveau drives "+gpu)
	require.NotContains(t, out, "not ready after apply")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "skipped", a.Outcome.Steps[1].Status)
	require.False(t, a.Outcome.Reboot)
	require.True(t, a.Report.Ready, out)
	require.Equal(t, "", driverOf(t, root, gpu))
	require.NoDirExists(t, filepath.Join(root, "sys/module/nouveau"))
	b, err := os.ReadFile(filepath.Join(root, vgpu.NouveauBlacklist))
	require.NoError(t, err)
	require.Equal(t, string(vgpu.NouveauBlacklistContent), string(b))
	require.True(t, hasCommand((*sim).Commands, "update-initramfs", "-u"), "%v", (*sim).Commands)

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))
	require.True(t, hasCommand((*sim).Commands, "update-initramfs", "-u"), "rollback regenerates it without the blacklist: %v", (*sim).Commands)
	require.Equal(t, orig, tree(t, root), "every file as before (the blacklist and the kubelet label gone)")
	require.Equal(t, "", driverOf(t, root, gpu), "nouveau is not loaded again by rollback")
}

// nouveauInUse makes every simulated kernel of the test fail modprobe -r
// nouveau, as a console or display server using it does.
func nouveauInUse(t *testing.T, d *deps) {
	t.Helper()
	d.provisionKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		if err == nil {
			k.Fail["modprobe -r nouveau"] = errors.New("modprobe: FATAL: Module nouveau is in use.")
		}
		return k, k, err
	}
}

// rebootWithoutNouveau makes the fixture look like the node after a reboot
// that left nouveau out: a new boot ID, the module gone, the GPU unbound.
func rebootWithoutNouveau(t *testing.T, root, gpu string) {
	t.Helper()
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", gpu))
	require.NoError(t, err)
	for _, p := range []string{filepath.Join(root, "sys/module/nouveau"), filepath.Join(root, "sys/bus/pci/drivers/nouveau"), filepath.Join(dev, "driver")} {
		require.NoError(t, os.RemoveAll(p))
	}
}

// nouveau in use: apply stops at the reboot step (exit 4; a re-run before
// the reboot tries the unload again and stops again) and, after a reboot
// that left nouveau out, finishes ready.
func TestApplyContainerNouveauInUseReboots(t *testing.T) {
	d := realDeps()
	nouveauInUse(t, d)
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	withTools(t, root)
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	const gpu = "0000:21:00.0"
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--select", "10de", "--yes", "--reboot=false", "--force=false")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "nouveau could not be unloaded")
	require.Contains(t, out, "reboot required: reboot the node, then run gpuprep apply --force=false --mode=container --root="+root+" --select=10de --yes again to continue", "the same flags, --reboot left out, a false one kept false")
	require.Equal(t, "nouveau", driverOf(t, root, gpu))
	require.Equal(t, "11111111-1111-1111-1111-111111111111", rebootAsk(t, root).Device)

	// not rebooted yet: the blacklist and initramfs stand, the unload is tried again
	require.NoError(t, fixture.New(root).Touch("/boot/initrd.img-5.15.0-91-generic", time.Now().Add(time.Minute)).Err())
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"nouveau", "reboot", "label"}, p.ids())
	require.Empty(t, p.Steps[0].Files)
	require.Equal(t, []string{"modprobe -r nouveau"}, p.Steps[0].Commands)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)

	rebootWithoutNouveau(t, root, gpu)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, []string{"label"}, func() (ids []string) {
		for _, s := range a.Outcome.Steps {
			ids = append(ids, s.ID)
		}
		return
	}())
	require.True(t, a.Report.Ready, out)
}

// A reboot apply asked for that left nouveau on the GPU: no further reboot
// (not even with --reboot), exit 1 with the diagnosis, from plan too.
func TestApplyContainerNouveauStillLoadedAfterReboot(t *testing.T) {
	d := realDeps()
	nouveauInUse(t, d)
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	withTools(t, root)
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")

	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, out, "NOT EFFECTIVE AFTER THE REBOOT")
	require.Contains(t, out, "the boot ID changed from 11111111-1111-1111-1111-111111111111 to 22222222-2222-2222-2222-222222222222")
	require.Contains(t, errs, "nouveau still drives 0000:21:00.0")

	sim := simulatedKernel(t, d)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "--reboot")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "nouveau still drives 0000:21:00.0")
	require.Contains(t, errs, "the initramfs (/boot/initrd.img-5.15.0-91-generic) is older than /etc/modprobe.d/gpuprep-blacklist-nouveau.conf, so early boot loads nouveau from it: regenerate it (update-initramfs -u)")
	require.Contains(t, errs, "apply does not ask for another reboot")
	if *sim != nil { // nil: apply never reached the host (blocked before it), so nothing ran
		require.False(t, hasCommand((*sim).Commands, "systemctl", "reboot"), "%v", (*sim).Commands)
		require.Empty(t, (*sim).Writes)
	}

	// the cause fixed (the initramfs regenerated after the blacklist): the
	// diagnosis names the next suspects
	require.NoError(t, fixture.New(root).Touch("/boot/initrd.img-5.15.0-91-generic", time.Now().Add(time.Minute)).Err())
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNotReady, code)
	require.Contains(t, errs, "something loads it by name")
	// and rollback starts over
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))
}

// On an HGX board, apply --mode vm-passthrough --nvswitch binds the
// NVSwitches to VFIO with the GPUs (check then passes them for a VM given the
// whole board); a later apply --mode container returns them to the host,
// whose Fabric Manager needs them, with the GPUs. Without --nvswitch the
// plan leaves them and says so; rollback undoes both applies.
func TestApplyNVSwitchesWithTheBoard(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	orig := tree(t, root)
	const sw = "0000:91:00.0,0000:93:00.0,0000:95:00.0,0000:97:00.0"
	switches := strings.Split(sw, ",")

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "note: the NVSwitches 0000:91:00.0, 0000:93:00.0, 0000:95:00.0, 0000:97:00.0 stay with this host")
	require.NotContains(t, out, "0000:91:00.0 (nvidia-nvswitch → vfio-pci)")
	_, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "--nvswitch")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--nvswitch applies to --mode vm-passthrough only")
	// a switch selected by address goes with the GPUs: the note leaves it out
	out, _, _ = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "--select", "0000:13:00.0,0000:91:00.0")
	require.Contains(t, out, "note: the NVSwitches 0000:93:00.0, 0000:95:00.0, 0000:97:00.0 stay with this host")
	// every switch to VFIO with only some GPUs: the others lose the fabric
	out, _, _ = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "--select", "0000:13:00.0", "--nvswitch")
	require.Contains(t, out, "note: --nvswitch gives every NVSwitch to VFIO, but 0000:23:00.0, ")
	require.Contains(t, out, "0000:83:00.0 stay on the host: they lose the NVLink fabric")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--nvswitch", "--yes", "-o", "json")
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.NotNil(t, a.Report, out+errs)
	for _, s := range switches {
		require.Equal(t, "vfio-pci", driverOf(t, root, s))
	}
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:13:00.0"))
	require.Equal(t, "pass", findingStatus(a, "vfio.binding", sw), out)
	require.True(t, a.Report.Ready, out)
	require.Equal(t, 0, code, errs)
	conf, err := os.ReadFile(filepath.Join(root, vfio.ModprobeConf))
	require.NoError(t, err)
	require.Contains(t, string(conf), "0000:97:00.0=vfio-pci")

	// container: the check fails NVSwitches on VFIO; on this board apply
	// does not rebind anything live (NVLink training can hang an SXM GPU
	// moved from vfio-pci to nvidia while the system runs): gpuprep's
	// persistent configuration goes and the reboot returns them
	out, _, _ = gpuprepWith(t, d, "check", "--root", root, "--mode", "container", "-o", "json")
	require.Contains(t, out, "4 of 4 NVSwitches on a VFIO driver")
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "not now: on a board with NVSwitches")
	for _, d := range append([]string{"0000:13:00.0"}, switches...) {
		require.Equal(t, "vfio-pci", driverOf(t, root, d), "nothing rebound live")
	}
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))
	require.Equal(t, "vfio-unbind", rebootAsk(t, root).Path)
	// the same boot: it stops at the reboot again, and changes nothing
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)

	// the boot: every device on its own driver
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	for d, drv := range map[string]string{"0000:13:00.0": "nvidia", "0000:23:00.0": "nvidia", "0000:33:00.0": "nvidia", "0000:43:00.0": "nvidia",
		"0000:53:00.0": "nvidia", "0000:63:00.0": "nvidia", "0000:73:00.0": "nvidia", "0000:83:00.0": "nvidia",
		"0000:91:00.0": "nvidia-nvswitch", "0000:93:00.0": "nvidia-nvswitch", "0000:95:00.0": "nvidia-nvswitch", "0000:97:00.0": "nvidia-nvswitch"} {
		rebind(t, root, d, drv)
	}
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	a = applyJSON{}
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.NotNil(t, a.Report, out+errs)
	require.Equal(t, "", findingStatus(a, "vfio.binding", sw), out)
	require.True(t, a.Report.Ready, out)
	require.Equal(t, 0, code, errs)

	for i := 0; i < 2; i++ {
		out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
		require.Equal(t, 0, code, out+errs)
		if i == 0 {
			require.Contains(t, out, "/etc/modules-load.d: left (gpuprep created it; it holds gpuprep-vfio.conf.gpuprep-")
		}
	}
	// the directory vm-passthrough created stays: it holds the backup
	// container's vfio-unbind made of the file it removed
	require.Equal(t, orig, tree(t, root))
	for _, s := range switches {
		require.Equal(t, "nvidia-nvswitch", driverOf(t, root, s))
	}
	require.Equal(t, "nvidia", driverOf(t, root, "0000:13:00.0"))
}

// The reboot asked for nouveau is not one asked for kernel arguments: after
// it, a vm-passthrough plan still plans the kernel arguments and their
// reboot (no "not effective" diagnosis); and within the boot that asked, a
// nouveau that has become unloadable does not skip the reboot (a node
// going down frees it: fleet apply --reboot runs apply until it is back).
func TestNouveauRebootIsNotKernelArgsReboot(t *testing.T) {
	d := realDeps()
	nouveauInUse(t, d)
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	withTools(t, root)
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	const gpu = "0000:21:00.0"
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Equal(t, "nouveau", rebootAsk(t, root).Path)

	simulatedKernel(t, d) // the unload works now, in the same boot
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	require.Equal(t, exitNeedReboot, code, out+errs)
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.True(t, a.Outcome.Reboot)
	require.Equal(t, "", driverOf(t, root, gpu), "unloaded")

	rebootWithoutNouveau(t, root, gpu)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitOK, code, out+errs)

	// no IOMMU arguments running or configured
	require.NoError(t, fixture.New(root).File("/proc/cmdline", "BOOT_IMAGE=/vmlinuz-5.15.0-91-generic root=/dev/sda1 ro\n").
		File("/etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"\"\n").Err())
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	require.NotContains(t, out, "NOT EFFECTIVE")
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind"}, p.ids()[:3], out)
}

// Unloading nouveau takes it off every device it drives: the plan names the
// GPUs not selected too, and the journal records each, so that rollback
// knows; rollback never takes a GPU from a driver that took it since (the
// GPU Operator's driver container binding it to nvidia) without --force.
func TestNouveauUnloadNamesEveryDeviceAndRollbackLeavesNewDrivers(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	const sel, other = "0000:41:00.0", "0000:61:00.0"
	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "--select", sel)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "take nouveau off "+sel+" for the GPU Operator's driver container: blacklist it, regenerate the initramfs, unload it (which takes it off "+other+" too, not selected")
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--select", sel, "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "", driverOf(t, root, other))
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	var intents []string
	for _, e := range es {
		if e.Kind == "driver-intent" && e.Before == "nouveau" {
			intents = append(intents, e.Device)
		}
	}
	require.Equal(t, []string{sel, other}, intents)

	// the driver container takes the selected GPU; rollback leaves it there
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", sel))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sys/bus/pci/drivers/nvidia"), 0o755))
	rel, err := filepath.Rel(dev, filepath.Join(root, "sys/bus/pci/drivers/nvidia"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(dev, "driver")))
	require.Equal(t, "nvidia", driverOf(t, root, sel))
	// as for a file edited since: not undone, and the rollback is
	// incomplete (exit 1), each device's line saying what became of it
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNotReady, code, out+errs)
	require.Equal(t, "nvidia", driverOf(t, root, sel))
	require.Contains(t, out, sel+": left on nvidia, not put back on nouveau: on nvidia now, a driver gpuprep never moved it to: something moved it since (rollback --force takes it off nvidia; nouveau is not loaded)\n")
	require.Contains(t, out, other+": left unbound, not put back on nouveau: nouveau, its driver before gpuprep, is not loaded (apply unloaded it; rollback does not load it); the next boot loads it (or: modprobe nouveau)\n")
	require.NotContains(t, out, "-> nouveau")
	require.NotContains(t, out, "Rolled back")
	require.Contains(t, errs, "rollback incomplete: "+sel+": left on nvidia")
	require.Equal(t, "", driverOf(t, root, other), "nouveau is not loaded again")
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))

	// the journal kept it: --force does what the line said; both are left
	// unbound for the next boot, which loads nouveau (exit 4)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--force", "-o", "json")
	require.Equal(t, exitNeedReboot, code, out+errs)
	var res rollbackJSON
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, []provision.Left{
		{Kind: "driver", Target: other, Want: "nouveau", Why: "nouveau, its driver before gpuprep, is not loaded (apply unloaded it; rollback does not load it); the next boot loads it (or: modprobe nouveau)", Until: "reboot"},
		{Kind: "driver", Target: sel, Want: "nouveau", Why: "nouveau, its driver before gpuprep, is not loaded (apply unloaded it; rollback does not load it); the next boot loads it (or: modprobe nouveau)", Until: "reboot"},
	}, res.Left, out)
	require.True(t, res.Reboot)
	require.Equal(t, []string{"the next boot loads nouveau for the devices left unbound (or: modprobe nouveau)"}, res.RebootReasons)
	var drivers []provision.Undo
	for _, u := range res.Undone {
		if u.Kind == "driver" {
			drivers = append(drivers, u)
		}
	}
	require.Equal(t, []provision.Undo{{Kind: "driver", Target: sel, Action: "left unbound (nouveau not loaded)"}}, drivers, "only the device it changed")
	require.Equal(t, "", driverOf(t, root, sel))

	// before the boot: nothing more to do, still said
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "Nothing more to roll back now; 2 devices not yet back on their driver from before gpuprep: unbound (was nouveau): "+sel+", "+other+".\n")
	require.NotContains(t, out, "-> ")
	require.Contains(t, out, "The next boot loads nouveau for the devices left unbound (or: modprobe nouveau): reboot the node.\n")

	// the boot loads nouveau, which takes them both: rollback is done
	bootWithNouveau(t, root, sel, other)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "Nothing to roll back.\n", out)
	require.Equal(t, "nouveau", driverOf(t, root, sel))
}

// rollbackJSON is rollback -o json.
type rollbackJSON struct {
	Undone        []provision.Undo `json:"undone"`
	Reboot        bool             `json:"rebootRequired"`
	RebootReasons []string         `json:"rebootReasons"`
	Left          []provision.Left `json:"left"`
	Notes         []string         `json:"notes"`
	Failed        []string         `json:"failed"`
}

// bootWithNouveau is a boot that loads nouveau, which takes gpus.
func bootWithNouveau(t *testing.T, root string, gpus ...string) {
	t.Helper()
	setBootID(t, root, "33333333-3333-3333-3333-333333333333")
	drv := filepath.Join(root, "sys/bus/pci/drivers/nouveau")
	require.NoError(t, os.MkdirAll(drv, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sys/module/nouveau"), 0o755))
	for _, g := range gpus {
		dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", g))
		require.NoError(t, err)
		rel, err := filepath.Rel(dev, drv)
		require.NoError(t, err)
		_ = os.Remove(filepath.Join(dev, "driver"))
		require.NoError(t, os.Symlink(rel, filepath.Join(dev, "driver")))
	}
}

// vm-passthrough took the GPUs from nouveau; container mode's vfio-unbind
// returns them to it, and the nouveau step after it, planned for that,
// takes it off again: one apply leaves the node ready.
func TestApplyContainerAfterPassthroughFromNouveau(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:41:00.0"))

	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-unbind", "nouveau", "reboot", "label"}, p.ids(), out)
	// not bound to nouveau on the way (a console it brings up would keep it loaded)
	require.NotContains(t, strings.Join(p.Steps[0].Sysfs, "\n"), "drivers/nouveau/bind")
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.NotContains(t, out, "-> nouveau")
	for _, g := range []string{"0000:41:00.0", "0000:61:00.0"} {
		require.Equal(t, "", driverOf(t, root, g))
	}
	// the blacklist in gpuprep's VFIO configuration went with it: its own is there
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))
	b, err := os.ReadFile(filepath.Join(root, vgpu.NouveauBlacklist))
	require.NoError(t, err)
	require.Contains(t, string(b), "blacklist nouveau")
}

// A host device selected on a node whose IOMMU needs a reboot first is
// refused by plan now, not after the reboot (the vfio-bind step is planned
// in full only then).
func TestPlanRefusesHostDevicesBeforeTheReboot(t *testing.T) {
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	require.NoError(t, fixture.New(root).PCI(fixture.PCI{Addr: "0000:00:17.0", Vendor: 0x8086, Device: 0x7ae2, Class: 0x010601, Driver: "ahci", Group: -1}).Err())
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "--select", offGPU, "--select", "0000:00:17.0")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "0000:00:17.0 (SATA controller 8086:7ae2, driver ahci) is selected but holds host storage")
	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "--select", offGPU)
	require.Equal(t, 0, code, out+errs)
}

// What no step of a plan changes (firmware, hardware) and keeps the node
// from being ready is listed as such, with check's message: VT-x off in the
// BIOS, no GPU. A node with no such blocker lists none.
func TestPlanNamesBlockersItCannotFix(t *testing.T) {
	for _, c := range []struct{ scenario, mode, want string }{
		{"vtx-disabled", "vm-passthrough", "cpu.virtualization MSR 0x3A (IA32_FEATURE_CONTROL): VT-x disabled by BIOS"},
		{"no-gpu", "container", "gpu.present /sys/bus/pci/devices: no NVIDIA GPU"},
		{"hgx-h200", "vm-passthrough", ""},
		{"iommu-off-kernel", "vm-passthrough", ""}, // the IOMMU comes with the planned reboot
	} {
		root := fixtureRoot(t, c.scenario)
		withTools(t, root)
		out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", c.mode, "-o", "json")
		require.Equal(t, 0, code, out+errs)
		var p struct{ Unaddressed []string }
		require.NoError(t, json.Unmarshal([]byte(out), &p))
		if c.want == "" {
			require.Empty(t, p.Unaddressed, c.scenario)
			continue
		}
		require.NotEmpty(t, p.Unaddressed, c.scenario)
		require.Contains(t, p.Unaddressed[0], c.want, c.scenario)
		var q planJSON
		require.NoError(t, json.Unmarshal([]byte(out), &q))
		require.NotContains(t, q.ids(), "label", "%s: not labelled for a mode it will not be ready for", c.scenario)
	}
}

// hgxGPUs are the hgx-h200 fixture's GPUs.
var hgxGPUs = []string{"0000:13:00.0", "0000:23:00.0", "0000:33:00.0", "0000:43:00.0", "0000:53:00.0", "0000:63:00.0", "0000:73:00.0", "0000:83:00.0"}

// rebind makes the fixture's device addr bound to drv ("" unbound), as a
// boot leaves it.
func rebind(t *testing.T, root, addr, drv string) {
	t.Helper()
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", addr))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(dev, "driver")))
	require.NoError(t, os.WriteFile(filepath.Join(dev, "driver_override"), []byte("(null)\n"), 0o644)) // a boot clears it
	for _, d := range []string{"vfio-pci", "nvidia", "nvidia-nvswitch", "nouveau"} {
		require.NoError(t, os.RemoveAll(filepath.Join(root, "sys/bus/pci/drivers", d, addr)))
	}
	if drv == "" {
		return
	}
	dir := filepath.Join(root, "sys/bus/pci/drivers", drv)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	rel, err := filepath.Rel(dev, dir)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(dev, "driver")))
	rel, err = filepath.Rel(dir, dev)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(dir, addr)))
	require.Equal(t, drv, driverOf(t, root, addr))
}

// After the reboot apply asked for to take devices off VFIO on an NVSwitch
// board, devices still on vfio-pci are diagnosed (what binds them at boot:
// here vfio-pci.ids on the kernel command line), not rebooted again.
func TestApplyUnbindAtBootStillOnVFIO(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)

	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	raw, err := os.ReadFile(filepath.Join(root, "proc/cmdline"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte(strings.TrimSpace(string(raw))+" vfio-pci.ids=10de:2335\n"), 0o644))
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "--reboot")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "are still on VFIO")
	require.Contains(t, errs, `the next boot's kernel command line "vfio-pci.ids=10de:2335" (vfio-pci: binds every device with ID 10de:2335 when vfio-pci initialises) (0000:13:00.0, 0000:23:00.0, `)
	require.Contains(t, errs, "apply does not ask for another reboot")
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:13:00.0"))
}

// A mode switch after an answered reboot: vm-passthrough, container (the
// reboot it asks for, taken), vm-passthrough again, container again: the
// old ask was answered by the apply after it, so the second container apply
// asks for its own reboot instead of blaming the first one.
func TestAnsweredRebootIsNotDiagnosedAgain(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	gpus := hgxGPUs
	apply := func(mode string, want int) string {
		out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", mode, "--yes")
		require.Equal(t, want, code, out+errs)
		return out + errs
	}
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	apply("vm-passthrough", exitOK)
	apply("container", exitNeedReboot)
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	for _, g := range gpus {
		rebind(t, root, g, "nvidia")
	}
	apply("container", exitOK)
	apply("vm-passthrough", exitOK)
	out := apply("container", exitNeedReboot)
	require.NotContains(t, out, "NOT EFFECTIVE")
	require.NotContains(t, out, "still on VFIO")
}

// On an NVSwitch board whose GPUs nouveau drove before vm-passthrough, the
// container plan leaves them on VFIO until the reboot and, as gpuprep's VFIO
// configuration (and its nouveau blacklist) goes, blacklists nouveau itself
// before that reboot: the boot must not give them to nouveau.
func TestUnbindAtBootKeepsNouveauOff(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	require.NoError(t, fixture.New(root).Module("nouveau", nil).Remove("/etc/modprobe.d/blacklist-nouveau.conf").Err())
	gpus := hgxGPUs
	for _, g := range gpus {
		rebind(t, root, g, "nouveau")
	}
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-unbind", "nouveau", "reboot", "label"}, p.ids(), out)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.FileExists(t, filepath.Join(root, vgpu.NouveauBlacklist), "written before the reboot")
}

// The at-boot unbind whose initramfs command failed: the files are gone and
// the image still binds the GPUs at boot. The re-run regenerates it (the
// image is older than the removal) before asking for the reboot, and the
// failed run did not log the command as run.
func TestUnbindAtBootRegeneratesAfterAFailedInitramfs(t *testing.T) {
	const kernel = "6.8.0-45-generic"
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	require.NoError(t, fixture.New(root).Initramfs(kernel).Touch("/boot/initrd.img-"+kernel, time.Now().Add(-time.Hour)).Err())
	d := realDeps()
	simulatedKernel(t, d)
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.NoError(t, fixture.New(root).Touch("/boot/initrd.img-"+kernel, time.Now().Add(-time.Minute)).Err())

	old := d.provisionKernel
	d.provisionKernel = func(r *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(r.Dir())
		if err == nil {
			k.Fail["update-initramfs -u"] = errors.New("update-initramfs: failed")
		}
		return k, k, err
	}
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNotReady, code, out+errs)
	require.NotContains(t, out, "ran: update-initramfs")
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))

	d.provisionKernel = old
	sim := simulatedKernel(t, d)
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "run: update-initramfs -u")
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.True(t, hasCommand((*sim).Commands, "update-initramfs", "-u"), "%v", (*sim).Commands)
}

// GPUs that container mode's unbind leaves unbound while nvidia is loaded
// (the journal has no driver of theirs from before VFIO) fail the check, and
// the plan after it says so instead of "nothing to do".
func TestPlanAfterUnbindLeftUnboundSaysNotReady(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "vfio-bound")
	require.NoError(t, fixture.New(root).Module("nvidia", nil).Mkdir("/sys/bus/pci/drivers/nvidia").Err())
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Equal(t, "", driverOf(t, root, "0000:11:00.0"))
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "container")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Nothing gpuprep can do on vfio-node for container, but it is not ready")
	require.Contains(t, out, "not ready after apply: vfio.binding 0000:11:00.0: no driver bound while nvidia is loaded")
}

// Rolling back the at-boot unbind after its reboot restores gpuprep's VFIO
// configuration while the GPUs run on nvidia: rollback says the next boot
// differs (exit 4) instead of "rolled back" with drivers and files at odds.
func TestRollbackOfUnbindAtBootAfterItsReboot(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	for _, g := range hgxGPUs {
		rebind(t, root, g, "nvidia")
	}
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--to", "vfio-bind")
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.FileExists(t, filepath.Join(root, vfio.ModprobeConf))
	require.Contains(t, out+errs, "binds them to vfio-pci at the next boot; they are not on it now")
}

// vm-vgpu on a GeForce board: plan refuses (no vGPU manager install for a
// board that cannot host vGPU), naming the board and what to do instead.
func TestPlanVGPURefusesGeForce(t *testing.T) {
	root := fixtureRoot(t, "consumer-shared-group")
	cfg := writeFile(t, "vgpu.yaml", "version: v1\nvgpu-configs:\n  default:\n  - devices: all\n    vgpu-devices:\n      A10-4Q: 6\n")
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "default")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "0000:02:00.0 (GeForce RTX 4090): consumer GeForce/TITAN boards cannot host NVIDIA vGPU")
}

// GPUs bound to VFIO live (vfio bind without --persist) go back to their
// host drivers at the next boot: plan makes the binding persistent, apply
// does it, and check then no longer warns.
func TestPlanPersistsALiveVFIOBinding(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "vfio-bound") // bound live: nothing binds the GPUs at boot
	withTools(t, root)
	out, errs, code := gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "bound to vfio-pci until the next boot")
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Len(t, p.Steps, 1, out)
	require.Equal(t, "vfio-bind", p.Steps[0].ID)
	require.Contains(t, p.Steps[0].Title, "nothing binds 0000:11:00.0, 0000:21:00.0, 0000:31:00.0, 0000:41:00.0 to VFIO at boot")
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, 0, code, errs)
	out, errs, code = gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "until the next boot")
	out, _, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Empty(t, p.Steps, "applied: nothing more to do")
}

// GPUs on VFIO through the admin's own configuration (here `options
// vfio-pci ids=` in /etc/modprobe.d/vfio.conf): a container plan unbinds
// them, but says they are bound again at the next boot, which gpuprep does
// not change (it removes only what it wrote), and does not label the node;
// check's remedy says so too.
func TestPlanContainerWithForeignVFIOConfiguration(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	require.NoError(t, fixture.New(root).File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:2331\n").File("/etc/modules-load.d/vfio.conf", "vfio_pci\n").Err())
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Contains(t, out, `"vfio.binding 0000:11:00.0: /etc/modprobe.d/vfio.conf:1 \"options vfio-pci ids=10de:2331\" (modprobe: gives vfio-pci ID 10de:2331 when it loads), vfio-pci loaded early by /etc/modules-load.d/vfio.conf:1`)
	for _, s := range p.Steps {
		require.NotEqual(t, "label", s.ID, "not labelled for containers while the GPUs return to VFIO at boot")
	}
	out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "container")
	require.Contains(t, out, "which vfio unbind leaves (it removes only gpuprep's configuration): /etc/modprobe.d/vfio.conf:1 \"options vfio-pci ids=10de:2331\"")

	require.NoError(t, os.Remove(filepath.Join(root, "etc/modprobe.d/vfio.conf")))
	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "again at the next boot")
	require.Contains(t, out, `"id": "label"`)
}
