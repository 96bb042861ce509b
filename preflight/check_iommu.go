package preflight

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/iommu"
	"github.com/gpuprep/gpuprep/vfio"
)

// IOMMUVendor says whose IOMMU the node has: "intel" (VT-d: ACPI DMAR or
// dmarN units), "amd" (AMD-Vi: IVRS or ivhdN units) or "arm" (an Arm SMMU:
// an arm64 kernel, whose IOMMU is an SMMU described by IORT or a device
// tree), from the architecture, then what firmware and kernel show, else
// from the CPU vendor. The platform's IOMMU, not the CPU, decides which
// kernel arguments apply.
func (e *Env) IOMMUVendor() string {
	if e.ARM64() {
		return "arm"
	}
	for _, t := range e.Firmware.Tables {
		switch t {
		case "DMAR":
			return "intel"
		case "IVRS":
			return "amd"
		case "IORT":
			return "arm"
		}
	}
	for _, u := range e.IOMMU.Units {
		switch {
		case strings.HasPrefix(u, "dmar"):
			return "intel"
		case strings.HasPrefix(u, "ivhd"):
			return "amd"
		case strings.HasPrefix(u, "smmu"):
			return "arm"
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
	case "arm":
		return "the SMMU"
	}
	return "the IOMMU"
}

func checkIOMMUFirmware(e *Env) []Finding {
	if e.IOMMUVendor() == "arm" {
		return checkIOMMUFirmwareSMMU(e)
	}
	fw := e.Firmware
	switch {
	case len(fw.Tables) > 0:
		return []Finding{{Status: Pass, Subject: "/sys/firmware/acpi/tables/" + fw.Tables[0],
			Message: "firmware describes an IOMMU: ACPI " + strings.Join(fw.Tables, ", ")}}
	case !fw.ACPI:
		return []Finding{{Status: Error, Subject: "/sys/firmware/acpi/tables",
			Message: "no ACPI tables in sysfs: cannot tell whether firmware enables an IOMMU",
			Remedy:  "check the firmware's IOMMU setting by hand (non-ACPI platform?), then --ignore iommu.firmware"}}
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
	if len(k.Units) == 0 && k.Groups == 0 && uncaptured(e, "/sys/class/iommu") {
		return []Finding{{Status: Error, Subject: "/sys/class/iommu",
			Message: "the root has no /sys/class/iommu (nor IOMMU groups): cannot tell whether the kernel has an active IOMMU",
			Remedy:  "run gpuprep on the node itself, or give --root a root that holds /sys/class/iommu and /sys/kernel/iommu_groups"}}
	}
	msg := "IOMMU not active in the kernel: /sys/class/iommu is empty"
	if len(k.Units) > 0 {
		msg = fmt.Sprintf("IOMMU units %s registered but /sys/kernel/iommu_groups is empty", strings.Join(k.Units, ", "))
	} else if k.Groups > 0 {
		msg = fmt.Sprintf("%d IOMMU groups but /sys/class/iommu is empty", k.Groups)
	}
	f := Finding{Status: Fail, Subject: "/sys/class/iommu", Message: msg}
	vendor := e.IOMMUVendor()
	if vendor == "arm" {
		// no kernel argument turns an SMMU on: arm-smmu-v3 probes every
		// SMMU the firmware describes
		f.Remedy = smmuNotActive(e)
		return []Finding{f}
	}
	off := offArgs(e.Cmdline, vendor)
	if len(off) > 0 {
		f.Message += "; the running kernel was booted with " + argList(off)
	}
	if len(e.Firmware.Tables) == 0 && e.Firmware.ACPI && e.Firmware.IORTErr == nil {
		f.Remedy = "enable " + biosIOMMU(e) + " in the BIOS/UEFI setup first (see iommu.firmware), then set the kernel arguments and reboot"
		if e.CPU.Flags["hypervisor"] {
			f.Remedy = "give this VM a virtual IOMMU on its hypervisor first (see iommu.firmware), then set the kernel arguments and reboot"
		}
		return []Finding{f}
	}
	want := WantedArgs(vendor)
	src, srcErr := e.Configured()
	var configured []kargs.Param
	if src != nil {
		configured = src.Args()
	}
	why := onByDefault(e, vendor)
	var def intelDefault // the running kernel's Intel IOMMU default, read as iommu.cmdline reads it
	if vendor == "intel" {
		def = intelIOMMUDefault(e, e.Host.Kernel)
	}
	switch {
	case def.State == "absent":
		// no argument starts a driver the kernel does not have
		f.Message += "; the running kernel is built without CONFIG_INTEL_IOMMU (" + def.From + ")"
		f.Remedy = kernelWithoutIOMMU(e, vendor)
	case allSatisfied(e.Cmdline, want) && len(off) == 0:
		// The kernel got the arguments and still has no IOMMU: another
		// reboot changes nothing.
		f.Message += "; the running kernel already has " + argList(want)
		f.Remedy = kernelWithoutIOMMU(e, vendor)
	case why != "" && len(off) == 0:
		// nothing turned it off, and no argument turns it on: a reboot
		// with the arguments changes nothing either
		f.Message += "; nothing on the running kernel's command line turns it off: " + why
		f.Remedy = kernelWithoutIOMMU(e, vendor)
	case srcErr != nil:
		f.Remedy = unreadOf(srcErr).fix + " (see iommu.cmdline), then set the IOMMU kernel arguments and reboot"
	case src != nil && allSatisfied(configured, want) && len(offArgs(configured, vendor)) == 0:
		if pending, _, regen := rebootPending(e, src, grub.Request{Ensure: want}); !pending {
			f.Remedy = "the IOMMU arguments are configured in " + src.File + " but the last boot did not use them (see iommu.cmdline for why): another reboot alone will not help"
		} else if regen != "" {
			f.Remedy = "the IOMMU arguments are configured in " + src.File + " (see iommu.cmdline) but the boot menu does not have them yet: regenerate it (" + regen + "), then reboot the node"
		} else {
			f.Remedy = "the IOMMU arguments are configured in " + src.File + " (see iommu.cmdline): reboot the node"
		}
	default:
		if def.State == "unknown" {
			// intel_iommu=on may change nothing here: say what was not read
			f.Message += "; " + def.Says()
		}
		f.Fixable = true
		f.FixCommand = "gpuprep grub ensure --mode " + string(e.vmMode())
		f.Remedy = "set the IOMMU kernel arguments (" + f.FixCommand + ") and reboot"
		if len(offArgs(configured, vendor)) > 0 {
			f.Remedy = "set the IOMMU kernel arguments and take out those that turn it off (" + f.FixCommand + ", see iommu.cmdline) and reboot"
		}
	}
	return []Finding{f}
}

// kernelWithoutIOMMU says why a kernel booted with the IOMMU arguments, on
// firmware that describes an IOMMU, has none: a kernel built without the
// driver, else what only its log tells.
func kernelWithoutIOMMU(e *Env, vendor string) string {
	opt, grep := "CONFIG_INTEL_IOMMU", "-e DMAR -e IOMMU -e AMD-Vi"
	switch vendor {
	case "amd":
		opt = "CONFIG_AMD_IOMMU"
	case "arm":
		opt, grep = "CONFIG_ARM_SMMU_V3", "-e IORT -e arm-smmu -e iommu"
	}
	if c, err := readKernelConfig(e, e.Host.Kernel); err == nil {
		if v, _ := c.value(opt); v != "y" {
			return "the running kernel is built without " + opt + " (" + c.from + "): boot a kernel built with it; rebooting this one will not help"
		}
	}
	return "rebooting will not help: the kernel log says why it did not start the IOMMU (journalctl -k -b | grep -i " + grep + "): " +
		biosIOMMU(e) + " disabled or broken in the firmware (check the BIOS/UEFI setting; update the firmware), or a kernel built without " + opt
}

// unread is what of the next boot's configuration could not be read: says
// it for a message, fix is the remedy's first step ("" when all was read).
type unread struct{ says, fix string }

// unreadOf is unread for err, the error reading the configuration: a file
// and line gpuprep will not guess about, or a boot setup whose
// configuration it cannot tell (grub.ErrUnknownBoot and the like).
func unreadOf(err error) unread {
	if errors.As(err, new(*grub.ParseError)) {
		at := parseErrAt(err)
		return unread{at + " cannot be parsed", "fix " + at + " first"}
	}
	return unread{"which configuration the next boot reads is unknown (see the iommu.cmdline error)", "find out which configuration the node boots first (the iommu.cmdline error says what was missing)"}
}

// parseErrAt names the file and line of a configuration gpuprep cannot
// parse ("/etc/default/grub:3"), else the error.
func parseErrAt(err error) string {
	var pe *grub.ParseError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s:%d (%s)", pe.File, pe.Line, pe.Msg)
	}
	return err.Error()
}

func argList(ps []kargs.Param) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, " ")
}

