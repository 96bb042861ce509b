package preflight

import (
	"io/fs"
	"os"
	"strings"

	"github.com/gpuprep/gpuprep/internal/kargs"
)

// What arm64 KVM leaves as evidence of its initialisation, read from the
// kernel's own source (arch/arm64/kvm/arm.c, torvalds/linux; the strings
// are the same from 5.x to 6.x unless noted):
//   - kvm_arm_init (kvm_arch_init before 6.3) returns -ENODEV, logging
//     "HYP mode not available", when the kernel was not entered at EL2
//     (is_hyp_mode_available), and "KVM disabled from command line" for
//     kvm-arm.mode=none (5.16 and later);
//   - on success it logs "VHE mode initialized successfully" (kernel at
//     EL2), "Hyp mode initialized successfully" (nVHE, before 6.3; since
//     then "Hyp nVHE mode …" or "Hyp hVHE mode …") or "Protected nVHE mode
//     initialized successfully" (kvm-arm.mode=protected), with "+NV2" on
//     CPUs with nested virtualization; kvm_info prefixes "kvm [PID]: ";
//   - only then does kvm_init register the misc device kvm: /dev/kvm and
//     /sys/class/misc/kvm. arm64 KVM is built into the kernel (a bool in
//     arch/arm64/kvm/Kconfig; "Compiling as a module not supported"), so no
//     module brings it later, and no static device node (kmod static-nodes
//     reads modules.devname, which lists modules only) stands in for it.
//     /sys/module/kvm, by contrast, holds the parameters of the built-in
//     kvm whether or not it initialised: it is no evidence.
//
// A real Grace boot log (Linux 6.16-rc5, linux-serial, Message-ID
// <cno3lsprrz36gqu27omvwrw27d2ubqtshac3cahfgkhcm2rla7@bpnulcmsyx2u>) has
// "CPU: All CPU(s) started at EL2" and "kvm [1]: VHE mode initialized
// successfully".
const (
	kvmInitOK      = "mode initialized successfully"
	kvmNoHyp       = "HYP mode not available"
	kvmDisabledArg = "KVM disabled from command line"
	cpusStartedAt  = "CPU: All CPU(s) started at "
	cpusMixed      = "CPU: CPUs started in inconsistent modes"
)

// armKVM is the evidence of KVM's initialisation on an arm64 host.
type armKVM struct {
	dev        bool   // /dev/kvm is a character device (present, in a root that is not live)
	registered bool   // /sys/class/misc/kvm: kvm_init registered the device
	mode       string // kvm-arm.mode= on /proc/cmdline ("" when absent)
	log        kernelLog
}

func readARMKVM(e *Env) armKVM {
	k := armKVM{log: e.Log()}
	if fi, err := e.Root.Stat("/dev/kvm"); err == nil {
		k.dev = fi.Mode()&fs.ModeCharDevice != 0 || !e.Root.IsLive()
	}
	k.registered = e.Root.Exists("/sys/class/misc/kvm")
	if p, ok := kargs.Last(e.Cmdline, "kvm-arm.mode"); ok {
		k.mode = p.Value
	}
	return k
}

