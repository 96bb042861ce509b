package vfio

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// Built-in drivers and the persistent binding.
//
// A driver built into the kernel (listed in /lib/modules/KVER/modules.builtin)
// registers from its initcall while the kernel boots, and binds every device
// it matches then: before the initramfs runs, before any module loads, before
// udev. gpuprep's persistent configuration acts only later: `options vfio-pci
// ids=` and the softdeps in /etc/modprobe.d when modprobe loads a module
// (modprobe.d never reaches a built-in one), the udev rule when udev sees the
// device, and driver_override does not unbind a device that is bound
// (facts §1). So a function of a GPU card whose driver is built in (the USB
// controller on xhci_pci, HDMI audio on snd_hda_intel, UCSI on
// i2c-nvidia-gpu, the GPU on nouveau) is on that driver again after every
// reboot, and its IOMMU group cannot go to a VM. What does hold:
//
//   - nouveau: nouveau.modeset=0 on the kernel command line; its init then
//     returns before it registers its PCI driver (nouveau_drm_init).
//   - vfio-pci built in as well: vfio-pci.ids= on the kernel command line.
//     vfio-pci's init adds those IDs and binds the matching unbound devices;
//     built-in drivers of one initcall level register in link order, and
//     drivers/vfio links before drivers/usb, drivers/i2c and sound/ (but
//     after drivers/gpu: nouveau needs its own argument). The IDs are global:
//     every device with them goes to vfio-pci.
//   - vfio-pci a module: nothing at boot configuration time; the function
//     must be taken from its driver after each boot (unbind, then probe with
//     driver_override set), which is what driverctl's boot service does for
//     an override saved with `driverctl set-override BDF vfio-pci`.

// BuiltinHold is a function of a passed-through card that a driver built into
// the kernel takes at every boot.
type BuiltinHold struct {
	Dev    *pci.Device
	Driver string // the PCI driver that takes it (xhci_hcd)
	Module string // the built-in module of that driver (xhci_pci)
}

// knownModules maps the PCI drivers of a GPU card's functions to their
// modules where sysfs does not say (the driver not registered now).
var knownModules = map[string]string{
	"xhci_hcd":      "xhci_pci",
	"nvidia-gpu":    "i2c_nvidia_gpu",
	"snd_hda_intel": "snd_hda_intel",
	"nouveau":       "nouveau",
}

// DriverModule is the module of PCI driver drv: the driver's module link
// (sysfs makes it for built-in drivers too), else knownModules, else drv.
func DriverModule(root *host.Root, drv string) string {
	if m := root.LinkBase("/sys/bus/pci/drivers/" + drv + "/module"); m != "" {
		return kargs.Norm(m)
	}
	if m, ok := knownModules[drv]; ok {
		return m
	}
	return kargs.Norm(drv)
}

// BuiltinModules is the set of modules built into kernel kver
// (modules.builtin: kernel/drivers/usb/host/xhci-pci.ko → xhci_pci); nil
// when the file cannot be read.
func BuiltinModules(root *host.Root, kver string) map[string]bool {
	b, err := root.ReadFile("/lib/modules/" + kver + "/modules.builtin")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		base := l[strings.LastIndexByte(l, '/')+1:]
		if i := strings.Index(base, ".ko"); i > 0 {
			out[kargs.Norm(base[:i])] = true
		}
	}
	return out
}

// NouveauBuiltin reports whether the running kernel has nouveau built in
// (modules.builtin): a blacklist, the initramfs and modprobe -r do nothing
// to it; only NouveauOff on the kernel command line keeps it off.
func NouveauBuiltin(root *host.Root) bool {
	kver, _ := kernelrelease.Running(root)
	return BuiltinModules(root, strings.TrimSpace(kver))["nouveau"]
}

// NouveauOff is the kernel argument that keeps a built-in nouveau from
// registering its driver.
var NouveauOff = kargs.Param{Key: "nouveau.modeset", Value: "0", HasValue: true}

// bootDriver is the driver d has outside VFIO: the one it is on, or, while it
// is on a VFIO driver, the one the journal recorded before vfio bind.
func bootDriver(root *host.Root, d *pci.Device, entries []journal.Entry) string {
	drv := root.LinkBase("/sys/bus/pci/devices/" + d.Address + "/driver")
	if !pci.DriverIsVFIO(drv) {
		return drv
	}
	before, _ := DriverBefore(entries, d.Address)
	return before
}

