package preflight

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
)

func checkGPUPresent(e *Env) []Finding {
	var out []Finding
	for _, g := range e.GPUs {
		drv := g.Driver
		if drv == "" {
			drv = "no driver"
		}
		f := Finding{Status: Pass, Subject: g.Address,
			Message: fmt.Sprintf("%s (%s:%s, class %s), %s%s", name(g), g.VendorID, g.DeviceID, g.Class[:4], drv, nameSource(e, g))}
		if why, now := gpuLost(e, g); now {
			// in sysfs, and gone from the bus: nothing on it answers
			f.Status, f.Remedy = Fail, lostRemedy
			f.Message = fmt.Sprintf("%s (%s:%s) has fallen off the bus (NVIDIA Xid 79): %s; it cannot be used, passed to a VM or given vGPUs until the node is power-cycled", name(g), g.VendorID, g.DeviceID, why)
		} else if why != "" {
			f.Status = Warn
			f.Message += "; it fell off the bus earlier in this boot (" + why + ") and answers now: it may fall off again"
			f.Remedy = "if it falls off again: " + lostRemedy
		}
		out = append(out, f)
	}
	for _, d := range e.Inv.Devices {
		if d.VendorID == "ffff" && !slices.Contains(e.GPUs, d) {
			out = append(out, Finding{Status: Warn, Subject: d.Address,
				Message: "a PCI device whose vendor reads ffff (/sys/bus/pci/devices/" + d.Address + "/vendor): it has fallen off the bus; if it is one of this node's GPUs, that GPU is lost",
				Remedy:  lostRemedy})
		}
	}
	if len(e.NVSwitches) > 0 {
		addrs := make([]string, len(e.NVSwitches))
		drivers := map[string]int{}
		var order []string
		for i, s := range e.NVSwitches {
			addrs[i] = s.Address
			d := "on " + s.Driver
			if s.Driver == "" {
				d = "unbound"
			}
			if drivers[d] == 0 {
				order = append(order, d)
			}
			drivers[d]++
		}
		var on []string
		for _, d := range order {
			on = append(on, fmt.Sprintf("%d %s", drivers[d], d))
		}
		out = append(out, Finding{Status: Pass, Subject: strings.Join(addrs, ","),
			Message: fmt.Sprintf("%s: %s (%s); reported separately (vfio.binding says whether they go to VMs with the GPUs)%s", plural.N(len(e.NVSwitches), "NVSwitch"), name(e.NVSwitches[0]), strings.Join(on, ", "), nameSource(e, e.NVSwitches[0]))})
	}
	if len(e.GPUs) == 0 {
		out = append(out, Finding{Status: Fail, Subject: "/sys/bus/pci/devices",
			Message: fmt.Sprintf("no NVIDIA GPU (vendor 10de, class 0300/0302) among %s", plural.N(len(e.Inv.Devices), "PCI device")),
			Remedy:  "check that the GPUs are seated and powered and visible to the kernel (lspci -d 10de:); use --select to treat other devices as GPUs"})
	}
	return out
}

func name(d *pci.Device) string {
	if d.Name == "" {
		return pci.DisplayName(d.VendorName, "unknown device")
	}
	return d.DisplayName()
}

// MSR bits (facts: Intel IA32_FEATURE_CONTROL 0x3A, AMD VM_CR 0xC0010114).
const (
	msrFeatureControl   = 0x3A
	featCtlLock         = 1 << 0
	featCtlVMXInSMX     = 1 << 1
	featCtlVMXOutsideSX = 1 << 2
	msrVMCR             = 0xC0010114
	vmcrLock            = 1 << 3
	vmcrSVMDis          = 1 << 4
)

// readMSR reads one MSR from every CPU's /dev/cpu/N/msr. It returns the
// values by CPU and the first error (not readable: no msr module, not root).
func readMSR(e *Env, msr int64) (map[string]uint64, error) {
	cpus := e.Root.Names("/dev/cpu")
	vals := map[string]uint64{}
	var firstErr error
	for _, c := range cpus {
		if strings.Trim(c, "0123456789") != "" {
			continue // /dev/cpu/microcode
		}
		b, err := e.Root.ReadAt("/dev/cpu/"+c+"/msr", msr, 8)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		vals[c] = binary.LittleEndian.Uint64(b)
	}
	if len(vals) == 0 && firstErr == nil {
		firstErr = fmt.Errorf("/dev/cpu/*/msr: not present (load the msr module)")
	}
	return vals, firstErr
}

