package preflight

import (
	"fmt"
	"strings"
)

// smmuUnits are the kernel's Arm SMMU units: arm-smmu-v3 registers
// "smmu3.%pa" (drivers/iommu/arm/arm-smmu-v3/arm-smmu-v3.c, the SMMU's base
// address: smmu3.0x0000000011000000), arm-smmu (v1/v2) "smmu.%pa".
func smmuUnits(e *Env) []string {
	var out []string
	for _, u := range e.IOMMU.Units {
		if strings.HasPrefix(u, "smmu3.") || strings.HasPrefix(u, "smmu.") {
			out = append(out, u)
		}
	}
	return out
}

// checkIOMMUFirmwareSMMU is iommu.firmware on arm64: ACPI describes SMMUs
// in its IORT (drivers/acpi/arm64/iort.c probes them from it), a device
// tree in iommus/iommu-map properties, which gpuprep does not read: there
// the SMMUs the kernel registered are the evidence.
func checkIOMMUFirmwareSMMU(e *Env) []Finding {
	fw, units := e.Firmware, smmuUnits(e)
	const iort = "/sys/firmware/acpi/tables/IORT"
	switch {
	case fw.IORT != nil && fw.IORT.HasSMMU():
		var at []string
		for _, a := range fw.IORT.SMMUv3 {
			at = append(at, fmt.Sprintf("%#x", a))
		}
		msg := fmt.Sprintf("firmware describes an IOMMU: ACPI IORT with %d SMMUv3", len(fw.IORT.SMMUv3))
		if len(at) > 0 {
			msg += " (at " + strings.Join(at, ", ") + ")"
		}
		if fw.IORT.SMMUv2 > 0 {
			msg += fmt.Sprintf(" and %d SMMUv1/v2", fw.IORT.SMMUv2)
		}
		return []Finding{{Status: Pass, Subject: iort, Message: msg}}
	case fw.IORT != nil:
		return []Finding{{Status: Fail, Subject: iort,
			Message: fmt.Sprintf("the ACPI IORT describes no SMMU (%d ITS groups, no SMMU node): the firmware gives the kernel no IOMMU", fw.IORT.ITSGroups),
			Remedy:  "enable the SMMU in the UEFI setup (where the firmware offers it) or update the system firmware, and power-cycle the node"}}
	case fw.IORTErr != nil && len(units) > 0:
		return []Finding{{Status: Pass, Subject: iort,
			Message: "firmware describes an IOMMU: the kernel registered " + strings.Join(units, ", ") + " from the ACPI IORT (" + fw.IORTErr.Error() + ")"}}
	case fw.IORTErr != nil:
		return []Finding{{Status: Warn, Subject: iort,
			Message: "ACPI IORT present but not readable (" + fw.IORTErr.Error() + "), and the kernel registered no SMMU: cannot tell whether the firmware describes one",
			Remedy:  "run gpuprep as root (the ACPI tables are readable by root only)"}}
	case fw.ACPI && len(units) > 0:
		return []Finding{{Status: Warn, Subject: "/sys/firmware/acpi/tables",
			Message: "no IORT table, yet the kernel registered " + strings.Join(units, ", ") + "; tables may be hidden from this user",
			Remedy:  "run as root to read /sys/firmware/acpi/tables"}}
	case fw.ACPI:
		return []Finding{{Status: Fail, Subject: "/sys/firmware/acpi/tables",
			Message: "no ACPI IORT table: the firmware describes no SMMU (Arm's IOMMU) to the kernel",
			Remedy:  "enable the SMMU in the UEFI setup (where the firmware offers it) or update the system firmware, and power-cycle the node"}}
	case fw.DeviceTree && len(units) > 0:
		return []Finding{{Status: Pass, Subject: "/sys/firmware/devicetree",
			Message: "device-tree platform: the kernel registered " + strings.Join(units, ", ") + " from the device tree"}}
	case fw.DeviceTree:
		return []Finding{{Status: Warn, Subject: "/sys/firmware/devicetree",
			Message: "device-tree platform (no ACPI) and the kernel registered no SMMU: gpuprep does not read the device tree's iommus/iommu-map properties, so whether the board has an SMMU is unknown (see iommu.kernel)",
			Remedy:  "check the board's device tree for an arm,smmu-v3 node and iommu-map on the PCIe host, and that the kernel has CONFIG_ARM_SMMU_V3"}}
	}
	return []Finding{{Status: Error, Subject: "/sys/firmware",
		Message: "neither ACPI tables nor a device tree in sysfs: cannot tell whether the firmware describes an SMMU",
		Remedy:  "run gpuprep on the node itself, or give --root a root that holds /sys/firmware"}}
}

// msiChips are the IRQ chips /proc/interrupts names (the column after the
// per-CPU counts), split into those of the GICv3 ITS and other MSI chips.
// The ITS's MSI parent ops name their chips with the prefix "ITS-"
// (drivers/irqchip/irq-gic-v3-its-msi-parent.c: "ITS-PCI-MSIX-0009:01:00.0"
// on 6.x; "ITS-MSI" in older kernels, as in real arm64 /proc/interrupts
// listings: "ITS-MSI 524288 Edge nvme0q0").
func msiChips(b []byte) (its, other []string) {
	seen := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") || strings.Trim(strings.TrimSuffix(f[0], ":"), "0123456789") != "" {
			continue
		}
		i := 1
		for i < len(f) && strings.Trim(f[i], "0123456789") == "" {
			i++
		}
		if i == len(f) {
			continue
		}
		chip := f[i]
		if seen[chip] || !strings.Contains(chip, "MSI") {
			continue
		}
		seen[chip] = true
		if strings.HasPrefix(chip, "ITS-") {
			its = append(its, chip)
		} else {
			other = append(other, chip)
		}
	}
	return its, other
}

