package preflight

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Kernel machine names (uname -m) gpuprep tells apart.
const (
	ArchX86   = "x86_64"
	ArchARM64 = "aarch64"
)

// readArch is the running kernel's machine, as uname -m prints it, from
// what a root holds (and so what a snapshot of it carries, as the kernel
// release): /proc/sys/kernel/arch (kernel/utsname_sysctl.c, "arch" =
// init_uts_ns.name.machine, Linux 6.1 and later), else the shape of
// /proc/cpuinfo: arm64's c_show (arch/arm64/kernel/cpuinfo.c) prints
// "CPU implementer" and no vendor_id, x86's show_cpuinfo
// (arch/x86/kernel/cpu/proc.c) prints vendor_id. "" when neither tells.
func readArch(root *host.Root, c CPUInfo) string {
	if s, err := root.ReadString("/proc/sys/kernel/arch"); err == nil {
		switch s = strings.TrimSpace(s); s {
		case ArchX86, ArchARM64:
			return s
		case "arm64":
			return ArchARM64
		}
	}
	switch {
	case c.Implementer != "" && c.Vendor == "":
		return ArchARM64
	case c.Vendor != "":
		return ArchX86
	}
	return ""
}

// ARM64 reports whether the node runs an arm64 kernel (Grace: GH200, GB200).
func (e *Env) ARM64() bool { return e.Arch == ArchARM64 }
