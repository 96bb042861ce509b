package preflight

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/kubeletargs"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// WorkloadLabel is the node label the GPU Operator reads (with
// sandboxWorkloads.enabled=true) to choose what a node is for.
const WorkloadLabel = "nvidia.com/gpu.workload.config"

// configuredLabel finds nvidia.com/gpu.workload.config in the kubelet's
// --node-labels as the kubelet reads them (kubeletargs: the environment
// files and command line its unit gives it, repeated flags merged, a later
// value of a key winning), returning its value and the file that sets it.
func configuredLabel(e *Env) (value, file string, found bool) {
	return kubeletargs.Read(e.Root).Lookup(WorkloadLabel)
}

func checkNodeLabel(e *Env) []Finding {
	v, file, found := configuredLabel(e)
	if !found {
		out := []Finding{{Status: Pass, Subject: WorkloadLabel, Modes: []Mode{Container},
			Message: "no workload label configured on this host: the GPU Operator's default workload (container unless changed) applies"}}
		for _, m := range VMModes {
			fix := "gpuprep label --mode " + string(m)
			out = append(out, Finding{Status: Warn, Subject: WorkloadLabel, Modes: []Mode{m},
				Message: "no workload label configured on this host yet; it is set last, once the node is ready",
				Remedy:  fix + " (or --before-join to add it to the kubelet's --node-labels)", Fixable: true, FixCommand: fix})
		}
		return out
	}
	mode, err := ParseMode(v)
	if err != nil {
		return []Finding{{Status: Fail, Subject: WorkloadLabel + "=" + v,
			Message: "invalid value " + `"` + v + `"` + " in " + file + ": the GPU Operator silently treats it as the default (container)",
			Remedy:  "gpuprep label --before-join --mode MODE (one of container, vm-passthrough, vm-vgpu)", Fixable: true,
			FixCommand: "gpuprep label --before-join --mode " + string(e.vmModeOr(Container))}}
	}
	f := Finding{Status: Pass, Subject: WorkloadLabel + "=" + v, Modes: []Mode{mode}, Message: "set in " + file + "; the host's state agrees"}
	if disagree, fix := labelDisagrees(e, mode); disagree != "" {
		f.Status, f.Message = Fail, "set in "+file+", but "+disagree
		f.Remedy, f.Fixable, f.FixCommand = fix, strings.HasPrefix(fix, "gpuprep "), fix
		if !f.Fixable {
			f.FixCommand = ""
		}
	}
	labelAfterRegistration(e, file, mode, &f)
	out := []Finding{f}
	for _, m := range Modes {
		if m != mode {
			fix := "gpuprep label --before-join --mode " + string(m)
			out = append(out, Finding{Status: Fail, Subject: WorkloadLabel + "=" + v, Modes: []Mode{m},
				Message: "the kubelet in " + file + " labels this node for " + v + ", not " + string(m),
				Remedy:  fix, Fixable: true, FixCommand: fix})
		}
	}
	return out
}

func (e *Env) vmModeOr(def Mode) Mode {
	if e.Mode != "" {
		return e.Mode
	}
	return def
}

// labelDisagrees compares the labelled mode with the host's real state:
// vm-passthrough needs the GPUs on a VFIO driver, vm-vgpu a vGPU manager,
// container neither. It returns what disagrees and how to fix it.
func labelDisagrees(e *Env, mode Mode) (string, string) {
	var onVFIO, notVFIO []string
	for _, g := range e.GPUs {
		if pci.DriverIsVFIO(g.Driver) {
			onVFIO = append(onVFIO, g.Address)
		} else {
			notVFIO = append(notVFIO, g.Address+" ("+driverOr(g.Driver)+")")
		}
	}
	mgr := e.Manager().Installed
	switch mode {
	case VMPassthrough:
		if len(notVFIO) > 0 {
			return "GPUs " + strings.Join(notVFIO, ", ") + " are not on a VFIO driver", "gpuprep vfio bind"
		}
	case VMVGPU:
		if !mgr && allConsumer(e) {
			return "its GPUs are GeForce/TITAN boards, which cannot host NVIDIA vGPU (see vgpu.support)", "label the node for another mode (container or vm-passthrough)"
		}
		if !mgr {
			return "no vGPU manager is installed", "gpuprep vgpu install --driver FILE"
		}
		if len(onVFIO) > 0 {
			return "GPUs " + strings.Join(onVFIO, ", ") + " are on vfio-pci, which the vGPU manager cannot use", "gpuprep vfio unbind"
		}
	case Container:
		if len(onVFIO) > 0 {
			return "GPUs " + strings.Join(onVFIO, ", ") + " are on vfio-pci, which containers cannot use", "gpuprep vfio unbind"
		}
		if mgr {
			return "the vGPU manager is installed: container workloads need the regular NVIDIA driver", "uninstall the vGPU manager, or label the node vm-vgpu"
		}
	}
	return "", ""
}
