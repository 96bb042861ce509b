package vfio

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/pci"
)

// HostUse says what a device that must stay with the host is, and why.
type HostUse struct {
	Kind string // "SATA controller", "Ethernet controller", "USB controller", …
	Why  string // "holds host storage", …
}

// HostDevice reports whether d is a host device that gpuprep does not give
// to a VM: anything but a GPU or other display controller (class 03), a
// multimedia function (04), a processing accelerator (12) or an NVSwitch,
// unless d is a function of such a card (same slot and vendor: a Turing
// card's USB xHCI and UCSI functions). Storage, network, USB and other bus
// controllers, bridges, ISA/LPC bridges, system peripherals and input
// controllers are host devices: bound to VFIO (and, persisted, at every
// boot) they take the root disk, the management network or the console from
// the host. A chipset's functions that share a slot with an integrated GPU
// of another vendor (an AMD APU's USB controllers, vendor 1022, beside its
// GPU, vendor 1002) stay host devices.
func HostDevice(inv *pci.Inventory, d *pci.Device) (HostUse, bool) {
	if cardClass(d) {
		return HostUse{}, false
	}
	if inv != nil {
		for _, c := range inv.Devices {
			if c != d && c.Slot() == d.Slot() && c.VendorID == d.VendorID && cardClass(c) {
				return HostUse{}, false
			}
		}
	}
	return hostUse(d), true
}

// cardClass: the devices gpuprep passes through by themselves.
func cardClass(d *pci.Device) bool {
	if len(d.Class) < 4 {
		return false
	}
	switch d.Class[:2] {
	case "03", "04", "12":
		return true
	}
	return d.IsNVSwitch()
}

func hostUse(d *pci.Device) HostUse {
	c := d.Class
	if len(c) < 4 {
		return HostUse{"device of unknown class", "is not a GPU, accelerator or multimedia device"}
	}
	if u, ok := hostSubclasses[c[:4]]; ok {
		return u
	}
	if u, ok := hostClasses[c[:2]]; ok {
		return u
	}
	return HostUse{"class " + c[:4] + " device", "is not a GPU, accelerator or multimedia device"}
}

const (
	holdsStorage   = "holds host storage"
	carriesNetwork = "carries host network traffic"
)

// hostSubclasses are the host devices by PCI class and subclass
// ("0108"), hostClasses those of a class whose subclass is not there.
var (
	hostSubclasses = map[string]HostUse{
		"0100": {"SCSI controller", holdsStorage}, "0101": {"IDE controller", holdsStorage},
		"0104": {"RAID controller", holdsStorage}, "0105": {"ATA controller", holdsStorage},
		"0106": {"SATA controller", holdsStorage}, "0107": {"SAS controller", holdsStorage},
		"0108": {"NVMe controller", holdsStorage},
		"0200": {"Ethernet controller", carriesNetwork}, "0207": {"InfiniBand controller", carriesNetwork},
		"0c03": {"USB controller", "drives host USB ports: keyboard, console, virtual media"},
		"0c04": {"Fibre Channel controller", holdsStorage},
		"0c06": {"InfiniBand controller", carriesNetwork},
		"0c05": {"SMBus controller", "serves host sensors and memory"},
		"0c07": {"IPMI interface", "connects the host to its BMC"},
		"0601": {"ISA/LPC bridge", "connects host firmware devices (TPM, Super I/O)"},
		"0600": {"host bridge", "connects the host's CPU to its PCI devices"},
		"0604": {"PCI bridge", "connects the devices behind it to the host"},
		"0609": {"PCI bridge", "connects the devices behind it to the host"},
		"0806": {"IOMMU", "isolates host devices"},
	}
	hostClasses = map[string]HostUse{
		"01": {"mass storage controller", holdsStorage},
		"02": {"network controller", carriesNetwork},
		"0d": {"wireless controller", carriesNetwork},
		"0c": {"serial bus controller", "drives a host bus"},
		"06": {"bridge", "connects host devices"},
		"05": {"memory controller", "serves host memory"},
		"08": {"system peripheral", "is a platform device of the host"},
		"09": {"input device controller", "serves host keyboard and mouse"},
	}
)

// SelectedHostDevices returns the refusals for the host devices among the
// selected ones (as NewPlan would say them), before any IOMMU group exists
// to bring in more: what a plan deferred until after a reboot can tell now.
func SelectedHostDevices(inv *pci.Inventory, selected []*pci.Device) []string {
	var out []string
	for _, d := range selected {
		if u, host := HostDevice(inv, d); host {
			out = append(out, hostDeviceReason(d, u, true, d.Address))
		}
	}
	return out
}

// hostDeviceReason is the refusal for host device d brought into a plan:
// selected itself, or brought in by the IOMMU group of the selected device
// forAddr (or as a function of the same device).
func hostDeviceReason(d *pci.Device, u HostUse, selected bool, forAddr string) string {
	var how, fix string
	switch {
	case selected:
		how, fix = "is selected but", "do not select it"
	case pci.Slot(forAddr) == d.Slot():
		how, fix = "is a function of the same device as "+forAddr+" and", forAddr+" cannot be passed through without it"
	default:
		how, fix = "is in the IOMMU group of "+forAddr+" and", "move "+forAddr+" to a slot with its own IOMMU group (a CPU root port with ACS, or ACS enabled in the BIOS)"
	}
	return fmt.Sprintf("%s (%s %s:%s, %s) %s %s; gpuprep does not give storage, network, USB or other host controllers to VMs: %s (pass --allow-host-devices to gpuprep vfio bind only if the VM is meant to have it)",
		d.Address, u.Kind, d.VendorID, d.DeviceID, driverLabel(d.Driver), how, u.Why, fix)
}

func driverLabel(drv string) string {
	if drv == "" {
		return "no driver"
	}
	return "driver " + drv
}
