package preflight

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/pci"
)

// A GPU that has fallen off the bus stays in sysfs with the IDs the kernel
// read when it enumerated it (vendor, device and class are cached in struct
// pci_dev), while every config space read now completes with all ones: the
// device no longer answers on its PCIe link. lspci then shows it as
// "ff" everywhere ("Unknown header type 7f"), and NVIDIA's driver reports
// Xid 79, ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS ("GPU has fallen off
// the bus", open-gpu-kernel-modules src/common/sdk/nvidia/inc/nverror.h),
// in the kernel log as
//
//	NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//	NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.
//
// (the Xid line names domain:bus:device; the second the function too).
// Nothing on the node brings it back but a reset of the slot, which for a
// GPU lost this way means a reboot or power cycle.
const fallenOffLog = "GPU has fallen off the bus"

// gpuLost says how the GPU d is known to have fallen off the bus ("" when
// nothing says so), and whether that is its state now (config space reads
// all ones) rather than only the kernel log's account of this boot.
func gpuLost(e *Env, d *pci.Device) (evidence string, now bool) {
	cfg := "/sys/bus/pci/devices/" + d.Address + "/config"
	if b, err := e.Root.ReadFile(cfg); err == nil && len(b) >= 4 && b[0] == 0xff && b[1] == 0xff && b[2] == 0xff && b[3] == 0xff {
		return "its config space reads all ones (vendor ffff, device ffff in " + cfg + ", where sysfs still has " + d.VendorID + ":" + d.DeviceID + ")", true
	}
	if d.VendorID == "ffff" {
		return "its vendor reads ffff (/sys/bus/pci/devices/" + d.Address + "/vendor)", true
	}
	if line, ok := lostLine(e, d); ok {
		return "the kernel log says so: " + line, false
	}
	return "", false
}

// lostLine is the kernel log's "fallen off the bus" line about d.
func lostLine(e *Env, d *pci.Device) (string, bool) {
	for _, l := range e.Log().Lines {
		if !strings.Contains(l, fallenOffLog) {
			continue
		}
		if strings.Contains(l, "PCI:"+d.Slot()+")") || strings.Contains(l, "GPU "+d.Address+":") {
			return l, true
		}
	}
	return "", false
}

// lostRemedy is what a user does about a GPU that fell off the bus.
const lostRemedy = "drain the node and power-cycle it (a warm reboot may not bring the GPU back); if it falls off again, reseat it and check its power cables, cooling and PCIe riser, look in the BMC's event log, update the system firmware and the GPU's VBIOS, and run NVIDIA's field diagnostics before an RMA"