// noBootloader reports whether the node has no bootloader configuration
// gpuprep knows at all (grub.Configured also finds nothing for kernelstub,
// which only its own tool edits).
func noBootloader(e *Env) bool {
	_, err := e.Boot()
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

// disablingArgs lists the arguments in ps that leave an IOMMU off
// (kargs.Disabling), one per key, whichever IOMMU they act on.
func disablingArgs(ps []kargs.Param) []kargs.Param {
	var out []kargs.Param
	for _, k := range []string{"intel_iommu", "amd_iommu", "iommu"} {
		if p, ok := kargs.Disabling(ps, k); ok {
			out = append(out, p)
		}
	}
	return out
}

// disablerApplies: intel_iommu= acts on an Intel IOMMU only (dmar_disabled),
// amd_iommu= on an AMD one only; iommu=off (no_iommu) on both. None of them
// exists on arm64: iommu= is x86's early_param (arch/x86/kernel/pci-dma.c),
// and an arm64 kernel passes all three to init as unknown parameters.
func disablerApplies(key, vendor string) bool {
	if vendor == "arm" {
		return false
	}
	switch kargs.Norm(key) {
	case "intel_iommu":
		return vendor != "amd"
	case "amd_iommu":
		return vendor != "intel"
	}
	return true
}

// offArgs are the disabling arguments in ps that act on this node's IOMMU.
func offArgs(ps []kargs.Param, vendor string) []kargs.Param {
	var out []kargs.Param
	for _, p := range disablingArgs(ps) {
		if disablerApplies(p.Key, vendor) {
			out = append(out, p)
		}
	}
	return out
}

// offFix is the command that takes the disabling arguments out of the
// configuration: grub ensure --mode replaces every intel_iommu= with
// intel_iommu=on and removes exactly the arguments that turn the IOMMU off
// (iommu=off goes, iommu=pt stays; amd_iommu=off goes).
func offFix(e *Env) string {
	return "gpuprep grub ensure --mode " + string(e.vmMode())
}

// WantedArgs are the kernel arguments gpuprep sets for VM modes: with an
// Intel IOMMU intel_iommu=on iommu=pt, with an AMD one iommu=pt (amd_iommu=on
// is not a valid value; the AMD IOMMU is on whenever firmware enables it),
// with an Arm SMMU iommu.passthrough=1: the SMMU is on whenever firmware
// describes it, and iommu=pt is x86's spelling only (the generic
// iommu.passthrough= of drivers/iommu/iommu.c is "[ARM64, X86]" in
// kernel-parameters.txt; a real Grace host boots with it: "iommu: Default
// domain type: Passthrough (set via kernel command line)").
func WantedArgs(iommuVendor string) []kargs.Param {
	pt := kargs.Param{Key: "iommu", Value: "pt", HasValue: true}
	switch iommuVendor {
	case "amd":
		return []kargs.Param{pt}
	case "arm":
		return []kargs.Param{{Key: "iommu.passthrough", Value: "1", HasValue: true}}
	}
	return []kargs.Param{{Key: "intel_iommu", Value: "on", HasValue: true}, pt}
}

// KernelArgs is the kernel arguments gpuprep sets for the VM modes on one
// node, judged as iommu.cmdline judges them, so that check, grub show, grub
// ensure --mode and plan agree on what a node needs.
type KernelArgs struct {
	Vendor string        // the node's IOMMU: "intel", "amd" or "" (unknown)
	Wanted []kargs.Param // WantedArgs(Vendor)
	Needed []kargs.Param // the wanted arguments this node needs
	// NotNeeded says, for each wanted argument left out of Needed (by its
	// String()), why: intel_iommu=on where the IOMMU is active without it.
	NotNeeded map[string]string
	// NotOff is what the VM modes need not switched off by the kernel
	// command line (grub.Request.NotOff): this node's IOMMU (intel_iommu=
	// on an Intel one, amd_iommu= on an AMD one, iommu= on both) and
	// interrupt remapping (intremap=, nointremap).
	NotOff []string
}

// Request is the edit that gives the next boot what the node needs: the
// needed arguments in, the arguments that turn the IOMMU or interrupt
// remapping off out.
func (k KernelArgs) Request() grub.Request {
	return grub.Request{Ensure: k.Needed, NotOff: k.NotOff}
}

// KernelArgs is what the VM modes want on the kernel command line of this
// node, and which of it the node needs.
func (e *Env) KernelArgs() KernelArgs {
	k := KernelArgs{Vendor: e.IOMMUVendor(), NotNeeded: map[string]string{}}
	k.Wanted = WantedArgs(k.Vendor)
	for _, key := range []string{"intel_iommu", "amd_iommu", "iommu"} {
		if disablerApplies(key, k.Vendor) {
			k.NotOff = append(k.NotOff, key)
		}
	}
	if k.Vendor != "arm" {
		// intremap= and nointremap are x86's (drivers/iommu/irq_remapping.c,
		// built with IRQ_REMAP, an x86 option)
		k.NotOff = append(k.NotOff, "intremap")
	}
	for _, w := range k.Wanted {
		if why := e.notNeeded(w); why != "" {
			k.NotNeeded[w.String()] = why
			continue
		}
		k.Needed = append(k.Needed, w)
	}
	return k
}

// notNeeded says why want is not needed on this node ("" when it is).
// intel_iommu=on does one thing, turn the Intel IOMMU on (intel_iommu_setup
// sets dmar_disabled = 0, nothing else), for the kernel the next boot
// starts: it is not needed where that kernel is built to enable the IOMMU
// by default (CONFIG_INTEL_IOMMU_DEFAULT_ON, as Ubuntu's and Proxmox VE's
// from 6.8: intelDefault), nor where that kernel is the running one and
// the IOMMU is active without it; no reboot is for it then. On a default-on
// kernel whose IOMMU is inactive, what keeps it off is an argument that
// turns it off (its own finding, and grub ensure takes it out) or something
// iommu.kernel tells; intel_iommu=on changes neither.
func (e *Env) notNeeded(want kargs.Param) string {
	if kargs.Norm(want.Key) != "intel_iommu" || kargs.Satisfied(e.Cmdline, want) {
		return ""
	}
	d, next, other := nextIntelDefault(e)
	switch {
	case other && d.State == "on":
		return "the next boot's kernel " + next + " enables the Intel IOMMU by default (" + d.Says() + "), so it changes nothing"
	case other:
		return ""
	case e.IOMMU.Active():
		why := "the IOMMU is active without it"
		if d.State == "on" {
			why += " (the kernel's default: " + d.Line + ")"
		}
		return why
	case d.State == "on":
		why := "the kernel enables the Intel IOMMU by default (" + d.Says() + "), so it changes nothing"
		if off := offArgs(e.Cmdline, "intel"); len(off) > 0 {
			return why + "; " + argList(off) + " on the running kernel's command line keeps the IOMMU off (see " + argList(off) + ")"
		}
		return why + "; the IOMMU is inactive for another reason (see iommu.kernel)"
	}
	return ""
}

// ErrUnknownIOMMU: neither firmware, kernel nor CPU tells whose IOMMU the
// node has, so which arguments it wants is unknown.
var ErrUnknownIOMMU = errors.New("cannot tell whether this node has an Intel, an AMD or an Arm IOMMU (no ACPI DMAR/IVRS/IORT table, IOMMU unit, known CPU vendor or architecture)")

// NodeKernelArgs is KernelArgs for the node under root, for the commands
// that edit the kernel command line (grub, plan): from the whole Env where
// it can be read, else from the IOMMU evidence and /proc/cmdline alone.
func NodeKernelArgs(root *host.Root) (KernelArgs, error) {
	sel, _ := pci.ParseSelector(nil)
	e, err := NewEnv(root, host.NoRunner{}, sel, VMPassthrough)
	if err != nil {
		e = &Env{Root: root, Firmware: iommu.ReadFirmware(root), IOMMU: iommu.ReadKernel(root), CPU: readCPU(root)}
		e.Arch = readArch(root, e.CPU)
		e.Host.Kernel, _ = kernelrelease.Running(root)
		e.CmdlineRaw, e.CmdlineErr = kargs.ReadString(root, "/proc/cmdline")
		e.Cmdline = kargs.Parse(e.CmdlineRaw)
	}
	k := e.KernelArgs()
	if k.Vendor == "" {
		return k, ErrUnknownIOMMU
	}
	return k, nil
}

func checkIOMMUCmdline(e *Env) []Finding {
	if e.CmdlineErr != nil {
		return []Finding{{Status: Error, Subject: "/proc/cmdline", Message: "cannot read /proc/cmdline: " + e.CmdlineErr.Error()}}
	}
	src, srcErr := e.Configured()
	var out []Finding
	var unparsed unread // what of the next boot's configuration could not be read
	if srcErr != nil {
		unparsed = unreadOf(srcErr)
		out = append(out, Finding{Status: Error, Subject: firstWord(srcErr.Error()),
			Message: "cannot evaluate the configured kernel arguments: " + srcErr.Error(),
			Remedy:  "simplify that line to a plain quoted assignment"})
		if !errors.As(srcErr, new(*grub.ParseError)) {
			out[len(out)-1].Remedy = "find out which configuration the node boots (the error says what was missing), then run gpuprep check again"
		}
	}
	var configured []kargs.Param
	if src != nil {
		configured = src.Args()
	}
	fix := "gpuprep grub ensure --mode " + string(e.vmMode())
	active := e.IOMMU.Active()
	vendor := e.IOMMUVendor()
	for _, want := range WantedArgs(vendor) {
		f := Finding{Subject: want.String()}
		running := kargs.Satisfied(e.Cmdline, want)
		conf := src != nil && kargs.Satisfied(configured, want)
		required := false
		why := "recommended: host devices get identity mappings (faster DMA); devices given to VMs are still translated"
		intel := kargs.Norm(want.Key) == "intel_iommu"
		if intel {
			// one reading of the kernel's default with notNeeded and
			// iommu.kernel (intelDefault): for the kernel the next boot
			// starts, which is the one the argument is for
			d, next, other := nextIntelDefault(e)
			kernel := "the kernel"
			if other {
				kernel = "the next boot's kernel " + next
			}
			switch {
			case active && !other:
				why = "the IOMMU is already active"
				if d.State == "on" {
					why += " (" + d.Line + ")"
				}
			case d.State == "unknown":
				// not read, so not known to be needed: say what was missing
				why = d.Says() + "; where it does not, intel_iommu=on is what turns the IOMMU on"
			case d.State == "absent":
				why = "needed, and not enough: " + kernel + " is built without CONFIG_INTEL_IOMMU (" + d.From + "), so no argument turns the Intel IOMMU on: boot a kernel built with it"
				required = true
			case other:
				why = "needed: " + kernel + " does not turn the Intel IOMMU on by default (" + d.Says() + ")"
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
			if eq := kargs.AsEquivalent(e.Cmdline, want); eq != "" {
				f.Message = "in effect (/proc/cmdline, " + eq[2:len(eq)-1] + ")"
			}
			switch {
			case src != nil:
				f.Message += " and configured in " + src.File + kargs.AsEquivalent(configured, want)
			case srcErr != nil:
				f.Message += "; whether it persists is unknown: " + unparsed.says
			default:
				f.Message += "; no bootloader configuration found to confirm it persists"
			}
			if lack := laterLack(e, src, want); len(lack) > 0 {
				// the boot entries have it; the kernels installed later may not
				f.Status = Warn
				f.Message += "; " + grub.LaterLackSays(lack) + ": kernels installed later would go without it"
				f.Fixable, f.FixCommand = true, fix
				f.Remedy = "keep it for kernels installed later: " + fix + " (no reboot)"
			}
			if b, err := e.Boot(); err == nil && src != nil {
				if menu, lacks := b.BootMenuLacks(e.Root, grub.Request{Ensure: []kargs.Param{want}}); lacks {
					// configured, but not in the menu the next boot reads
					regen := b.MenuRegenerate(e.Root, menu)
					f.Status = Warn
					f.Message += "; but the boot menu " + menu + " does not have it (" + b.MenuEntry() + "): the next boot goes without it"
					f.Remedy = "regenerate the boot menu (" + regen + ") before rebooting"
				}
			}
		case running:
			f.Status = Warn
			f.Message = "in effect now" + kargs.AsEquivalent(e.Cmdline, want) + " but not configured in " + src.File + ": the next boot loses it"
			f.Fixable, f.FixCommand = true, fix
			f.Remedy = "persist it: " + fix
		case conf:
			f.Status = bad
			notYet := "not yet in /proc/cmdline"
			if _, ok := kargs.Deciding(e.Cmdline, want); ok {
				notYet = notInEffect(e.Cmdline, want, "/proc/cmdline")
			}
			if pending, detail, regen := rebootPending(e, src, grub.Request{Ensure: []kargs.Param{want}}); pending {
				f.Message = "configured in " + src.File + kargs.AsEquivalent(configured, want) + ", reboot pending: " + notYet + detail
				f.Remedy = "reboot the node"
				if regen != "" {
					f.Remedy = "regenerate the boot menu (" + regen + "), then reboot the node"
				}
			} else {
				f.Message = "configured in " + src.File + kargs.AsEquivalent(configured, want) + " but not effective after the last boot" + detail
				if notYet != "not yet in /proc/cmdline" {
					f.Message += " (" + notYet + ")"
				}
				f.Remedy = "check that no later /etc/default/grub.d file or BLS entry overrides it, that the bootloader config was regenerated (update-grub / grub2-mkconfig), and that this kernel knows the argument"
			}
		default:
			f.Status = bad
			f.Message = notInEffect(e.Cmdline, want, "/proc/cmdline")
			switch {
			case src != nil:
				f.Message += "; " + notInEffect(configured, want, src.File)
				f.Fixable, f.FixCommand = true, fix
				f.Remedy = fix + ", then reboot"
			case srcErr != nil:
				// grub ensure would refuse the same line.
				f.Message += "; " + unparsed.says
				f.Remedy = unparsed.fix + ", then run gpuprep check again"
			case noBootloader(e):
				// No bootloader configuration: booted over the network or
				// straight by a hypervisor; grub ensure has nothing to edit.
				f.Message += "; no bootloader configuration on this node"
				f.Remedy = "add " + want.String() + " where this node's kernel command line is made (the PXE/iPXE boot configuration, the hypervisor's definition of this VM, a unified kernel image), then reboot"
			default:
				f.Fixable, f.FixCommand = true, fix // kernelstub and the like: grub ensure edits them
				f.Remedy = fix + ", then reboot"
			}
		}
		f.Message += " — " + why
		if nn := e.notNeeded(want); nn != "" {
			// Not running, and not needed: the IOMMU is active without it
			// (plan and grub ensure --mode leave it out, and no reboot is
			// for it). Configured, the next boot gets it and nothing changes.
			f.Status = Pass
			f.Message = "not needed: " + nn
			if conf {
				f.Message += "; " + src.File + " has it for the next boot, where it changes nothing"
			}
			var bare []string
			for _, w := range []struct {
				ps    []kargs.Param
				where string
			}{{e.Cmdline, "/proc/cmdline"}, {configured, fileOf(src)}} {
				if p, ok := kargs.Last(w.ps, want.Key); ok && !p.HasValue {
					bare = append(bare, w.where)
				}
			}
			if len(bare) > 0 {
				f.Message += "; the bare " + want.Key + " (no value) in " + strings.Join(bare, " and ") + " does nothing"
			}
			f.Remedy, f.Fixable, f.FixCommand = "", false, ""
		}
		out = append(out, f)
	}
	for _, p := range disablingArgs(e.Cmdline) {
		out = append(out, offFinding(e, p, src, configured, unparsed, vendor))
	}
	for _, p := range offArgs(configured, vendor) {
		if _, now := kargs.Disabling(e.Cmdline, p.Key); !now {
			out = append(out, nextBootOff(src, p, "turns the IOMMU off", fix))
		}
	}
	if p, ok := kargs.Last(append(append([]kargs.Param{}, e.Cmdline...), configured...), "amd_iommu"); ok && kargs.HasOption(p.Value, "on") {
		msg := "amd_iommu=on is not a valid value (the kernel logs \"AMD-Vi: Unknown option - 'on'\"); the AMD IOMMU is on whenever firmware enables it"
		if vendor == "arm" {
			msg = "amd_iommu=on does nothing here: amd_iommu= is an x86 kernel parameter, and this node is arm64 (an Arm SMMU)"
		}
		out = append(out, Finding{Status: Warn, Subject: "amd_iommu=on", Message: msg,
			Remedy: "gpuprep grub remove amd_iommu", Fixable: true, FixCommand: "gpuprep grub remove amd_iommu"})
	}
	return out
}

// laterLack is, on a BLS node, the files that kernels installed later take
// their arguments from that lack want (grub.Boot.LaterLack): what grub show
// calls not-for-later-kernels and grub ensure --mode and plan add it to.
func laterLack(e *Env, src *grub.Source, want kargs.Param) []string {
	if src == nil || src.Kind != "bls" {
		return nil
	}
	b, err := e.Boot()
	if err != nil {
		return nil
	}
	return b.LaterLack(grub.Request{Ensure: []kargs.Param{want}})
}

// nextBootOff is the warning about p, an argument the configuration for the
// next boot has and the running kernel does not, that turns off what the VM
// modes need (what: "turns the IOMMU off"): the node works now, and the next
// boot breaks it. grub ensure --mode (fix) takes it out, and only it.
func nextBootOff(src *grub.Source, p kargs.Param, what, fix string) Finding {
	return Finding{Status: Warn, Subject: p.String(),
		Message: fmt.Sprintf("%s in %s %s at the next boot: the running kernel was booted without it, so this node works now, and a reboot breaks it", p, src.Locate(p), what),
		Remedy:  "take it out before the node reboots: " + fix + " (it removes only the arguments that turn the IOMMU or interrupt remapping off; no reboot is needed for that)",
		Fixable: true, FixCommand: fix}
}

func fileOf(src *grub.Source) string {
	if src == nil {
		return ""
	}
	return src.File
}

// notInEffect says that want is not in effect in ps (read from where):
// missing, or which occurrence of its key stands instead.
func notInEffect(ps []kargs.Param, want kargs.Param, where string) string {
	if kargs.Norm(want.Key) == "intel_iommu" {
		if state, by := kargs.IntelIOMMU(ps); state == "off" {
			return where + " has " + by.String() + ", which leaves the Intel IOMMU off"
		}
	}
	p, ok := kargs.Deciding(ps, want)
	switch {
	case !ok:
		return "missing from " + where
	case !p.HasValue:
		return where + " has a bare " + p.Key + ", which does nothing"
	}
	return "not in " + where + " (it has " + p.String() + ")"
}

// offFinding judges p, an argument in /proc/cmdline that leaves an IOMMU
// off; its remedy depends on what the configuration for the next boot has.
func offFinding(e *Env, p kargs.Param, src *grub.Source, configured []kargs.Param, unparsed unread, vendor string) Finding {
	f := Finding{Subject: p.String()}
	key := kargs.Norm(p.Key)
	_, confOff := kargs.Disabling(configured, key)
	if !disablerApplies(key, vendor) {
		// intel_iommu= on an AMD IOMMU, amd_iommu= on an Intel one, any
		// of them on arm64.
		name := map[string]string{"intel": "an Intel (VT-d)", "amd": "an AMD (AMD-Vi)", "arm": "an Arm SMMU"}
		other := map[string]string{"intel_iommu": "intel", "amd_iommu": "amd"}[key]
		f.Status = Warn
		f.Message = p.String() + " in /proc/cmdline does nothing here: " + key + "= acts on " + name[other] + " IOMMU only, and this node's is " + name[vendor]
		if vendor == "arm" {
			f.Message = p.String() + " in /proc/cmdline does nothing here: " + key + "= is an x86 kernel parameter, and this node is arm64 (an Arm SMMU)"
		}
		switch {
		case unparsed.says != "":
			f.Remedy = "to tidy up (optional): " + unparsed.fix + ", then remove " + key + "="
		case src != nil && !confOff:
			f.Message += "; " + src.File + " does not have it: the next boot drops it"
		case src != nil || !noBootloader(e):
			f.Fixable, f.FixCommand = true, "gpuprep grub remove "+key
			f.Remedy = "to tidy up (optional): gpuprep grub remove " + key
		}
		return f
	}
	f.Status = Fail
	f.Message = p.String() + " in /proc/cmdline turns the IOMMU off"
	switch {
	case unparsed.says != "":
		f.Message += "; " + unparsed.says
		f.Remedy = unparsed.fix + ", then run gpuprep check again"
	case src == nil && noBootloader(e):
		f.Remedy = "remove " + p.String() + " where this node's kernel command line is made (the PXE/iPXE boot configuration, the hypervisor's definition of this VM, a unified kernel image), then reboot"
	case src != nil && !confOff:
		// The next boot's configuration no longer has it.
		f.Message += "; " + src.File + " does not have it"
		if pending, detail, regen := rebootPending(e, src, grub.Request{NotOff: []string{key}}); !pending {
			f.Message += ", yet the last boot got it" + detail
			f.Remedy = "find what gave the last boot " + p.String() + " (the boot menu not regenerated, another menu entry such as a custom or recovery one, a saved default entry, a command line edited at the console), then reboot into the default entry"
		} else if regen != "" {
			f.Message += detail
			f.Remedy = "regenerate the boot menu (" + regen + "), then reboot the node"
		} else {
			f.Message += ": the next boot drops it (reboot pending)"
			f.Remedy = "reboot the node"
		}
	default:
		// Configured too (or in a configuration only grub edits).
		if src != nil {
			f.Message += "; " + src.File + " has it too"
		}
		cmd := offFix(e)
		f.Fixable, f.FixCommand = true, cmd
		switch key {
		case "intel_iommu":
			f.Remedy = cmd + " (it replaces every intel_iommu= with intel_iommu=on), then reboot"
		case "iommu":
			f.Remedy = cmd + " (it removes " + p.String() + " and keeps iommu=pt), then reboot"
		default:
			f.Remedy = cmd + " (it removes " + p.String() + ": amd_iommu= has no \"on\", the AMD IOMMU is on whenever firmware enables it), then reboot"
		}
	}
	return f
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, ": "); i > 0 {
		return s[:i]
	}
	return s
}

// rebootPending tells "configured, reboot pending" (the configuration changed
// after this boot) from "configured but not effective" (a boot already used
// it). Where GRUB boots from a generated menu, the menu's content decides
// first (not its age: an older menu can have the change, a newer one lack
// it): when its first entry does not give what req asks for, the reboot
// alone would not bring it, and regen is the command that regenerates the
// menu (to run before the reboot).
func rebootPending(e *Env, src *grub.Source, req grub.Request) (pending bool, detail, regen string) {
	b, err := e.Boot()
	if err != nil {
		return true, "", ""
	}
	if menu, lacks := b.BootMenuLacks(e.Root, req); lacks {
		regen = b.MenuRegenerate(e.Root, menu)
		detail = fmt.Sprintf("; the boot menu %s does not have the change yet (%s)", menu, b.MenuEntry())
		if m, newer, stale := grub.StaleMenu(e.Root); stale && m == menu {
			detail += fmt.Sprintf(", and is older than %s", newer)
		}
		return true, detail + fmt.Sprintf(": regenerate it (%s) before rebooting", regen), regen
	}
	return b.ChangedSince(e.Root, src, e.BootTime), proxmoxUnseen(b), ""
}

// proxmoxUnseen is, on a proxmox-boot-tool node, what gpuprep could not
// read: the ESPs (not mounted in regular operation) that the next boot
// reads its command line from.
func proxmoxUnseen(b *grub.Boot) string {
	if b.Kind != grub.KindProxmox {
		return ""
	}
	return "; the ESPs (" + grub.ProxmoxBootUUIDs + ") are not mounted, so whether proxmox-boot-tool refresh copied it there is not seen (gpuprep grub ensure runs it)"
}

func checkInterruptRemapping(e *Env) []Finding {
	if e.IOMMUVendor() == "arm" {
		return checkMSIIsolation(e)
	}
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
		return append(out, intremapNextBoot(e)...)
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
		return append([]Finding{unsafeInterrupts(true)}, intremapNextBoot(e)...)
	}
	return append([]Finding{{Status: Fail, Subject: "/proc/interrupts", Message: msg,
		Remedy: "enable interrupt remapping in the BIOS (VT-d / x2APIC or IOMMU settings) and remove intremap=off / nointremap; vfio_iommu_type1.allow_unsafe_interrupts=1 is an unsafe last resort"}}, intremapNextBoot(e)...)
}

