package preflight

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
)

// The ACS override. Proxmox VE's kernel (pve-kernel, debian/patches/pve/
// 0004-pci-Enable-overrides-for-missing-ACS-capabilities-4..patch, seen in
// jiangcuo/pve-arm64-kernel, a port of it; Arch's linux-zen carries the
// same patch) adds pcie_acs_override=: "downstream" makes every root port
// and switch downstream port without an ACS capability report full ACS,
// "multifunction" every multi-function endpoint and upstream port without
// one, "id:VVVV:DDDD" the devices with those IDs; devices with an ACS
// capability of their own are never overridden (pcie_acs_overrides). Each
// occurrence on the command line adds to the others (the flags are only
// ever set), and the kernel then logs "Warning: PCIe ACS overrides
// enabled; This may allow non-IOMMU protected peer-to-peer DMA". The IOMMU
// groups are computed from the ACS the kernel believes in: below a port
// the override speaks for, a group of the GPU's own proves nothing about
// isolation. A kernel without the patch passes the argument to init and
// groups by the hardware, so the argument alone is not proof either way.

// acsOverrideLog is the line the patched kernel logs when an override is on.
const acsOverrideLog = "PCIe ACS overrides enabled"

// acsOverrides are the pcie_acs_override= arguments the running kernel was
// booted with (all of them count).
func acsOverrides(ps []kargs.Param) []string {
	var out []string
	for _, p := range ps {
		if kargs.Norm(p.Key) == "pcie_acs_override" && strings.TrimSpace(p.Value) != "" {
			out = append(out, p.String())
		}
	}
	return out
}

// acsOverrideEvidence turns a passing group verdict of g into a warning
// where the running kernel was booted with an ACS override and a port above
// g has no ACS isolation of its own: whether the group is the hardware's or
// the override's cannot be told from the groups.
func acsOverrideEvidence(e *Env, g *pci.Device, f *Finding) {
	on := acsOverrides(e.Cmdline)
	if len(on) == 0 || f.Status == Fail || f.Status == Error {
		return
	}
	gaps := iommu.PortGaps(e.Root, e.Inv, g)
	if len(gaps) == 0 {
		f.Message += "; booted with " + strings.Join(on, " ") + ", which leaves ports with ACS of their own (every port above it) alone"
		return
	}
	kernel := "whether this kernel carries the ACS override patch (Proxmox VE's and linux-zen's do; an upstream kernel ignores the argument) is not known from its log"
	if line, ok := e.Log().Find(acsOverrideLog); ok {
		kernel = "the kernel logged \"" + line + "\""
	}
	f.Status = Warn
	f.Message += "; but the kernel was booted with " + strings.Join(on, " ") + " and " + strings.Join(gaps, "; ") +
		": the override makes such ports report ACS they lack, so this group may be the override's, not the hardware's, and peer-to-peer DMA below it may bypass the IOMMU (" + kernel + ")"
	f.Remedy = "for isolation the hardware enforces, move the GPU to a slot whose ports have ACS (a CPU root port) or enable ACS in the BIOS, then boot without pcie_acs_override= and check again; keep the override only where the devices below that port trust each other"
}