// BuiltinHolds returns the devices of devs that a built-in driver takes at
// the next boot, judged from the running kernel: its modules.builtin, and its
// command line (nouveau.modeset=0 keeps nouveau off; vfio-pci.ids= naming the
// device, with vfio-pci built in, gives it to vfio-pci first). Bridges are
// left out (vfio-pci takes none), and so are devices whose driver outside
// VFIO is unknown.
func BuiltinHolds(root *host.Root, devs []*pci.Device) []BuiltinHold {
	kver, _ := kernelrelease.Running(root)
	builtin := BuiltinModules(root, kver)
	if len(builtin) == 0 {
		return nil
	}
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	cmdline := kargs.Parse(raw)
	entries, _ := journal.Read(root)
	var out []BuiltinHold
	for _, d := range devs {
		if d.IsBridge() {
			continue
		}
		drv := bootDriver(root, d, entries)
		if drv == "" || drv == "pci-stub" {
			// pci-stub binds only the IDs it is given (pci-stub.ids=), and
			// keeps the group viable (driver_managed_dma): not a hold
			continue
		}
		mod := DriverModule(root, drv)
		switch {
		case !builtin[mod]:
			continue
		case mod == "nouveau" && kargs.Satisfied(cmdline, NouveauOff):
			continue
		case mod != "nouveau" && builtin["vfio_pci"] && IDsOnCmdline(cmdline, d):
			// vfio-pci's initcall runs before the driver's; not before
			// nouveau's (drivers/gpu links before drivers/vfio)
			continue
		case driverctlVFIO(root, d.Address):
			// driverctl's boot service takes it from the driver and
			// probes it with driver_override (BuiltinFix's remedy)
			continue
		}
		out = append(out, BuiltinHold{Dev: d, Driver: drv, Module: mod})
	}
	return out
}

// IDsOnCmdline reports whether vfio-pci.ids= (its last occurrence) names
// d's vendor:device.
func IDsOnCmdline(ps []kargs.Param, d *pci.Device) bool {
	p, ok := kargs.Last(ps, "vfio_pci.ids")
	return ok && idListHas(p.Value, d.VendorID+":"+d.DeviceID)
}

// BuiltinWhy says why h defeats gpuprep's persistent configuration.
func BuiltinWhy(h BuiltinHold) string {
	return fmt.Sprintf("%s (driver %s) is built into the kernel (modules.builtin): it binds %s while the kernel boots, before the initramfs, any module or udev, and gpuprep's persistent configuration cannot undo that "+
		"(the softdeps and `options vfio-pci ids=` of %s act only when modprobe loads a module; the udev rule's driver_override does not unbind a bound device): "+
		"after every reboot it is on %s again and the card's IOMMU group cannot go to a VM",
		h.Module, h.Driver, h.Dev.Address, ModprobeConf, h.Driver)
}

// BuiltinFix is what keeps h on vfio-pci across reboots: nouveau.modeset=0
// for nouveau; vfio-pci.ids= on the kernel command line where vfio-pci is
// built in too; else taking the function from its driver after each boot
// (driverctl), or a kernel with the driver as a module. gpu is the address
// of the card's GPU, for the vfio bind that rebinds it by hand.
func BuiltinFix(root *host.Root, h BuiltinHold, gpu string) string {
	if h.Module == "nouveau" {
		return "add " + NouveauOff.String() + " to the kernel command line (gpuprep grub ensure " + NouveauOff.String() + ", or gpuprep apply --mode vm-passthrough, which plans it) and reboot: with it nouveau's init returns before it registers its PCI driver, and vfio-pci takes the GPU"
	}
	kver, _ := kernelrelease.Running(root)
	id := h.Dev.VendorID + ":" + h.Dev.DeviceID
	if BuiltinModules(root, kver)["vfio_pci"] {
		return fmt.Sprintf("vfio-pci is built into this kernel too: add vfio-pci.ids=%s to the kernel command line (gpuprep grub ensure vfio-pci.ids=%s; keep any IDs an existing vfio-pci.ids= lists) and reboot: "+
			"vfio-pci's initcall runs before %s's (drivers/vfio links before drivers/usb, drivers/i2c and sound/) and takes every device with that ID, those of other cards of this model too", id, id, h.Module)
	}
	return fmt.Sprintf("vfio-pci is a module here, and no module loads before a built-in driver binds: no kernel argument or modprobe.d setting can keep it; "+
		"what holds is taking the function from %s after each boot: driverctl set-override %s vfio-pci (driverctl's boot service unbinds it and probes it with driver_override set; driverctl unset-override %s undoes it), "+
		"or a kernel built with %s as a module; until then, gpuprep vfio bind --select %s after each boot",
		h.Driver, h.Dev.Address, h.Dev.Address, h.Module, gpu)
}

// builtinWarnings is what NewPlan warns, with --persist, for the targets a
// built-in driver takes back at the next boot.
func builtinWarnings(root *host.Root, ts []*Target, persist *Persist) []string {
	var devs []*pci.Device
	gpuOf := map[string]string{}
	for _, t := range ts {
		devs = append(devs, t.Dev)
		gpuOf[t.Dev.Address] = t.For
	}
	var out []string
	for _, h := range BuiltinHolds(root, devs) {
		if c := persist.Cmdline; c != nil && h.Module != "nouveau" && idListHas(c.Want, h.Dev.VendorID+":"+h.Dev.DeviceID) {
			// the plan puts its ID on the kernel command line of a
			// built-in vfio-pci, whose initcall runs before the driver's
			continue
		}
		out = append(out, "NOT PERSISTENT ACROSS A REBOOT: "+BuiltinWhy(h)+"; to keep it: "+BuiltinFix(root, h, gpuOf[h.Dev.Address]))
	}
	return slices.Clip(out)
}

// driverctlVFIO reports whether a driverctl override binds addr to a VFIO
// driver at boot (/etc/driverctl.d/pci-ADDR names the driver).
func driverctlVFIO(root *host.Root, addr string) bool {
	b, err := root.ReadFile("/etc/driverctl.d/pci-" + addr)
	return err == nil && pci.DriverIsVFIO(strings.TrimSpace(string(b)))
}
