package vgpu_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

func layoutHost(t *testing.T, scenario string) *vgputest.Host {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	return h
}

// free is a GPU's free count per type name, and each parent's.
func free(g vgpu.GPU) (map[string]int, map[string]map[string]int) {
	gpu, per := map[string]int{}, map[string]map[string]int{}
	for _, t := range g.Types {
		gpu[t.Name] = t.Available
	}
	for _, p := range g.Parents {
		per[p.Address] = map[string]int{}
		for _, t := range p.Types {
			per[p.Address][t.Name] = t.Available
		}
	}
	return gpu, per
}

// An A16 GPU (Ampere, vGPU 16): its 16 VFs are the mdev parents, each
// offering one instance of each type; the GPU's free count is summed over
// them and bounded by the type's max_instance (4 A16-4Q fit, not 16).
func TestReadVFMdevParents(t *testing.T) {
	h := layoutHost(t, "vfmdev-vgpu")
	g := vgpu.Read(h.Root, fixture.A16)
	require.Equal(t, "mdev", g.Interface)
	require.True(t, g.VFParents())
	require.Equal(t, fixture.A16VFs, g.VFs)
	gpu, per := free(g)
	require.Equal(t, map[string]int{"NVIDIA A16-1Q": 16, "NVIDIA A16-2Q": 8, "NVIDIA A16-4Q": 4, "NVIDIA A16-8Q": 2, "NVIDIA A16-16Q": 1}, gpu)
	require.Len(t, per, 16, "the PF is no parent")
	for _, vf := range fixture.A16VFs {
		require.Equal(t, 1, per[vf]["NVIDIA A16-4Q"], vf)
		require.Equal(t, 1, g.Parents[0].Free("nvidia-713"))
	}
	require.False(t, vgpu.Read(layoutHost(t, "mdev-vgpu").Root, "0000:21:00.0").VFParents(), "a T4's PF is its parent")
}

// 4 A16-4Q on an A16 GPU: one on each of its first 4 VFs, as
// vgpu-device-manager places them; then the GPU is full, and each parent
// says so.
func TestApplyVFMdevPlacesOnePerVF(t *testing.T) {
	h := layoutHost(t, "vfmdev-vgpu")
	p, err := vgpu.MakePlan(h.Root, []vgpu.Want{{GPU: fixture.A16, Type: "A16-4Q", Count: 4}})
	require.NoError(t, err)
	require.Len(t, p.Actions, 4)
	for i, a := range p.Actions {
		require.Equal(t, "/sys/bus/pci/devices/"+fixture.A16VFs[i]+"/mdev_supported_types/nvidia-713/create", a.Path)
		require.Equal(t, "create an mdev of nvidia-713 on VF "+fixture.A16VFs[i], a.About)
	}
	done, err := vgpu.ApplyAt(h.Root, h, p, time.Now())
	require.NoError(t, err)
	require.Len(t, done, 4)
	parents := map[string]int{}
	for _, e := range vgpu.Existing(h.Root, fixture.A16) {
		require.Equal(t, "NVIDIA A16-4Q", e.Type)
		parents[e.Parent]++
	}
	require.Equal(t, map[string]int{fixture.A16VFs[0]: 1, fixture.A16VFs[1]: 1, fixture.A16VFs[2]: 1, fixture.A16VFs[3]: 1}, parents)
	gpu, per := free(vgpu.Read(h.Root, fixture.A16))
	require.Equal(t, 0, gpu["NVIDIA A16-4Q"])
	require.Equal(t, 0, gpu["NVIDIA A16-1Q"], "one type at a time")
	for _, vf := range fixture.A16VFs {
		require.Equal(t, 0, per[vf]["NVIDIA A16-4Q"], vf)
	}
	p, err = vgpu.MakePlan(h.Root, []vgpu.Want{{GPU: fixture.A16, Type: "A16-4Q", Count: 4}})
	require.NoError(t, err)
	require.Empty(t, p.Actions, "all four kept")
	require.Len(t, p.Kept, 4)
}

// Half full: the free count per parent and per GPU follow; the next two go
// on the next free VFs; a request beyond the room is refused with numbers.
func TestPlanVFMdevFreeCounts(t *testing.T) {
	h := layoutHost(t, "vfmdev-vgpu")
	for _, vf := range fixture.A16VFs[:2] {
		require.NoError(t, h.WriteAttr("/sys/bus/pci/devices/"+vf+"/mdev_supported_types/nvidia-713/create", vgpu.NewUUID()))
	}
	gpu, per := free(vgpu.Read(h.Root, fixture.A16))
	require.Equal(t, 2, gpu["NVIDIA A16-4Q"])
	require.Equal(t, 0, per[fixture.A16VFs[0]]["NVIDIA A16-4Q"])
	require.Equal(t, 1, per[fixture.A16VFs[2]]["NVIDIA A16-4Q"])
	require.Equal(t, 14, len(per)-2)

	_, err := vgpu.MakePlan(h.Root, []vgpu.Want{{GPU: fixture.A16, Type: "A16-4Q", Count: 5}})
	require.EqualError(t, err, `0000:b2:00.0: 3 more "NVIDIA A16-4Q" wanted, 2 available (the GPU takes 2 more; 14 of its 16 VFs, the mdev parents, have one free)`)
	p, err := vgpu.MakePlan(h.Root, []vgpu.Want{{GPU: fixture.A16, Type: "A16-4Q", Count: 4}})
	require.NoError(t, err)
	require.Len(t, p.Kept, 2)
	require.Equal(t, []string{fixture.A16VFs[2], fixture.A16VFs[3]}, []string{p.Actions[0].Path[21:33], p.Actions[1].Path[21:33]})
}

// Free counts on the vendor-specific interface are known: a VF with no
// type offers one instance of each type it lists; one with a type, none.
func TestReadSRIOVFreeCounts(t *testing.T) {
	h := layoutHost(t, "sriov-vgpu")
	gpu, per := free(vgpu.Read(h.Root, "0000:41:00.0"))
	require.Equal(t, map[string]int{"NVIDIA H200X-141C": 4, "NVIDIA H200X-70C": 4, "NVIDIA H200X-35C": 4}, gpu)
	require.Equal(t, 1, per["0000:41:00.6"]["NVIDIA H200X-35C"])

	require.NoError(t, h.WriteAttr("/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type", "1430"))
	gpu, per = free(vgpu.Read(h.Root, "0000:41:00.0"))
	require.Equal(t, 3, gpu["NVIDIA H200X-35C"], "re-read after the create")
	require.Empty(t, per["0000:41:00.4"], "a VF with a type lists none")
	require.Equal(t, 0, gpu["NVIDIA H200X-141C"], "its siblings list the 35C size only")
}
