package preflight

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/iommu"
)

// IOMMUVendor says whose IOMMU the node has: "intel" (VT-d: ACPI DMAR or
// dmarN units) or "amd" (AMD-Vi: IVRS or ivhdN units), from what firmware and
// kernel show, else from the CPU vendor. The platform's IOMMU, not the CPU,
// decides which kernel arguments apply.
func (e *Env) IOMMUVendor() string {
	for _, t := range e.Firmware.Tables {
		switch t {
		case "DMAR":
			return "intel"
		case "IVRS":
			return "amd"
		}
	}
	for _, u := range e.IOMMU.Units {
		switch {
		case strings.HasPrefix(u, "dmar"):
			return "intel"
		case strings.HasPrefix(u, "ivhd"):
			return "amd"
		}
	}
	switch {
	case e.CPU.Intel():
		return "intel"
	case e.CPU.AMD():
		return "amd"
	}
	return ""
}

func biosIOMMU(e *Env) string {
	switch e.IOMMUVendor() {
	case "intel":
		return "Intel VT-d"
	case "amd":
		return "AMD IOMMU (AMD-Vi)"
	}
	return "the IOMMU"
}

func checkIOMMUFirmware(e *Env) []Finding {
	fw := e.Firmware
	switch {
	case len(fw.Tables) > 0:
		return []Finding{{Status: Pass, Subject: "/sys/firmware/acpi/tables/" + fw.Tables[0],
			Message: "firmware describes an IOMMU: ACPI " + strings.Join(fw.Tables, ", ")}}
	case !fw.ACPI:
		return []Finding{{Status: Error, Subject: "/sys/firmware/acpi/tables",
			Message: "no ACPI tables in sysfs: cannot tell whether firmware enables an IOMMU",
			Remedy:  "check the firmware's IOMMU setting by hand (non-ACPI platform?), then --skip iommu.firmware"}}
	case e.IOMMU.Active():
		return []Finding{{Status: Warn, Subject: "/sys/firmware/acpi/tables",
			Message: "no DMAR or IVRS table, yet the kernel has an active IOMMU (" + strings.Join(e.IOMMU.Units, ", ") + "); tables may be hidden from this user",
			Remedy:  "run as root to read /sys/firmware/acpi/tables"}}
	}
	if e.CPU.Flags["hypervisor"] {
		return []Finding{{Status: Fail, Subject: "/sys/firmware/acpi/tables",
			Message: "no DMAR (Intel VT-d) or IVRS (AMD-Vi) ACPI table, and this node is a virtual machine: its hypervisor gives it no virtual IOMMU",
			Remedy:  "prepare the bare-metal host instead, or give this VM a virtual IOMMU on its hypervisor (QEMU: -machine q35 -device intel-iommu,intremap=on) and power it off and on"}}
	}
	return []Finding{{Status: Fail, Subject: "/sys/firmware/acpi/tables",
		Message: "no DMAR (Intel VT-d) or IVRS (AMD-Vi) ACPI table: the IOMMU is disabled in firmware",
		Remedy:  "enable " + biosIOMMU(e) + " in the BIOS/UEFI setup (often under Chipset or North Bridge) and power-cycle the node"}}
}

func checkIOMMUKernel(e *Env) []Finding {
	k := e.IOMMU
	if k.Active() {
		return []Finding{{Status: Pass, Subject: "/sys/class/iommu",
			Message: fmt.Sprintf("IOMMU active: %s; %d IOMMU groups", strings.Join(k.Units, ", "), k.Groups)}}
	}
	msg := "IOMMU not active in the kernel: /sys/class/iommu is empty"
	if len(k.Units) > 0 {
		msg = fmt.Sprintf("IOMMU units %s registered but /sys/kernel/iommu_groups is empty", strings.Join(k.Units, ", "))
	} else if k.Groups > 0 {
		msg = fmt.Sprintf("%d IOMMU groups but /sys/class/iommu is empty", k.Groups)
	}
	f := Finding{Status: Fail, Subject: "/sys/class/iommu", Message: msg}
	if off := disablingArgs(e.Cmdline); len(off) > 0 {
		f.Message += "; the running kernel was booted with " + strings.Join(off, " ")
	}
	if len(e.Firmware.Tables) == 0 && e.Firmware.ACPI {
		f.Remedy = "enable " + biosIOMMU(e) + " in the BIOS/UEFI setup first (see iommu.firmware), then set the kernel arguments and reboot"
		if e.CPU.Flags["hypervisor"] {
			f.Remedy = "give this VM a virtual IOMMU on its hypervisor first (see iommu.firmware), then set the kernel arguments and reboot"
		}
		return []Finding{f}
	}
	if src, err := grub.Configured(e.Root, e.Host.Kernel); err == nil && src != nil && allSatisfied(kargs.Parse(src.Cmdline), WantedArgs(e.IOMMUVendor())) {
		f.Remedy = "the IOMMU arguments are configured in " + src.File + " (see iommu.cmdline): reboot the node"
		return []Finding{f}
	}
	f.Fixable = true
	f.FixCommand = "gpuprep grub ensure --mode " + string(e.vmMode())
	f.Remedy = "set the IOMMU kernel arguments (" + f.FixCommand + ") and reboot"
	return []Finding{f}
}

