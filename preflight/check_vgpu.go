package preflight

import (
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vgpu"
)

func checkVGPUManager(e *Env) []Finding {
	m := vgpu.ReadManager(e.Root)
	if m.Installed {
		return []Finding{{Status: Pass, Subject: "nvidia vGPU manager", Message: "installed: " + strings.Join(m.Evidence, ", ")}}
	}
	var onVFIO []string
	for _, g := range e.GPUs {
		if pci.DriverIsVFIO(g.Driver) {
			onVFIO = append(onVFIO, g.Address)
		}
	}
	msg := "no NVIDIA vGPU manager: module nvidia_vgpu_vfio not loaded, no nvidia-vgpu-mgr, /sys/class/mdev_bus empty"
	if len(onVFIO) > 0 {
		msg += "; GPUs " + strings.Join(onVFIO, ", ") + " are on vfio-pci, which the vGPU manager cannot use"
	}
	return []Finding{{Status: Fail, Subject: "nvidia vGPU manager", Message: msg,
		Fixable: true, FixCommand: "gpuprep vgpu install",
		Remedy: "install the licensed NVIDIA vGPU manager (gpuprep vgpu install --run FILE), or let the GPU Operator deploy it (vgpuManager.enabled=true with your private image)"}}
}

func checkVGPUTypes(e *Env) []Finding {
	if len(e.GPUs) == 0 {
		return []Finding{{Status: Skip, Subject: "/sys/class/mdev_bus", Message: "no GPU selected"}}
	}
	if !vgpu.ReadManager(e.Root).Installed {
		return []Finding{{Status: Skip, Subject: "/sys/class/mdev_bus", Message: "no vGPU manager (see vgpu.manager): no types to list"}}
	}
	var out []Finding
	for _, g := range e.GPUs {
		s := vgpu.Read(e.Root, g.Address)
		f := Finding{Subject: g.Address}
		switch {
		case len(s.Types) > 0:
			f.Status = Pass
			names := make([]string, 0, 4)
			for i, t := range s.Types {
				if i == 3 {
					names = append(names, fmt.Sprintf("… %d in all", len(s.Types)))
					break
				}
				names = append(names, t.Name)
			}
			iface := "mdev (mdev_supported_types)"
			if s.Interface == "sriov" {
				iface = fmt.Sprintf("vendor-specific VFIO, %d/%d VFs enabled (nvidia/creatable_vgpu_types)", s.NumVFs, s.TotalVFs)
			}
			f.Message = iface + ": " + strings.Join(names, ", ")
		case s.TotalVFs > 0 && s.NumVFs <= 0:
			f.Status = Fail
			f.Message = fmt.Sprintf("SR-IOV GPU with 0 of %d VFs enabled: vGPUs are created on VFs", s.TotalVFs)
			f.Remedy = "/usr/lib/nvidia/sriov-manage -e " + g.Address
			f.Fixable, f.FixCommand = true, "gpuprep vgpu enable --select "+g.Address
		default:
			f.Status = Fail
			f.Message = "no vGPU types offered: no mdev_supported_types and no VF with nvidia/creatable_vgpu_types"
			f.Remedy = "check that this GPU supports vGPU and that the vGPU manager version supports this GPU and kernel"
		}
		out = append(out, f)
	}
	return out
}
