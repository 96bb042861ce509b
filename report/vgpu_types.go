package report

import (
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vgpu"
)

// VGPUTypesKind is the kind of the document gpuprep vgpu types -o json
// writes.
const VGPUTypesKind = "VGPUTypes"

// VGPUTypes is what gpuprep vgpu types -o json writes: per selected GPU,
// the same vgpu object as a ReadinessReport's gpus[].vgpu (the same field
// names and meanings). Stable within APIVersion; fields may be added.
type VGPUTypes struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	GPUs       []VGPUTypesGPU `json:"gpus"`
}

// VGPUTypesGPU is one GPU of a VGPUTypes document; VGPU is null when no
// vGPU interface is set up on it (no manager, no VFs enabled).
type VGPUTypesGPU struct {
	Address string `json:"address"`
	VGPU    *VGPU  `json:"vgpu"`
}

// NewVGPUTypes reads the vGPU state of the GPUs gpus (PF addresses).
func NewVGPUTypes(root *host.Root, inv *pci.Inventory, gpus []string) *VGPUTypes {
	d := &VGPUTypes{APIVersion: APIVersion, Kind: VGPUTypesKind, GPUs: []VGPUTypesGPU{}}
	for _, a := range gpus {
		d.GPUs = append(d.GPUs, VGPUTypesGPU{Address: a, VGPU: NewVGPU(root, inv, vgpu.Read(root, a))})
	}
	return d
}
