package vgputest_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// An A16 GPU: sriov-manage -e with nvidia_vgpu_vfio loaded makes its 16
// VFs mdev parents (the PF none); each VF takes one vGPU, the GPU four
// A16-4Q, after which every VF says 0; a removal gives the room back.
func TestVFMdevParents(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("vgpu-fresh-vfmdev", dir))
	kver := "5.15.0-91-generic"
	b := fixture.New(dir)
	b.File("/lib/modules/"+kver+"/modules.dep", "kernel/drivers/video/nvidia.ko:\nkernel/drivers/video/nvidia-vgpu-vfio.ko: kernel/drivers/video/nvidia.ko\n")
	b.File("/usr/lib/nvidia/sriov-manage", "#!/bin/sh\n")
	b.Remove("/sys/module/nouveau")
	dev := "/sys/devices/pci0000:b0/0000:b0:01.0/" + fixture.A16
	b.Remove(dev + "/driver")
	require.NoError(t, b.Err())
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	ctx := context.Background()
	for _, c := range [][]string{{"modprobe", "nvidia"}, {"modprobe", "nvidia_vgpu_vfio"}, {"/usr/lib/nvidia/sriov-manage", "-e", fixture.A16}} {
		_, err := h.Run(ctx, c...)
		require.NoError(t, err, "%v", c)
	}
	require.False(t, h.Root.Exists("/sys/bus/pci/devices/"+fixture.A16+"/mdev_supported_types"), "the PF is no mdev parent")
	require.False(t, h.Root.Exists("/sys/bus/pci/devices/"+fixture.A16VFs[0]+"/nvidia"), "no vendor-specific interface")
	g := vgpu.Read(h.Root, fixture.A16)
	require.True(t, g.VFParents())
	require.Len(t, g.Parents, 16)
	require.Len(t, h.Root.Names("/sys/class/mdev_bus"), 16)

	create := func(vf string) error {
		return h.WriteAttr("/sys/bus/pci/devices/"+vf+"/mdev_supported_types/nvidia-713/create", vgpu.NewUUID())
	}
	require.NoError(t, create(fixture.A16VFs[0]))
	require.ErrorIs(t, create(fixture.A16VFs[0]), syscall.ENOSPC, "a VF takes one vGPU")
	for _, vf := range fixture.A16VFs[1:4] {
		require.NoError(t, create(vf))
	}
	require.ErrorIs(t, create(fixture.A16VFs[4]), syscall.ENOSPC, "the GPU takes four A16-4Q")
	g = vgpu.Read(h.Root, fixture.A16)
	for _, p := range g.Parents {
		require.Equal(t, 0, p.Free("nvidia-713"), p.Address)
	}
	first := vgpu.Existing(h.Root, fixture.A16)[0]
	require.NoError(t, h.WriteAttr("/sys/bus/mdev/devices/"+first.Device+"/remove", "1"))
	g = vgpu.Read(h.Root, fixture.A16)
	require.Equal(t, 1, g.Types[2].Available)
	for _, p := range g.Parents {
		want := 0
		if p.Address == first.Parent || p.Address >= fixture.A16VFs[4] {
			want = 1
		}
		require.Equal(t, want, p.Free("nvidia-713"), p.Address)
	}
}
