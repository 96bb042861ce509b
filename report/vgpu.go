package report

import (
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vgpu"
)

// VGPUInstance is a vGPU that exists on a GPU: an mdev (Device its UUID), or
// an SR-IOV VF given a type on the vendor-specific VFIO interface (Device the
// VF's address; VendorID and DeviceID the VF's own, which is what KubeVirt ≥
// 1.9's PCI device plugin selects it by: pciVendorSelector).
type VGPUInstance struct {
	Device   string `json:"device"`
	VendorID string `json:"vendorID,omitempty"`
	DeviceID string `json:"deviceID,omitempty"`
	TypeID   string `json:"typeID"`
	Type     string `json:"type"`
}

// VGPUParent is one device a GPU's vGPUs are created on (the PF on Turing
// mdev; each VF on Ampere mdev and on the vendor-specific VFIO interface),
// with its own free instances per type.
type VGPUParent struct {
	Address string     `json:"address"`
	Types   []VGPUFree `json:"types"`
}

// VGPUFree is a parent's free instances of one type (Available null:
// unknown, see FreeCount).
type VGPUFree struct {
	ID        string `json:"id"`
	Available *int   `json:"available"`
}

// FreeCount is vgpu's free count n as a report holds it: nil (JSON null)
// where vgpu says -1, unknown. A JSON consumer that sums or compares
// counts cannot take an unknown for one (docs/schema/ReadinessReport.json).
func FreeCount(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

// NewVGPU is the report's view of a GPU's vGPU state st (nil when no vGPU
// interface is set up): its types with the GPU's free instances, its
// parents with theirs, and the vGPUs that exist; inv names the VFs' PCI
// IDs.
func NewVGPU(root *host.Root, inv *pci.Inventory, st vgpu.GPU) *VGPU {
	if st.Interface == "" {
		return nil
	}
	v := &VGPU{Interface: st.Interface, TotalVFs: max(st.TotalVFs, 0), NumVFs: max(st.NumVFs, 0), Types: []VGPUType{}}
	for _, t := range st.Types {
		v.Types = append(v.Types, VGPUType{ID: t.ID, Name: t.Name, Available: FreeCount(t.Available), ResourceName: vgpu.ResourceName(t.Name)})
	}
	v.Parents = vgpuParents(st)
	for _, x := range vgpu.Existing(root, st.Address) {
		in := VGPUInstance{Device: x.Device, TypeID: x.TypeID, Type: x.Type}
		if !strings.Contains(x.Device, ":") || inv == nil {
			v.Instances = append(v.Instances, in)
			continue
		}
		if d := inv.Get(x.Device); d != nil {
			in.VendorID, in.DeviceID = d.VendorID, d.DeviceID
		}
		v.Instances = append(v.Instances, in)
	}
	return v
}

// vgpuParents is the per-parent view of st (vgpu.GPU.Parents): each
// parent with its own free instances of each type it offers now; nil when
// vgpu tells no parent apart.
func vgpuParents(st vgpu.GPU) []VGPUParent {
	var out []VGPUParent
	for _, p := range st.Parents {
		vp := VGPUParent{Address: p.Address, Types: []VGPUFree{}}
		for _, t := range p.Types {
			vp.Types = append(vp.Types, VGPUFree{ID: t.ID, Available: FreeCount(t.Available)})
		}
		out = append(out, vp)
	}
	return out
}