// checkMSIIsolation is iommu.interrupt-remapping on arm64, where there is
// no interrupt remapping: VFIO type1 (drivers/vfio/vfio_iommu_type1.c,
// vfio_iommu_type1_attach_group) refuses a group, "No interrupt remapping
// support. Use the module param "allow_unsafe_interrupts" …", unless
// iommu_group_has_isolated_msi (drivers/iommu/iommu.c) finds, for every
// device, msi_device_has_isolated_msi (kernel/irq/msi.c): an irq domain on
// the device's MSI path with IRQ_DOMAIN_FLAG_ISOLATED_MSI. On arm64 only the
// GICv3 ITS sets it (its_node_init, drivers/irqchip/irq-gic-v3-its.c: the
// ITS checks each MSI's DeviceID); GICv2m and the GICv3 MBI do not.
func checkMSIIsolation(e *Env) []Finding {
	const subject = "/proc/interrupts"
	b, err := e.Root.ReadFile("/proc/interrupts")
	if err != nil {
		if !e.IOMMU.Active() {
			return []Finding{{Status: Skip, Subject: subject, Message: "no active IOMMU (see iommu.kernel), and /proc/interrupts not readable"}}
		}
		return []Finding{{Status: Error, Subject: subject, Message: "cannot read /proc/interrupts: " + err.Error(), Remedy: "run on the node itself"}}
	}
	its, other := msiChips(b)
	var out []Finding
	switch {
	case !e.IOMMU.Active() && len(its) == 0:
		return []Finding{{Status: Skip, Subject: subject, Message: "no active IOMMU to isolate devices (see iommu.kernel)"}}
	case len(its) > 0 && len(other) == 0:
		out = append(out, Finding{Status: Pass, Subject: subject,
			Message: "MSIs isolated: they go through the GICv3 ITS (IRQ chips " + firstN(its, 3) + "), whose MSI domain is IRQ_DOMAIN_FLAG_ISOLATED_MSI, what VFIO requires on arm64 in place of interrupt remapping"})
	case len(its) > 0:
		out = append(out, Finding{Status: Warn, Subject: subject,
			Message: "some MSIs go through the GICv3 ITS (" + firstN(its, 3) + "), others through " + firstN(other, 3) + ", which does not isolate MSIs: VFIO refuses to assign the devices behind it (\"No interrupt remapping support\")",
			Remedy:  "give VMs only devices whose MSIs go through the ITS"})
	case len(other) > 0:
		out = append(out, Finding{Status: Fail, Subject: subject,
			Message: "MSIs go through " + firstN(other, 3) + ", not a GICv3 ITS: that MSI controller does not isolate MSIs, and VFIO refuses to attach devices (\"No interrupt remapping support\")",
			Remedy:  "VM passthrough needs a platform whose PCIe MSIs go through a GICv3 ITS; vfio_iommu_type1.allow_unsafe_interrupts=1 is an unsafe last resort"})
	default:
		msg := "no MSI IRQ chip in /proc/interrupts (no device uses MSIs yet): cannot tell whether MSIs would go through a GICv3 ITS, which VFIO requires on arm64"
		if line, ok := e.Log().Find("ITS"); ok {
			msg += "; the kernel log has \"" + line + "\""
		}
		out = append(out, Finding{Status: Warn, Subject: subject, Message: msg,
			Remedy: "load a driver that uses MSIs (the GPU's), then run gpuprep check again"})
	}
	if v, err := e.Root.ReadString("/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"); err == nil && (v == "Y" || v == "1") {
		out = append(out, unsafeInterrupts(len(its) == 0))
	}
	return out
}

func firstN(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
}

// smmuNotActive is the remedy for an arm64 kernel without an active SMMU:
// no kernel argument turns one on (iommu.passthrough= only picks the
// default domain type), so what is missing is the firmware's description
// or the arm-smmu-v3 driver.
func smmuNotActive(e *Env) string {
	fw := e.Firmware
	if fw.IORT != nil && !fw.IORT.HasSMMU() || fw.ACPI && fw.IORT == nil && fw.IORTErr == nil {
		return "the firmware describes no SMMU (see iommu.firmware): enable it in the firmware or update the firmware; no kernel argument turns an SMMU on"
	}
	cfg := "/boot/config-" + e.Host.Kernel
	if b, err := e.Root.ReadFile(cfg); err == nil && e.Host.Kernel != "" {
		c := "\n" + string(b) + "\n"
		switch {
		case strings.Contains(c, "\n# CONFIG_ARM_SMMU_V3 is not set\n") || !strings.Contains(c, "\nCONFIG_ARM_SMMU_V3="):
			return "the running kernel is built without CONFIG_ARM_SMMU_V3 (" + cfg + "): boot a kernel built with it"
		case strings.Contains(c, "\nCONFIG_ARM_SMMU_V3=m\n") && !e.Root.Exists("/sys/module/arm_smmu_v3"):
			return "arm_smmu_v3 is a module here and not loaded: load it early (add arm_smmu_v3 to the initramfs modules, then regenerate the initramfs) and reboot"
		}
	}
	return "the kernel log says why arm-smmu-v3 registered no SMMU (journalctl -k -b | grep -i -e IORT -e arm-smmu); no kernel argument turns an SMMU on"
}
