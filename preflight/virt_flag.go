package preflight

import (
	"io/fs"
	"strings"
)

// vmxFlagVerdict judges a vmx flag in /proc/cpuinfo while MSR 0x3A cannot
// be read. Linux 5.6 brought arch/x86/kernel/cpu/feat_ctl.c (the series
// "x86/cpu: Clean up handling of VMX features"): init_ia32_feat_ctl clears
// X86_FEATURE_VMX, logging "VMX (outside TXT) disabled by BIOS", when the
// BIOS locked IA32_FEATURE_CONTROL with VMX off, so there the flag shows
// VT-x usable. Older kernels print the CPUID bit as it is: the flag stays
// when the BIOS disables VT-x, and alone it proves nothing. What decides
// there: kvm_intel loaded with /dev/kvm (its init refuses a CPU whose BIOS
// disabled VMX, "kvm: disabled by bios", and registers no /dev/kvm), or a
// "vmx flags" line (proc.c prints it only for the VMX capabilities that
// feat_ctl.c reads after finding VMX enabled; a kernel older than 5.6 that
// prints it carries feat_ctl.c as a backport).
func vmxFlagVerdict(e *Env, msrErr error) Finding {
	const subject = "cpu flag vmx"
	k := e.Host.Kernel
	ev := "cpu flag vmx (MSR 0x3A not readable: " + msrErr.Error() + ")"
	switch {
	case kvmBackendUp(e, "kvm_intel"):
		return Finding{Status: Pass, Subject: subject, Message: "VT-x enabled: " + ev + ", kvm_intel loaded and /dev/kvm present (kvm_intel does not load where the BIOS disabled VT-x)"}
	case e.CPU.VMXFeatures:
		return Finding{Status: Pass, Subject: subject, Message: "VT-x enabled: " + ev + ", and a \"vmx flags\" line in /proc/cpuinfo (the kernel lists VMX features only after finding VT-x enabled in MSR 0x3A)"}
	case kernelAtLeast(k, 5, 6):
		return Finding{Status: Pass, Subject: subject, Message: "VT-x enabled: " + ev + "; kernel " + k + " (≥ 5.6) clears vmx when the BIOS locks VT-x off"}
	}
	what := "kernel " + k + " is older than 5.6"
	switch {
	case k == "":
		what = "the kernel release is unknown (/proc/sys/kernel/osrelease not readable), so it may be older than 5.6"
	case !kernelAtLeast(k, 0, 0):
		what = "the kernel release " + k + " is no version gpuprep can read, so it may be older than 5.6"
	}
	return Finding{Status: Warn, Subject: subject,
		Message: "vmx flag present, but " + what + ": such kernels keep the flag when the BIOS disables VT-x, so the flag alone does not prove VT-x enabled; MSR 0x3A not readable (" + msrErr.Error() + "), " + kvmMissing(e, "kvm_intel"),
		Remedy:  "run gpuprep as root after `modprobe msr` (it reads MSR 0x3A), or `modprobe kvm_intel` (it refuses to load when VT-x is disabled in the BIOS)"}
}

// kvmBackendUp reports whether KVM's backend mod (kvm_intel, kvm_amd) has
// initialised: the module is there and /dev/kvm exists. Its init fails where
// the BIOS disabled VT-x or AMD-V, and then no /dev/kvm is registered; a
// module built into the kernel keeps /sys/module/NAME (its parameters) even
// when its init failed, so the module alone does not say so.
func kvmBackendUp(e *Env, mod string) bool {
	if !e.Root.Exists("/sys/module/" + mod) {
		return false
	}
	fi, err := e.Root.Stat("/dev/kvm")
	return err == nil && (fi.Mode()&fs.ModeCharDevice != 0 || !e.Root.IsLive())
}

// kvmMissing says which of kvmBackendUp's evidence is missing.
func kvmMissing(e *Env, mod string) string {
	var no []string
	if !e.Root.Exists("/sys/module/" + mod) {
		no = append(no, mod+" is not loaded")
	}
	if _, err := e.Root.Stat("/dev/kvm"); err != nil {
		no = append(no, "no /dev/kvm")
	}
	if len(no) == 0 {
		return "and /dev/kvm is not a character device"
	}
	return "and " + strings.Join(no, ", ")
}
