// Package iommu reads the IOMMU as firmware and kernel present it: ACPI
// DMAR/IVRS tables, active IOMMU units and groups, interrupt remapping, and
// whether a GPU's IOMMU group can be handed to a VM whole (with the ACS
// evidence that explains why not).
package iommu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Firmware lists the ACPI tables that describe an IOMMU: DMAR (Intel VT-d)
// and IVRS (AMD-Vi). ACPI says whether /sys/firmware/acpi/tables exists.
// On Arm, IORT describes SMMUs and ITS groups both; it is in Tables only
// when it describes an SMMU (IORTErr says when it could not be read, as an
// unprivileged user cannot: the tables are mode 0400).
type Firmware struct {
	Tables []string
	ACPI   bool
	// IORT is the parsed IORT table, nil when there is none or IORTErr.
	IORT    *IORT
	IORTErr error
	// DeviceTree: the firmware handed the kernel a device tree
	// (/sys/firmware/devicetree/base), the usual way on Arm boards without
	// ACPI; SMMUs are then described there (iommus, iommu-map).
	DeviceTree bool
}

// ReadFirmware looks for DMAR and IVRS in /sys/firmware/acpi/tables, and
// for IORT, which it parses.
func ReadFirmware(root *host.Root) Firmware {
	f := Firmware{ACPI: root.Exists("/sys/firmware/acpi/tables"), DeviceTree: root.Exists("/sys/firmware/devicetree/base")}
	for _, t := range []string{"DMAR", "IVRS"} {
		if _, err := root.Lstat("/sys/firmware/acpi/tables/" + t); err == nil {
			f.Tables = append(f.Tables, t)
		}
	}
	if _, err := root.Lstat("/sys/firmware/acpi/tables/IORT"); err == nil {
		b, err := root.ReadFile("/sys/firmware/acpi/tables/IORT")
		var t IORT
		if err == nil {
			t, err = ParseIORT(b)
		}
		switch {
		case err != nil:
			f.IORTErr = fmt.Errorf("/sys/firmware/acpi/tables/IORT: %w", err)
		default:
			f.IORT = &t
			if t.HasSMMU() {
				f.Tables = append(f.Tables, "IORT")
			}
		}
	}
	return f
}

// Kernel is the IOMMU as the running kernel shows it.
type Kernel struct {
	Units  []string // /sys/class/iommu entries: dmarN (Intel), ivhdN (AMD), smmu3.0x… (Arm SMMUv3), smmu.0x… (SMMUv1/v2)
	Groups int      // entries in /sys/kernel/iommu_groups
}

// Active reports whether the kernel has an IOMMU in use.
func (k Kernel) Active() bool { return len(k.Units) > 0 && k.Groups > 0 }

// ReadKernel reads /sys/class/iommu and /sys/kernel/iommu_groups.
func ReadKernel(root *host.Root) Kernel {
	return Kernel{
		Units:  root.Names("/sys/class/iommu"),
		Groups: len(root.Names("/sys/kernel/iommu_groups")),
	}
}

// Remapping is the state of interrupt remapping.
type Remapping struct {
	// Enabled: IRQ chips with remapping are in use (/proc/interrupts shows
	// IR- chips). Known is false when /proc/interrupts could not be read.
	Enabled, Known bool
	Evidence       string
	// Capable lists Intel units whose ecap says they can remap interrupts;
	// Incapable those that cannot (ecap bit 3).
	Capable, Incapable []string
	// Unsafe: vfio_iommu_type1 allow_unsafe_interrupts is set.
	Unsafe bool
}

// ReadRemapping gathers interrupt remapping evidence: IR- IRQ chip names in
// /proc/interrupts (set by both Intel and AMD remapping domains), the Intel
// ecap IR bit, and vfio_iommu_type1's allow_unsafe_interrupts.
func ReadRemapping(root *host.Root, k Kernel) Remapping {
	var r Remapping
	if b, err := root.ReadFile("/proc/interrupts"); err == nil {
		r.Known = true
		seen := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			for _, f := range strings.Fields(l) {
				if strings.HasPrefix(f, "IR-") && !seen[f] {
					seen[f] = true
					r.Enabled = true
					if len(seen) <= 3 {
						if r.Evidence != "" {
							r.Evidence += ", "
						}
						r.Evidence += f
					}
				}
			}
		}
	}
	for _, u := range k.Units {
		s, err := root.ReadString("/sys/class/iommu/" + u + "/intel-iommu/ecap")
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if err != nil {
			continue
		}
		if v&(1<<3) != 0 {
			r.Capable = append(r.Capable, u)
		} else {
			r.Incapable = append(r.Incapable, u)
		}
	}
	if v, err := root.ReadString("/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"); err == nil {
		r.Unsafe = v == "Y" || v == "1"
	}
	return r
}

// GroupType reads /sys/kernel/iommu_groups/N/type (DMA, DMA-FQ, identity).
func GroupType(root *host.Root, group string) string {
	s, _ := root.ReadString(fmt.Sprintf("/sys/kernel/iommu_groups/%s/type", group))
	return s
}