func checkCPUVirt(e *Env) []Finding {
	c := e.CPU
	var out []Finding
	if !c.Read {
		return []Finding{{Status: Error, Subject: "/proc/cpuinfo", Message: "cannot read /proc/cpuinfo", Remedy: "run gpuprep on a Linux host (or point --root at one)"}}
	}
	if e.ARM64() {
		return checkCPUVirtARM64(e)
	}
	if c.Flags["hypervisor"] {
		out = append(out, Finding{Status: Warn, Subject: "cpu flag hypervisor",
			Message: "this node is itself a virtual machine (CPUID hypervisor bit): the GPU Operator's VM workloads assume bare metal, and VMs here need nested virtualization and a virtual IOMMU",
			Remedy:  "prepare the bare-metal host instead, or enable nested virtualization and a vIOMMU on the hypervisor"})
	}
	switch {
	case c.Intel():
		vals, msrErr := readMSR(e, msrFeatureControl)
		var disabled []string
		for cpu, v := range vals {
			if v&featCtlLock != 0 && v&featCtlVMXOutsideSX == 0 {
				disabled = append(disabled, cpu)
			}
		}
		switch {
		case c.Flags["hypervisor"] && !c.Flags["vmx"]:
			out = append(out, noNestedVirt("vmx", "VT-x", msrErr))
		case len(disabled) > 0:
			v := vals[disabled[0]]
			out = append(out, Finding{Status: Fail, Subject: "MSR 0x3A (IA32_FEATURE_CONTROL)",
				Message: fmt.Sprintf("VT-x disabled by BIOS: MSR 0x3A = %#x on %d of %s (locked, VMX outside SMX off)%s", v, len(disabled), plural.N(len(vals), "CPU"), vmxFlagNote(c)),
				Remedy:  "enable \"Intel Virtualization Technology\" (VT-x, VMX) in the BIOS/UEFI setup and power-cycle the node"})
		case c.Flags["vmx"] && msrErr == nil:
			ev := fmt.Sprintf("cpu flag vmx, MSR 0x3A = %#x on %s (VMX outside SMX allowed)", vals[firstKey(vals)], plural.N(len(vals), "CPU"))
			out = append(out, Finding{Status: Pass, Subject: "cpu flag vmx", Message: "VT-x enabled: " + ev})
		case c.Flags["vmx"]:
			out = append(out, vmxFlagVerdict(e, msrErr))
		case msrErr == nil:
			out = append(out, Finding{Status: Fail, Subject: "cpu flag vmx",
				Message: fmt.Sprintf("no vmx flag although MSR 0x3A = %#x does not lock VT-x off: the kernel did not enable VMX (built without KVM_INTEL, or a VM without nested virtualization)", vals[firstKey(vals)]),
				Remedy:  "check the BIOS VT-x setting and that the kernel has KVM support (modprobe kvm_intel)"})
		default:
			out = append(out, Finding{Status: Fail, Subject: "cpu flag vmx",
				Message: "no vmx flag in /proc/cpuinfo: VT-x is disabled in the BIOS (the kernel clears the flag when firmware locks it off) or this CPU has no VT-x; MSR 0x3A not readable (" + msrErr.Error() + ")",
				Remedy:  "enable \"Intel Virtualization Technology\" (VT-x) in the BIOS/UEFI setup; to confirm, run as root after `modprobe msr`"})
		}
	case c.AMD():
		vals, msrErr := readMSR(e, msrVMCR)
		var disabled []string
		for cpu, v := range vals {
			if v&vmcrSVMDis != 0 {
				disabled = append(disabled, cpu)
			}
		}
		kvmAMD := kvmBackendUp(e, "kvm_amd")
		switch {
		case c.Flags["hypervisor"] && !c.Flags["svm"]:
			out = append(out, noNestedVirt("svm", "AMD-V", msrErr))
		case len(disabled) > 0:
			v := vals[disabled[0]]
			lock := ""
			if v&vmcrLock != 0 {
				lock = ", locked"
			}
			out = append(out, Finding{Status: Fail, Subject: "MSR 0xC0010114 (VM_CR)",
				Message: fmt.Sprintf("AMD-V disabled by BIOS: VM_CR = %#x on %d of %s (SVMDIS set%s); the svm flag alone does not show this on older kernels", v, len(disabled), plural.N(len(vals), "CPU"), lock),
				Remedy:  "enable \"SVM Mode\" (AMD-V) in the BIOS/UEFI setup and power-cycle the node"})
		case c.Flags["svm"] && (msrErr == nil || kvmAMD):
			ev := "cpu flag svm"
			if msrErr == nil {
				ev += fmt.Sprintf(", VM_CR = %#x (SVMDIS clear)", vals[firstKey(vals)])
			}
			if kvmAMD {
				ev += ", kvm_amd loaded and /dev/kvm present"
			}
			out = append(out, Finding{Status: Pass, Subject: "cpu flag svm", Message: "AMD-V enabled: " + ev})
		case c.Flags["svm"]:
			out = append(out, Finding{Status: Warn, Subject: "cpu flag svm",
				Message: "svm flag present, but older kernels keep it when the BIOS disables SVM, VM_CR is not readable (" + msrErr.Error() + "), " + kvmMissing(e, "kvm_amd"),
				Remedy:  "run as root after `modprobe msr`, or `modprobe kvm_amd` (it refuses to load when SVM is disabled in the BIOS)"})
		default:
			out = append(out, Finding{Status: Fail, Subject: "cpu flag svm",
				Message: "no svm flag in /proc/cpuinfo: AMD-V (SVM) is disabled in the BIOS or not available",
				Remedy:  "enable \"SVM Mode\" in the BIOS/UEFI setup and power-cycle the node"})
		}
	default:
		out = append(out, Finding{Status: Error, Subject: "vendor_id " + c.Vendor,
			Message: fmt.Sprintf("unsupported CPU vendor %q: gpuprep checks Intel VT-x, AMD-V and arm64 KVM at EL2", c.Vendor),
			Remedy:  "check hardware virtualization by hand, then --ignore cpu.virtualization"})
	}
	return out
}

