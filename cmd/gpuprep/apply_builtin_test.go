package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
)

// bootWithNouveauOff makes the nouveau-builtin fixture look like the node
// after a boot with nouveau.modeset=0: the argument on /proc/cmdline, no
// nouveau driver registered (its parameters stay in /sys/module/nouveau,
// as a built-in module's do), the GPU unbound, a new boot ID.
func bootWithNouveauOff(t *testing.T, root, gpu, bootID string) {
	t.Helper()
	setBootID(t, root, bootID)
	raw, err := os.ReadFile(filepath.Join(root, "proc/cmdline"))
	require.NoError(t, err)
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", gpu))
	require.NoError(t, err)
	for _, p := range []string{filepath.Join(root, "sys/bus/pci/drivers/nouveau"), filepath.Join(dev, "driver")} {
		require.NoError(t, os.RemoveAll(p))
	}
	require.NoError(t, fixture.New(root).File("/proc/cmdline", strings.TrimSpace(string(raw))+" nouveau.modeset=0\n").Err())
}

// apply --mode container with nouveau built into the kernel: no blacklist,
// initramfs or modprobe -r (they cannot remove a built-in module), but
// nouveau.modeset=0 through the bootloader and the reboot; a reboot that did
// not bring the argument is diagnosed as that, not as "loaded by name"; the
// boot with it finishes ready; rollback takes the argument out.
func TestApplyContainerBuiltinNouveau(t *testing.T) {
	d := realDeps()
	sim := simulatedKernel(t, d)
	root := fixtureRoot(t, "nouveau-builtin")
	withTools(t, root)
	orig := tree(t, root)
	setBootID(t, root, "11111111-1111-1111-1111-111111111111")
	const gpu = "0000:21:00.0"

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "label"}, p.ids(), out)
	require.Contains(t, p.Steps[0].Title, "add nouveau.modeset=0 to the next boot's kernel command line (grub)")
	require.Contains(t, p.Steps[0].Title, "nouveau is built into kernel 5.15.0-91-generic (modules.builtin)")
	require.Equal(t, []string{"update-grub"}, p.Steps[0].Commands)
	require.True(t, p.Steps[1].Reboot)
	require.NotContains(t, out, `"modprobe -r nouveau"`, "no unload: a built-in module cannot be removed")
	require.NotContains(t, out, vgpu.NouveauBlacklist, "no blacklist: it does nothing to a built-in module")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	b, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Contains(t, string(b), `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt nouveau.modeset=0"`)
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))
	require.False(t, hasCommand((*sim).Commands, "modprobe", "-r", "nouveau"), "%v", (*sim).Commands)
	require.True(t, hasCommand((*sim).Commands, "update-grub"), "%v", (*sim).Commands)
	require.Equal(t, "nouveau", driverOf(t, root, gpu))
	require.Equal(t, "nouveau", rebootAsk(t, root).Path)

	// rebooted, but not with the argument (another boot entry, say)
	setBootID(t, root, "22222222-2222-2222-2222-222222222222")
	_, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitNotReady, code, errs)
	require.Contains(t, errs, "nouveau still drives 0000:21:00.0")
	require.Contains(t, errs, "the boot lacked nouveau.modeset=0 (/proc/cmdline), though bootloader grub: /etc/default/grub has it for the next boot, so the boot did not use that configuration")
	require.NotContains(t, errs, "loads it by name")
	require.NotContains(t, errs, "blacklists nouveau")

	bootWithNouveauOff(t, root, gpu, "33333333-3333-3333-3333-333333333333")
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes", "-o", "json")
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, exitOK, code, out+errs)
	require.True(t, a.Report.Ready, out)
	require.Equal(t, "pass", findingStatus(a, "driver.nouveau", ""))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+errs)
	require.Equal(t, orig, tree(t, root), "the argument and the kubelet label gone, every file as before")
}

// vm-passthrough with a GPU that a built-in nouveau takes at every boot:
// nouveau.modeset=0 joins the kernel arguments, and the reboot is for it.
func TestPlanPassthroughBuiltinNouveau(t *testing.T) {
	root := fixtureRoot(t, "nouveau-builtin")
	withTools(t, root)
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vfio-bind", "label"}, p.ids(), out)
	require.Contains(t, p.Steps[0].Title, "add nouveau.modeset=0")
	require.Contains(t, p.Steps[1].Title, "the running kernel lacks nouveau.modeset=0")

	// a card whose drivers are modules gets no such argument
	root = fixtureRoot(t, "vgpu-fresh-mdev")
	withTools(t, root)
	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "nouveau.modeset=0")
}

// vm-passthrough of a card whose USB controller a built-in xhci_pci takes at
// every boot: the vfio-bind step binds it now and says, in its notes, that
// the persistent configuration will not hold it, and what does; vfio bind
// --persist warns the same.
func TestPlanPassthroughBuiltinFunctionDriver(t *testing.T) {
	root := fixtureRoot(t, "turing-builtin-xhci")
	withTools(t, root)
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-bind", "label"}, p.ids(), out)
	notes := strings.Join(p.Steps[0].Notes, "\n")
	require.Contains(t, notes, "NOT PERSISTENT ACROSS A REBOOT: xhci_pci (driver xhci_hcd) is built into the kernel (modules.builtin): it binds 0000:01:00.2")
	require.Contains(t, notes, "driverctl set-override 0000:01:00.2 vfio-pci")

	_, errs, code = gpuprep(t, "vfio", "bind", "--root", root, "--persist", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "gpuprep: warning: NOT PERSISTENT ACROSS A REBOOT: xhci_pci (driver xhci_hcd)")
}
