package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// A card whose USB controller a built-in xhci_pci takes at every boot:
// vfio.binding warns for vm-passthrough, naming the function, the driver,
// why gpuprep's persistent configuration cannot hold it and what does.
// The same card with the drivers as modules gets no such warning.
func TestBuiltinFunctionDriverWarns(t *testing.T) {
	_, res := run(t, "turing-builtin-xhci")
	fs := findStatus(res, want{"vfio.binding", "0000:01:00.2", preflight.Warn, preflight.VMPassthrough})
	require.Len(t, fs, 1)
	f := fs[0]
	require.Equal(t, preflight.Warn, f.Status)
	require.Equal(t, []preflight.Mode{preflight.VMPassthrough}, f.Modes)
	require.Contains(t, f.Message, "USB function, on driver xhci_hcd now: xhci_pci (driver xhci_hcd) is built into the kernel (modules.builtin)")
	require.Contains(t, f.Message, "after every reboot it is on xhci_hcd again")
	require.Contains(t, f.Remedy, "driverctl set-override 0000:01:00.2 vfio-pci")
	for _, a := range []string{"0000:01:00.0", "0000:01:00.1", "0000:01:00.3"} {
		require.Empty(t, findStatus(res, want{"vfio.binding", a, preflight.Warn, preflight.VMPassthrough}), a)
	}

	_, res = run(t, "turing-multifunction")
	require.Empty(t, findStatus(res, want{"vfio.binding", "0000:01:00.2", preflight.Warn, preflight.VMPassthrough}))
}

// nouveau built in: driver.nouveau's remedy is nouveau.modeset=0 on the
// kernel command line, not a blacklist (which does nothing to it); vm-vgpu's
// binding remedy says so too, and vm-passthrough warns that the GPU goes
// back to nouveau at every boot.
func TestBuiltinNouveau(t *testing.T) {
	_, res := run(t, "nouveau-builtin")
	const gpu = "0000:21:00.0"
	for _, m := range preflight.Modes {
		fs := findStatus(res, want{"driver.nouveau", gpu, preflight.Fail, m})
		require.Len(t, fs, 1, m)
		require.Contains(t, fs[0].Message, "nouveau is built into kernel 5.15.0-91-generic (modules.builtin), so a blacklist, the initramfs and modprobe -r cannot remove it", m)
		require.Contains(t, fs[0].Remedy, "nouveau.modeset=0", m)
		require.NotContains(t, fs[0].Remedy, "blacklist nouveau (", m)
	}
	fs := findStatus(res, want{"vfio.binding", gpu, preflight.Fail, preflight.VMVGPU})
	require.Len(t, fs, 1)
	require.Contains(t, fs[0].Remedy, "nouveau.modeset=0")
	fs = findStatus(res, want{"vfio.binding", gpu, preflight.Warn, preflight.VMPassthrough})
	require.Len(t, fs, 1)
	require.Contains(t, fs[0].Remedy, "nouveau.modeset=0")

	// after a boot with nouveau.modeset=0: no nouveau driver registered
	// (its parameters stay in /sys/module/nouveau), the GPU unbound: pass
	dir := t.TempDir()
	require.NoError(t, fixture.Build("nouveau-builtin", dir))
	require.NoError(t, fixture.New(dir).
		File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro quiet splash intel_iommu=on iommu=pt nouveau.modeset=0\n").
		Remove("/sys/bus/pci/drivers/nouveau").Remove("/sys/devices/pci0000:20/0000:20:01.0/0000:21:00.0/driver").Err())
	_, res = runRoot(t, dir)
	fs = findStatus(res, want{"driver.nouveau", "/sys/bus/pci/drivers/nouveau", preflight.Pass, ""})
	require.Len(t, fs, 1, "%+v", res.Findings)
	require.Contains(t, fs[0].Message, "kept off by nouveau.modeset=0")
	require.Empty(t, findStatus(res, want{"vfio.binding", gpu, preflight.Warn, preflight.VMPassthrough}))

	// built in, its driver registered, no GPU on it: a warn with the same remedy
	dir = t.TempDir()
	require.NoError(t, fixture.Build("nouveau-builtin", dir))
	require.NoError(t, fixture.New(dir).Remove("/sys/devices/pci0000:20/0000:20:01.0/0000:21:00.0/driver").Err())
	_, res = runRoot(t, dir)
	fs = findStatus(res, want{"driver.nouveau", "/sys/bus/pci/drivers/nouveau", preflight.Warn, ""})
	require.Len(t, fs, 1, "%+v", res.Findings)
	require.Contains(t, fs[0].Remedy, "gpuprep grub ensure nouveau.modeset=0")

	// the same with nouveau.modeset=0 already on the command line: the kernel
	// ignores it, so adding it is no remedy
	require.NoError(t, fixture.New(dir).File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic root=UUID=2f1c ro intel_iommu=on iommu=pt nouveau.modeset=0\n").Err())
	_, res = runRoot(t, dir)
	fs = findStatus(res, want{"driver.nouveau", "/sys/bus/pci/drivers/nouveau", preflight.Warn, ""})
	require.Len(t, fs, 1, "%+v", res.Findings)
	require.Contains(t, fs[0].Message, "this kernel does not honour it")
	require.NotContains(t, fs[0].Remedy, "grub ensure")
}

// findStatus is find, of the findings with w's status only.
func findStatus(res *preflight.Result, w want) []preflight.Finding {
	var out []preflight.Finding
	for _, f := range find(res, w) {
		if f.Status == w.status {
			out = append(out, f)
		}
	}
	return out
}