// noNestedVirt is the verdict for a virtual machine whose CPU has no vmx or
// svm flag: its hypervisor does not pass hardware virtualization through
// (nested virtualization is off). Its BIOS has nothing to do with it, and
// the MSRs it shows are the hypervisor's; a /dev/kvm there (a paravirtual
// KVM such as PVM) runs no VT-x/AMD-V guest.
func noNestedVirt(flag, tech string, msrErr error) Finding {
	msg := "no " + flag + " flag in /proc/cpuinfo, and this node is a virtual machine: its hypervisor does not expose " + tech + " (nested virtualization is off)"
	if msrErr != nil {
		msg += "; MSR not readable (" + msrErr.Error() + ")"
	}
	return Finding{Status: Fail, Subject: "cpu flag " + flag, Message: msg,
		Remedy: "prepare the bare-metal host instead, or enable nested virtualization for this VM on its hypervisor (a CPU model that passes " + flag + " through)"}
}

func vmxFlagNote(c CPUInfo) string {
	if c.Flags["vmx"] {
		return "; the vmx flag is still set (kernel older than 5.6?)"
	}
	return ""
}

func firstKey(m map[string]uint64) string {
	best := ""
	for k := range m {
		if best == "" || len(k) < len(best) || len(k) == len(best) && k < best {
			best = k
		}
	}
	return best
}

func checkKVM(e *Env) []Finding {
	if e.ARM64() {
		return checkKVMARM64(e)
	}
	var mods []string // kvm's backends (kvm_intel, kvm_amd, or another: kvm_pvm), then kvm
	for _, m := range []string{"kvm_intel", "kvm_amd"} {
		if e.Root.Exists("/sys/module/" + m) {
			mods = append(mods, m)
		}
	}
	hw := len(mods) > 0
	if !hw { // another backend? (listing /sys/module costs; only here)
		for _, m := range e.Root.Names("/sys/module") {
			if strings.HasPrefix(m, "kvm_") {
				mods = append(mods, m)
			}
		}
	}
	if e.Root.Exists("/sys/module/kvm") {
		mods = append(mods, "kvm")
	}
	modMsg := "no kvm module loaded"
	if len(mods) > 0 {
		modMsg = "modules " + strings.Join(mods, ", ")
	}
	fi, err := e.Root.Stat("/dev/kvm")
	switch {
	case err == nil && (fi.Mode()&fs.ModeCharDevice != 0 || !e.Root.IsLive()) && !hw && len(mods) > 0:
		// Seen on a cloud VM: /dev/kvm from kvm_pvm (a paravirtual KVM that
		// needs no VT-x) with no vmx flag. KubeVirt's guests need kvm_intel
		// or kvm_amd on hardware virtualization.
		return []Finding{{Status: Warn, Subject: "/dev/kvm",
			Message: "/dev/kvm present, but from neither kvm_intel nor kvm_amd (" + modMsg + "): not hardware virtualization, which KubeVirt's VMs need",
			Remedy:  "enable VT-x/AMD-V (see cpu.virtualization) so that kvm_intel or kvm_amd loads"}}
	case err == nil && (fi.Mode()&fs.ModeCharDevice != 0 || !e.Root.IsLive()):
		return []Finding{{Status: Pass, Subject: "/dev/kvm", Message: "/dev/kvm present; " + modMsg}}
	case err == nil:
		return []Finding{{Status: Fail, Subject: "/dev/kvm", Message: "/dev/kvm exists but is not a character device", Remedy: "remove it and reload the kvm modules"}}
	case os.IsNotExist(err) && uncaptured(e, "/dev"):
		return []Finding{{Status: Error, Subject: "/dev/kvm",
			Message: "the root has no /dev: cannot tell whether /dev/kvm exists; " + modMsg,
			Remedy:  "run gpuprep on the node itself, or give --root a root that holds /dev/kvm"}}
	case os.IsNotExist(err):
		mod := "kvm_intel"
		if e.CPU.AMD() {
			mod = "kvm_amd"
		}
		return []Finding{{Status: Fail, Subject: "/dev/kvm",
			Message: "/dev/kvm missing; " + modMsg,
			Remedy:  fmt.Sprintf("`modprobe %s`; if it fails, hardware virtualization is off (see cpu.virtualization)", mod)}}
	default:
		return []Finding{{Status: Error, Subject: "/dev/kvm", Message: "cannot stat /dev/kvm: " + err.Error(), Remedy: "run as root"}}
	}
}