// noBootloader reports whether the node has no bootloader configuration
// gpuprep knows at all (grub.Configured also finds nothing for kernelstub,
// which only its own tool edits).
func noBootloader(e *Env) bool {
	_, err := grub.Detect(e.Root)
	return errors.Is(err, grub.ErrUnsupported)
}

func allSatisfied(ps, want []kargs.Param) bool {
	for _, w := range want {
		if !kargs.Satisfied(ps, w) {
			return false
		}
	}
	return true
}

// disablingArgs lists arguments in ps that turn the IOMMU off.
func disablingArgs(ps []kargs.Param) []string {
	var out []string
	for _, k := range []string{"intel_iommu", "amd_iommu", "iommu"} {
		if p, ok := kargs.Last(ps, k); ok && kargs.HasOption(p.Value, "off") {
			out = append(out, p.String())
		}
	}
	return out
}

// WantedArgs are the kernel arguments gpuprep sets for VM modes: with an
// Intel IOMMU intel_iommu=on iommu=pt, with an AMD one iommu=pt (amd_iommu=on
// is not a valid value; the AMD IOMMU is on whenever firmware enables it).
func WantedArgs(iommuVendor string) []kargs.Param {
	pt := kargs.Param{Key: "iommu", Value: "pt", HasValue: true}
	if iommuVendor == "amd" {
		return []kargs.Param{pt}
	}
	return []kargs.Param{{Key: "intel_iommu", Value: "on", HasValue: true}, pt}
}

// intelDefaultOn reports whether the running kernel turns the Intel IOMMU on
// without intel_iommu=on (CONFIG_INTEL_IOMMU_DEFAULT_ON, or Debian's
// ..._DEFAULT_ON_INTGPU_OFF).
func intelDefaultOn(e *Env) (bool, string) {
	b, err := e.Root.ReadFile("/boot/config-" + e.Host.Kernel)
	if err != nil {
		return false, ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "CONFIG_INTEL_IOMMU_DEFAULT_ON=y" || l == "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y" {
			return true, l
		}
	}
	return false, ""
}