// checkCPUVirtARM64 is cpu.virtualization on arm64: there is no CPU flag
// or MSR for it; hardware virtualization is usable when firmware entered
// the kernel at EL2 and KVM initialised there.
func checkCPUVirtARM64(e *Env) []Finding {
	k := readARMKVM(e)
	const subject = "KVM at EL2"
	if k.mode == "none" {
		return []Finding{{Status: Fail, Subject: "kvm-arm.mode=none",
			Message: "kvm-arm.mode=none in /proc/cmdline: KVM is disabled at boot (arch/arm64/kvm/arm.c logs \"" + kvmDisabledArg + "\")",
			Remedy:  "take kvm-arm.mode=none off the kernel command line (gpuprep grub remove kvm-arm.mode) and reboot"}}
	}
	if line, ok := k.log.Find(kvmNoHyp); ok {
		return []Finding{{Status: Fail, Subject: subject,
			Message: "the kernel log says \"" + line + "\": the firmware did not enter the kernel at EL2, so KVM cannot run" + elNote(k.log),
			Remedy:  "boot the kernel at EL2: on bare metal that is the firmware's boot setting (update the UEFI firmware / BMC image); a virtual machine needs a hypervisor with nested virtualization (QEMU: -machine virt,virtualization=on)"}}
	}
	if line, ok := k.log.Find(cpusMixed); ok {
		return []Finding{{Status: Fail, Subject: subject,
			Message: "the kernel log says \"" + line + "\": firmware entered some CPUs at EL2 and others at EL1, and KVM refuses such a system",
			Remedy:  "update the system firmware so that every CPU starts at EL2"}}
	}
	if line, ok := k.log.Find(cpusStartedAt + "EL1"); ok {
		return []Finding{{Status: Fail, Subject: subject,
			Message: "the kernel log says \"" + line + "\": without EL2 there is no KVM",
			Remedy:  "boot the kernel at EL2 (firmware setting, or nested virtualization on a hypervisor)"}}
	}
	if line, ok := k.log.Find(kvmDisabledArg); ok {
		return []Finding{{Status: Fail, Subject: subject,
			Message: "the kernel log says \"" + line + "\" (kvm-arm.mode=none at this boot)",
			Remedy:  "take kvm-arm.mode=none off the kernel command line and reboot"}}
	}
	init, logged := k.log.Find(kvmInitOK)
	switch {
	case k.dev && (logged || k.registered):
		ev := "/dev/kvm present"
		if k.registered {
			ev += ", /sys/class/misc/kvm registered (kvm_init registers it only after KVM initialised at EL2)"
		}
		if logged {
			ev += ", kernel log: \"" + init + "\""
		} else {
			ev += "; mode not known: " + logUnread(k.log)
		}
		if k.mode != "" {
			ev += "; booted with kvm-arm.mode=" + k.mode
		}
		return []Finding{{Status: Pass, Subject: subject, Message: "KVM initialised at EL2: " + ev}}
	case k.dev:
		return []Finding{{Status: Warn, Subject: "/dev/kvm",
			Message: "/dev/kvm present, but nothing else shows KVM initialised at EL2: no /sys/class/misc/kvm in this root, and " + logUnread(k.log),
			Remedy:  "run gpuprep check on the node itself as root (it reads /sys/class/misc/kvm and the kernel log)"}}
	}
	if off := kvmConfigOff(e); off != "" {
		return []Finding{{Status: Fail, Subject: subject,
			Message: "no /dev/kvm, and the running kernel is built without KVM (" + off + ")",
			Remedy:  "boot a kernel built with CONFIG_KVM=y (every distribution's arm64 server kernel is)"}}
	}
	msg := "no /dev/kvm, and nothing tells why: " + logUnread(k.log)
	if logged {
		msg = "no /dev/kvm, although the kernel log says \"" + init + "\""
	}
	return []Finding{{Status: Warn, Subject: subject, Message: msg + "; cannot tell whether the firmware entered the kernel at EL2",
		Remedy: "as root, read `dmesg | grep -e 'kvm \\[' -e 'started at EL'`: \"" + kvmNoHyp + "\" means the firmware did not enter the kernel at EL2"}}
}

// logUnread says what the kernel log told, for a message.
func logUnread(l kernelLog) string {
	if l.Err != nil {
		return "the kernel log is not readable (" + l.Err.Error() + ")"
	}
	return "the kernel log has no KVM initialisation line (the log may have rotated since boot)"
}

// elNote adds the exception level the CPUs started at, when the log has it.
func elNote(l kernelLog) string {
	if line, ok := l.Find(cpusStartedAt); ok {
		return " (\"" + line + "\")"
	}
	return ""
}

// kvmConfigOff is the /boot/config line that says the kernel has no KVM,
// else "".
func kvmConfigOff(e *Env) string {
	cfg := "/boot/config-" + e.Host.Kernel
	b, err := e.Root.ReadFile(cfg)
	if err != nil || e.Host.Kernel == "" {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "# CONFIG_KVM is not set" {
			return cfg + ": " + l
		}
	}
	return ""
}

// checkKVMARM64 is kvm.device on arm64, where KVM is built in: there is no
// kvm_intel/kvm_amd to load, and no module brings /dev/kvm later.
func checkKVMARM64(e *Env) []Finding {
	fi, err := e.Root.Stat("/dev/kvm")
	switch {
	case err == nil && (fi.Mode()&fs.ModeCharDevice != 0 || !e.Root.IsLive()):
		return []Finding{{Status: Pass, Subject: "/dev/kvm", Message: "/dev/kvm present (arm64 KVM is built into the kernel)"}}
	case err == nil:
		return []Finding{{Status: Fail, Subject: "/dev/kvm", Message: "/dev/kvm exists but is not a character device", Remedy: "remove it and reboot: the kernel's devtmpfs creates the real one"}}
	case os.IsNotExist(err) && uncaptured(e, "/dev"):
		return []Finding{{Status: Error, Subject: "/dev/kvm", Message: "the root has no /dev: cannot tell whether /dev/kvm exists",
			Remedy: "run gpuprep on the node itself, or give --root a root that holds /dev/kvm"}}
	case os.IsNotExist(err):
		return []Finding{{Status: Fail, Subject: "/dev/kvm",
			Message: "/dev/kvm missing: KVM did not initialise (arm64 KVM is built into the kernel; there is no module to load)",
			Remedy:  "see cpu.virtualization: the kernel must be entered at EL2 by the firmware, built with CONFIG_KVM, and booted without kvm-arm.mode=none"}}
	default:
		return []Finding{{Status: Error, Subject: "/dev/kvm", Message: "cannot stat /dev/kvm: " + err.Error(), Remedy: "run as root"}}
	}
}