// intremapNextBoot warns about an intremap=off or nointremap the
// configuration for the next boot has and the running kernel does not.
func intremapNextBoot(e *Env) []Finding {
	if _, now := kargs.IntRemapOff(e.Cmdline); now {
		return nil // the running kernel has it: the finding above says so
	}
	src, err := e.Configured()
	if err != nil || src == nil {
		return nil // iommu.cmdline names what cannot be read
	}
	p, off := kargs.IntRemapOff(src.Args())
	if !off {
		return nil
	}
	return []Finding{nextBootOff(src, p, "turns interrupt remapping off (VFIO then refuses to attach devices)", "gpuprep grub ensure --mode "+string(e.vmMode()))}
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
		case v.Group == "" && uncaptured(e, "/sys/kernel/iommu_groups") && !e.IOMMU.Active():
			f.Status = Error
			f.Message = "no IOMMU group, and the root has no /sys/kernel/iommu_groups: cannot tell whether the IOMMU is active (see iommu.kernel)"
			f.Remedy = "run gpuprep on the node itself, or give --root a root that holds /sys/kernel/iommu_groups and the devices' iommu_group links"
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
			f.Remedy = groupRemedy(e, g, v)
		case len(v.Shared) > 0:
			f.Status = Warn
			var sh []string
			for _, d := range v.Shared {
				sh = append(sh, d.Address)
			}
			f.Message = fmt.Sprintf("IOMMU group %s is shared with selected %s %s: they must be assigned to the same VM", v.Group, plural.Word(len(sh), "device"), strings.Join(sh, ", "))
			if host := hostDevices(e, append([]*pci.Device{g}, v.Shared...)); len(host) > 0 {
				f.Remedy = "do not select " + strings.Join(host, ", ") + ": gpuprep vfio bind refuses them, as gpuprep does not give storage, network, USB or other host controllers to VMs; to pass the GPU through, move it to a slot with its own IOMMU group (a CPU root port with ACS) or enable ACS in the BIOS"
			}
		default:
			f.Status = Pass
			f.Message = fmt.Sprintf("IOMMU group %s: %s", v.Group, members(v))
		}
		if v.Group != "" {
			acsOverrideEvidence(e, g, &f)
		}
		out = append(out, f)
	}
	if len(e.GPUs) == 0 {
		out = append(out, Finding{Status: Skip, Subject: "/sys/kernel/iommu_groups", Message: "no GPU selected"})
	}
	return out
}