func checkIOMMUCmdline(e *Env) []Finding {
	if e.CmdlineErr != nil {
		return []Finding{{Status: Error, Subject: "/proc/cmdline", Message: "cannot read /proc/cmdline: " + e.CmdlineErr.Error()}}
	}
	src, srcErr := grub.Configured(e.Root, e.Host.Kernel)
	var out []Finding
	if srcErr != nil {
		out = append(out, Finding{Status: Error, Subject: firstWord(srcErr.Error()),
			Message: "cannot evaluate the configured kernel arguments: " + srcErr.Error(),
			Remedy:  "simplify that line to a plain quoted assignment"})
	}
	var configured []kargs.Param
	if src != nil {
		configured = kargs.Parse(src.Cmdline)
	}
	fix := "gpuprep grub ensure --mode " + string(e.vmMode())
	active := e.IOMMU.Active()
	for _, want := range WantedArgs(e.IOMMUVendor()) {
		f := Finding{Subject: want.String()}
		running := kargs.Satisfied(e.Cmdline, want)
		conf := src != nil && kargs.Satisfied(configured, want)
		required := false
		why := "recommended: host devices get identity mappings (faster DMA); devices given to VMs are still translated"
		if kargs.Norm(want.Key) == "intel_iommu" {
			on, cfg := intelDefaultOn(e)
			switch {
			case active:
				why = "the IOMMU is already active"
				if on {
					why += " (" + cfg + ")"
				}
			case on:
				why = "the kernel enables the Intel IOMMU by default (" + cfg + ") yet it is not active"
				required = true
			default:
				why = "needed to turn the Intel IOMMU on"
				required = true
			}
		}
		bad := Warn
		if required {
			bad = Fail
		}
		switch {
		case running && (conf || src == nil):
			f.Status = Pass
			f.Message = "in effect (/proc/cmdline)"
			if src != nil {
				f.Message += " and configured in " + src.File
			} else {
				f.Message += "; no bootloader configuration found to confirm it persists"
			}
		case running:
			f.Status = Warn
			f.Message = "in effect now but not configured in " + src.File + ": the next boot loses it"
			f.Fixable, f.FixCommand = true, fix
			f.Remedy = "persist it: " + fix
		case conf:
			f.Status = bad
			if pending, detail := rebootPending(e, src); pending {
				f.Message = "configured in " + src.File + ", reboot pending: not yet in /proc/cmdline" + detail
				f.Remedy = "reboot the node"
			} else {
				f.Message = "configured in " + src.File + " but not effective after the last boot" + detail
				f.Remedy = "check that no later /etc/default/grub.d file or BLS entry overrides it, that the bootloader config was regenerated (update-grub / grub2-mkconfig), and that this kernel knows the argument"
			}
		default:
			f.Status = bad
			f.Message = "missing from /proc/cmdline"
			switch {
			case src != nil:
				f.Message += " and from " + src.File
				f.Fixable, f.FixCommand = true, fix
				f.Remedy = fix + ", then reboot"
			case srcErr == nil && noBootloader(e):
				// No bootloader configuration: booted over the network or
				// straight by a hypervisor; grub ensure has nothing to edit.
				f.Message += "; no bootloader configuration on this node"
				f.Remedy = "add " + want.String() + " where this node's kernel command line is made (the PXE/iPXE boot configuration, the hypervisor's definition of this VM, a unified kernel image), then reboot"
			default:
				f.Fixable, f.FixCommand = srcErr == nil, fix // kernelstub and the like: grub ensure edits them
				f.Remedy = fix + ", then reboot"
			}
		}
		f.Message += " — " + why
		if !running && !conf && !required && kargs.Norm(want.Key) == "intel_iommu" {
			// Not set anywhere, and not needed: the IOMMU is active without it.
			f.Status = Pass
			f.Remedy, f.Fixable, f.FixCommand = "", false, ""
		}
		out = append(out, f)
	}
	for _, p := range disablingArgs(e.Cmdline) {
		key := kargs.ParseOne(p).Key
		out = append(out, Finding{Status: Fail, Subject: p, Message: p + " in /proc/cmdline turns the IOMMU off",
			Fixable: true, FixCommand: "gpuprep grub remove " + key, Remedy: "gpuprep grub remove " + key + ", then reboot"})
	}
	if p, ok := kargs.Last(append(append([]kargs.Param{}, e.Cmdline...), configured...), "amd_iommu"); ok && kargs.HasOption(p.Value, "on") {
		out = append(out, Finding{Status: Warn, Subject: "amd_iommu=on",
			Message: "amd_iommu=on is not a valid value (the kernel logs \"AMD-Vi: Unknown option - 'on'\"); the AMD IOMMU is on whenever firmware enables it",
			Remedy:  "gpuprep grub remove amd_iommu", Fixable: true, FixCommand: "gpuprep grub remove amd_iommu"})
	}
	return out
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, ": "); i > 0 {
		return s[:i]
	}
	return s
}

// rebootPending tells "configured, reboot pending" (the configuration changed
// after this boot) from "configured but not effective" (a boot already used
// it). It also notices a generated grub.cfg that lacks the change.
func rebootPending(e *Env, src *grub.Source) (bool, string) {
	file := strings.Fields(src.File)[0]
	if src.Kind == "grub" {
		for _, cfg := range []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"} {
			if fi, err := e.Root.Stat(cfg); err == nil {
				if dfi, err := e.Root.Stat(file); err == nil && dfi.ModTime().After(fi.ModTime()) {
					return true, fmt.Sprintf("; %s is older than %s: regenerate it (update-grub) before rebooting", cfg, file)
				}
				break
			}
		}
	}
	fi, err := e.Root.Stat(file)
	if err != nil || e.BootTime.IsZero() {
		return true, ""
	}
	return fi.ModTime().After(e.BootTime), ""
}

