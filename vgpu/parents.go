package vgpu

import (
	"path"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Parent is one device a GPU's vGPUs are created on, with what it offers
// now. The three layouts (a node has one):
//
//   - Turing and older, mdev: the PF itself is the one mdev parent
//     (mdev_supported_types on the PF);
//   - Ampere SR-IOV with mdev (A2/A10/A16/A30/A40/A100, vGPU 13–16): every VF
//     is an mdev parent with its own mdev_supported_types/<type>/
//     {name,available_instances,create,devices/}; the PF has none; a VF
//     hosts one vGPU (NVIDIA's listing in kata-containers
//     docs/use-cases/NVIDIA-GPU-passthrough-and-Kata.md: each VF of an A100
//     shows available_instances 1 per type; go-nvlib pkg/nvmdev
//     ParentDevice.GetPhysicalFunction maps a VF parent to its PF, and
//     vgpu-device-manager pkg/vgpu/config.go SetVGPUConfig creates on every
//     parent of the PF in turn, min(left, available_instances) on each);
//   - vendor-specific VFIO (vGPU ≥ 17 on kernel ≥ 6.8): every VF is a
//     parent of one vGPU, made by writing a type id to its
//     nvidia/current_vgpu_type; it offers one instance of each type its
//     nvidia/creatable_vgpu_types lists while current_vgpu_type is 0 (as
//     the VFIO backend proposed to vgpu-device-manager reads them, PR #195's
//     pkg/vgpu/vfio/vfio.go SetVGPUConfig: VFs with a non-zero type are
//     skipped, the creatable list is re-read before each VF, since creating
//     a vGPU changes what its siblings list; not merged: v0.5.0's
//     pkg/vgpu/config.go creates mdevs only, through go-nvlib nvmdev).
type Parent struct {
	Address   string // PF or VF
	Interface string // "mdev" or "sriov" (vendor-specific VFIO), as GPU.Interface
	// Types are the types it offers now. Available is its own free count:
	// available_instances (mdev); 1 or 0 on a vendor-specific VF (0 once it
	// has a type); -1 when unknown (unreadable)
	Types []Type
	// MaxInstances is, per type ID, the most vGPUs of that type the whole
	// GPU takes (max_instance in an mdev type's description); absent when
	// not told
	MaxInstances map[string]int
}

// Free returns the parent's free count of the type with ID id: 0 when it
// does not offer it, -1 when unknown.
func (p Parent) Free(id string) int {
	for _, t := range p.Types {
		if t.ID == id {
			return t.Available
		}
	}
	return 0
}

// parentsOf reads the parents of the GPU at dev (its PF directory) and its
// VFs, in that order.
func parentsOf(root *host.Root, dev string, vfs []string) []Parent {
	var out []Parent
	if ts := mdevTypes(root, dev); len(ts) > 0 {
		out = append(out, Parent{Address: path.Base(dev), Interface: "mdev", Types: ts, MaxInstances: maxInstances(root, dev, ts)})
	}
	for _, vf := range vfs {
		vdev := "/sys/bus/pci/devices/" + vf
		if ts := mdevTypes(root, vdev); len(ts) > 0 {
			out = append(out, Parent{Address: vf, Interface: "mdev", Types: ts, MaxInstances: maxInstances(root, vdev, ts)})
			continue
		}
		if !root.Exists(vdev + "/nvidia/creatable_vgpu_types") {
			continue
		}
		b, _ := root.ReadFile(vdev + "/nvidia/creatable_vgpu_types")
		ts := ParseCreatable(string(b))
		free := 0
		switch cur, err := root.ReadString(vdev + "/nvidia/current_vgpu_type"); {
		case err != nil || strings.Trim(cur, "0123456789") != "" || cur == "":
			free = -1
		case strings.Trim(cur, "0") == "":
			free = 1
		}
		for i := range ts {
			ts[i].Available = free
		}
		out = append(out, Parent{Address: vf, Interface: "sriov", Types: ts})
	}
	return out
}

// maxInstances reads max_instance=N from the description of each mdev type
// (NVIDIA's description reads "num_heads=4, frl_config=60,
// framebuffer=4096M, max_resolution=7680x4320, max_instance=4").
func maxInstances(root *host.Root, dev string, ts []Type) map[string]int {
	m := map[string]int{}
	for _, t := range ts {
		d, err := root.ReadString(dev + "/mdev_supported_types/" + t.ID + "/description")
		if err != nil {
			continue
		}
		for _, f := range strings.Split(d, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
			if n, err := strconv.Atoi(strings.TrimSpace(v)); ok && k == "max_instance" && err == nil && n >= 0 {
				m[t.ID] = n
			}
		}
	}
	return m
}

// gpuTypes merges the parents' types, in the order found, with free counts
// summed (-1 when one is unknown) and, where VFs are mdev parents and the
// driver tells max_instance, bounded by it less the vGPUs of that type the
// GPU has (have: type ID → count): each VF of an A16 says 1 until its GPU
// is full, so the sum alone counts 16 where 4 A16-4Q fit.
func gpuTypes(parents []Parent, have map[string]int, vfParents bool) []Type {
	var out []Type
	idx := map[string]int{}
	max := map[string]int{}
	for _, p := range parents {
		for id, n := range p.MaxInstances {
			max[id] = n
		}
		for _, t := range p.Types {
			i, ok := idx[t.ID]
			if !ok {
				idx[t.ID] = len(out)
				out = append(out, t)
				continue
			}
			switch {
			case out[i].Available < 0:
			case t.Available < 0:
				out[i].Available = -1
			default:
				out[i].Available += t.Available
			}
		}
	}
	if vfParents {
		for i, t := range out {
			if n, ok := max[t.ID]; ok && t.Available >= 0 && t.Available > n-have[t.ID] {
				out[i].Available = max0(n - have[t.ID])
			}
		}
	}
	return out
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// mdevsByType counts, per type ID, the mdevs the mdev parents have (each
// type's devices/ directory lists its mdevs).
func mdevsByType(root *host.Root, parents []Parent) map[string]int {
	have := map[string]int{}
	for _, p := range parents {
		for _, t := range p.Types {
			have[t.ID] += len(root.Names("/sys/bus/pci/devices/" + p.Address + "/mdev_supported_types/" + t.ID + "/devices"))
		}
	}
	return have
}