// groupRemedy is what makes a GPU's group passable: its other endpoints go
// to the same VM only when they may (another GPU, a multimedia function);
// the host's storage, network, USB and other controllers stay with it (vfio
// bind refuses them), so the GPU must get a group of its own.
func groupRemedy(e *Env, g *pci.Device, v iommu.Verdict) string {
	const acs = "move the GPU to a slot with its own IOMMU group (a CPU root port with ACS) or enable ACS (\"PCIe ACS\" / \"ACS enable\") in the BIOS"
	const patch = "; the pcie_acs_override kernel patch trades away isolation"
	const never = "gpuprep does not give storage, network, USB or other host controllers to VMs"
	if host := hostDevices(e, []*pci.Device{g}); len(host) > 0 {
		return "do not select " + host[0] + ": gpuprep vfio bind refuses it, as " + never
	}
	if host := hostDevices(e, v.Foreign); len(host) > 0 {
		return acs + "; the other devices must stay with the host, as " + never + ": " + strings.Join(host, ", ") + patch
	}
	sel := "--select " + g.Address
	for _, d := range v.Foreign {
		sel += " --select " + d.Address
	}
	return "select the other devices too so that they go to the same VM (" + sel + "), or " + acs + patch
}

// hostDevices names the devices of ds that gpuprep vfio bind refuses to
// give to a VM (vfio.HostDevice).
func hostDevices(e *Env, ds []*pci.Device) []string {
	var out []string
	for _, d := range ds {
		if u, ok := vfio.HostDevice(e.Inv, d); ok {
			out = append(out, d.Address+" ("+u.Kind+", "+driverOr(d.Driver)+"; "+u.Why+")")
		}
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