func checkInterruptRemapping(e *Env) []Finding {
	// Interrupt remapping can be on while DMA remapping is off (intel_iommu=off
	// leaves DMAR-IR enabled), so the evidence is read either way.
	r := iommu.ReadRemapping(e.Root, e.IOMMU)
	switch {
	case !e.IOMMU.Active() && !r.Enabled:
		return []Finding{{Status: Skip, Subject: "/proc/interrupts", Message: "no remapped IRQ chips, and no active IOMMU to remap them (see iommu.kernel)"}}
	case !r.Known:
		return []Finding{{Status: Error, Subject: "/proc/interrupts", Message: "cannot read /proc/interrupts", Remedy: "run on the node itself"}}
	case r.Enabled:
		out := []Finding{{Status: Pass, Subject: "/proc/interrupts", Message: "interrupt remapping in use: IRQ chips " + r.Evidence}}
		if r.Unsafe {
			out = append(out, unsafeInterrupts(false))
		}
		return out
	}
	msg := "no remapped IRQ chips (IR-…) in /proc/interrupts: interrupt remapping is off, and VFIO refuses to attach devices (\"No interrupt remapping support\")"
	if len(r.Incapable) > 0 {
		msg += "; " + strings.Join(r.Incapable, ", ") + " cannot remap interrupts (ecap bit 3 clear)"
	}
	for _, k := range []string{"intremap", "nointremap"} {
		if p, ok := kargs.Last(e.Cmdline, k); ok && (k == "nointremap" || kargs.HasOption(p.Value, "off")) {
			msg += "; booted with " + p.String()
		}
	}
	if r.Unsafe {
		return []Finding{unsafeInterrupts(true)}
	}
	return []Finding{{Status: Fail, Subject: "/proc/interrupts", Message: msg,
		Remedy: "enable interrupt remapping in the BIOS (VT-d / x2APIC or IOMMU settings) and remove intremap=off / nointremap; vfio_iommu_type1.allow_unsafe_interrupts=1 is an unsafe last resort"}}
}

func unsafeInterrupts(needed bool) Finding {
	msg := "vfio_iommu_type1 allow_unsafe_interrupts=Y: VFIO attaches devices without interrupt remapping, so a guest can forge interrupts"
	if !needed {
		msg += " (not needed here: remapping works)"
	}
	return Finding{Status: Warn, Subject: "/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts", Message: msg,
		Remedy: "enable interrupt remapping in firmware and drop allow_unsafe_interrupts"}
}

func checkIOMMUGroups(e *Env) []Finding {
	var out []Finding
	sel := e.Selected()
	for _, g := range e.GPUs {
		v := iommu.Viability(e.Inv, g, sel)
		f := Finding{Subject: g.Address}
		switch {
		case v.Group == "":
			f.Status = Fail
			f.Message = "no IOMMU group: the IOMMU is not active (see iommu.kernel)"
			f.Remedy = "enable the IOMMU, then check again"
		case !v.Viable:
			f.Status = Fail
			var fs []string
			for _, d := range v.Foreign {
				fs = append(fs, d.Address+" ("+classLabel(d.Class)+" "+d.VendorID+":"+d.DeviceID+", "+driverOr(d.Driver)+")")
			}
			f.Message = fmt.Sprintf("IOMMU group %s also holds %s: passing the GPU through would take them too; why: %s",
				v.Group, strings.Join(fs, ", "), strings.Join(iommu.Isolation(e.Root, e.Inv, g), "; "))
			f.Remedy = "move the GPU to a slot on a CPU root port with ACS, enable ACS (or \"PCIe ACS\" / \"ACS enable\") in the BIOS, or --select the other devices too so they go to the same VM; the pcie_acs_override kernel patch trades away isolation"
		case len(v.Shared) > 0:
			f.Status = Warn
			var sh []string
			for _, d := range v.Shared {
				sh = append(sh, d.Address)
			}
			f.Message = fmt.Sprintf("IOMMU group %s is shared with selected device(s) %s: they must be assigned to the same VM", v.Group, strings.Join(sh, ", "))
		default:
			f.Status = Pass
			f.Message = fmt.Sprintf("IOMMU group %s: %s", v.Group, members(v))
		}
		out = append(out, f)
	}
	if len(e.GPUs) == 0 {
		out = append(out, Finding{Status: Skip, Subject: "/sys/kernel/iommu_groups", Message: "no GPU selected"})
	}
	return out
}

func members(v iommu.Verdict) string {
	var parts []string
	for _, m := range v.Members {
		switch m.Role {
		case iommu.RoleGPU:
			parts = append(parts, "the GPU")
		default:
			parts = append(parts, m.Dev.Address+" ("+string(m.Role)+", "+classLabel(m.Dev.Class)+")")
		}
	}
	return strings.Join(parts, " + ")
}

func driverOr(d string) string {
	if d == "" {
		return "no driver (unbound)"
	}
	return "driver " + d
}

// classLabel names common PCI classes.
func classLabel(class string) string {
	switch class[:4] {
	case "0300":
		return "VGA"
	case "0302":
		return "3D controller"
	case "0403":
		return "audio"
	case "0c03":
		return "USB"
	case "0c80":
		return "serial bus (UCSI)"
	case "0106":
		return "SATA"
	case "0200":
		return "Ethernet"
	case "0604":
		return "PCI bridge"
	case "0680":
		return "bridge (NVSwitch)"
	}
	return "class " + class
}
