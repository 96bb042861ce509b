package vfio

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

func persistWarnings(p *Plan) []string {
	var out []string
	for _, w := range p.Warnings {
		if strings.HasPrefix(w, "NOT PERSISTENT ACROSS A REBOOT") {
			out = append(out, w)
		}
	}
	return out
}

// xhci_pci built into the kernel takes the card's USB controller at every
// boot, before vfio-pci (a module) loads: vfio bind --persist binds it now,
// and warns that its persistent configuration will not hold it, naming the
// function, the driver and what does hold (driverctl), before the bind and
// after it (the driver then comes from the journal).
func TestPersistWarnsOfABuiltinDriver(t *testing.T) {
	k := sim(t, "turing-builtin-xhci")
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o)
	ws := persistWarnings(p)
	require.Len(t, ws, 1, "%q", p.Warnings)
	require.Contains(t, ws[0], "xhci_pci (driver xhci_hcd) is built into the kernel (modules.builtin): it binds 0000:01:00.2 while the kernel boots")
	require.Contains(t, ws[0], "driverctl set-override 0000:01:00.2 vfio-pci")
	require.Contains(t, ws[0], "gpuprep vfio bind --select 0000:01:00.0 after each boot")

	_, err := Bind(context.Background(), env(k), inv, p, o)
	require.NoError(t, err)
	require.Equal(t, "vfio-pci", k.Driver("0000:01:00.2"))
	_, p = plan(t, k, o)
	require.Len(t, persistWarnings(p), 1, "on vfio-pci now, and xhci_hcd's again at the next boot: %q", p.Warnings)

	// without --persist nothing is claimed to persist
	o.Persist = false
	_, p = plan(t, k, o)
	require.Empty(t, persistWarnings(p))
}

// The same card on a kernel with its drivers as modules: no warning.
func TestPersistNoWarningWithModules(t *testing.T) {
	k := sim(t, "turing-multifunction")
	o := opts()
	o.Persist = true
	_, p := plan(t, k, o)
	require.Empty(t, persistWarnings(p), "%q", p.Warnings)
}

// vfio-pci built in as well: vfio-pci.ids= on the kernel command line is
// what holds; once the running kernel has it for the function, no warning.
func TestBuiltinVFIOPCIWantsIDsOnTheCommandLine(t *testing.T) {
	builtinVFIO := func(b *fixture.Builder) {
		b.ModuleFiles("6.1.0-18-amd64", nil, []string{"kernel/drivers/usb/host/xhci-pci.ko", "kernel/drivers/vfio/pci/vfio-pci.ko", "kernel/drivers/vfio/vfio.ko"}, nil)
	}
	k := sim(t, "turing-builtin-xhci", builtinVFIO)
	o := opts()
	o.Persist = true
	_, p := plan(t, k, o)
	ws := persistWarnings(p)
	require.Len(t, ws, 1, "%q", p.Warnings)
	require.Contains(t, ws[0], "add vfio-pci.ids=10de:1ad8 to the kernel command line (gpuprep grub ensure vfio-pci.ids=10de:1ad8")

	k = sim(t, "turing-builtin-xhci", builtinVFIO, func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=1 ro intel_iommu=on iommu=pt vfio-pci.ids=10de:1e87,10DE:1AD8\n")
	})
	_, p = plan(t, k, o)
	require.Empty(t, persistWarnings(p), "%q", p.Warnings)
}

// A function on a built-in pci-stub is not a hold: pci-stub takes only the
// IDs it is given, and keeps the group viable.
func TestBuiltinPCIStubIsNotAHold(t *testing.T) {
	k := sim(t, "turing-builtin-xhci", func(b *fixture.Builder) {
		b.ModuleFiles("6.1.0-18-amd64", nil, []string{"kernel/drivers/usb/host/xhci-pci.ko", "kernel/drivers/pci/pci-stub.ko"}, nil)
		b.File("/sys/bus/pci/drivers/pci-stub/bind", "").File("/sys/bus/pci/drivers/pci-stub/unbind", "")
	})
	require.NoError(t, k.WriteAttr("/sys/bus/pci/drivers/xhci_hcd/unbind", "0000:01:00.2"))
	require.NoError(t, k.WriteAttr("/sys/bus/pci/drivers/pci-stub/bind", "0000:01:00.2"))
	require.Equal(t, "pci-stub", k.Driver("0000:01:00.2"))
	require.Empty(t, BuiltinHolds(k.Root, inventory(t, k).Devices))
}

// A driverctl override to vfio-pci (BuiltinFix's remedy where vfio-pci is a
// module) is what holds: no warning once it is there.
func TestDriverctlOverrideIsNotAHold(t *testing.T) {
	k := sim(t, "turing-builtin-xhci")
	require.Len(t, BuiltinHolds(k.Root, inventory(t, k).Devices), 1)
	k = sim(t, "turing-builtin-xhci", func(b *fixture.Builder) { b.File("/etc/driverctl.d/pci-0000:01:00.2", "vfio-pci\n") })
	require.Empty(t, BuiltinHolds(k.Root, inventory(t, k).Devices))
}

// Built-in nouveau initialises before a built-in vfio-pci (drivers/gpu links
// before drivers/vfio): vfio-pci.ids= on the command line does not keep the
// GPU from it; only nouveau.modeset=0 does.
func TestBuiltinNouveauBeforeBuiltinVFIOPCI(t *testing.T) {
	const ids = "BOOT_IMAGE=/boot/vmlinuz root=UUID=1 ro intel_iommu=on iommu=pt vfio-pci.ids=10de:1eb8"
	both := func(b *fixture.Builder) {
		b.ModuleFiles("5.15.0-91-generic", nil, []string{"kernel/drivers/gpu/drm/nouveau/nouveau.ko", "kernel/drivers/vfio/pci/vfio-pci.ko", "kernel/drivers/vfio/vfio.ko"}, nil)
	}
	k := sim(t, "nouveau-builtin", both, func(b *fixture.Builder) { b.File("/proc/cmdline", ids+"\n") })
	hs := BuiltinHolds(k.Root, inventory(t, k).Devices)
	require.Len(t, hs, 1)
	require.Equal(t, "nouveau", hs[0].Module)
	k = sim(t, "nouveau-builtin", both, func(b *fixture.Builder) { b.File("/proc/cmdline", ids+" nouveau.modeset=0\n") })
	require.Empty(t, BuiltinHolds(k.Root, inventory(t, k).Devices))
}
