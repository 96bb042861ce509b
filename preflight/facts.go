package preflight

import (
	"context"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
)

// Facts are typed data a check found about a finding's subject, set by the
// check itself: programs (the operator values, reports) read these, never
// a finding's Message, which is for people and may be reworded. In the
// JSON report a finding's "facts" (omitted when none).
type Facts struct {
	// VGPUManager is the installed vGPU manager (vgpu.manager, when one is).
	VGPUManager *VGPUManagerFacts `json:"vgpuManager,omitempty"`
	// Driver is the driver the GPU is on (vfio.binding's per-GPU findings).
	Driver *DriverFacts `json:"driver,omitempty"`
}

// VGPUManagerFacts are what shows a vGPU manager installed, and which.
type VGPUManagerFacts struct {
	// Evidence is what shows it installed (vgpu.ReadManager).
	Evidence []string `json:"evidence"`
	// HostFiles are its programs on the host itself: the GPU Operator's
	// vGPU manager container loads the module too, but leaves none.
	HostFiles []string `json:"hostFiles,omitempty"`
	// Version is the installed version, and Source the record it was read
	// from: nvidia-installer's log, dpkg's file list, else the loaded
	// module's /sys/module/nvidia/version (vgpu.ReadInstalled, commands
	// not run: on an rpm host the loaded module's). Empty when none says.
	Version string `json:"version,omitempty"`
	Source  string `json:"source,omitempty"`
	// Format is how it was installed (run, deb), Package its package.
	Format  string `json:"format,omitempty"`
	Package string `json:"package,omitempty"`
	// Loaded is the loaded nvidia module's version ("" when not loaded).
	Loaded string `json:"loaded,omitempty"`
	// SourceError says why a record there could not be read.
	SourceError string `json:"sourceError,omitempty"`
}

// DriverFacts name the driver a device is bound to.
type DriverFacts struct {
	// Name is the driver ("" when the device is bound to none).
	Name string `json:"name"`
}

// vgpuManagerFacts are the facts of the installed manager m.
func vgpuManagerFacts(e *Env, m vgpu.Manager) *Facts {
	in, err := vgpu.ReadInstalled(context.Background(), e.Root, host.NoRunner{})
	f := &VGPUManagerFacts{Evidence: m.Evidence, HostFiles: m.Files, Version: in.Version, Source: in.Record,
		Format: in.Format, Package: in.Package, Loaded: in.Loaded}
	if err != nil {
		f.SourceError = err.Error()
	}
	return &Facts{VGPUManager: f}
}

// withDriverFacts runs check and gives each of its findings about a PCI
// device (its subject an address) the driver the device is on.
func withDriverFacts(check func(*Env) []Finding) func(*Env) []Finding {
	return func(e *Env) []Finding {
		out := check(e)
		if e.Inv == nil {
			return out
		}
		for i := range out {
			d := e.Inv.Get(out[i].Subject)
			if d == nil {
				continue
			}
			if out[i].Facts == nil {
				out[i].Facts = &Facts{}
			}
			out[i].Facts.Driver = &DriverFacts{Name: d.Driver}
		}
		return out
	}
}

// noManagerFacts are the facts of a host with no vGPU manager: none found.
// Every vgpu.manager finding carries facts, so a report without them is one
// an older gpuprep made (kube.Operator refuses to guess from it).
func noManagerFacts() *Facts {
	return &Facts{VGPUManager: &VGPUManagerFacts{Evidence: []string{}}}
}
