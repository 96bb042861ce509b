package vgputest_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

const (
	t4     = "0000:21:00.0"
	create = "/sys/bus/pci/devices/" + t4 + "/mdev_supported_types/"
	u1     = "11111111-2222-4333-8444-555555555555"
	u2     = "11111111-2222-4333-8444-666666666666"
	u3     = "11111111-2222-4333-8444-777777777777"
)

// t4Host is vgpu-fresh-mdev with the vGPU manager installed and the T4 on
// nvidia, before nvidia_vgpu_vfio is loaded; mdevctl defines u3.
func t4Host(t *testing.T) *vgputest.Host {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build("vgpu-fresh-mdev", dir))
	kver := "5.15.0-91-generic"
	b := fixture.New(dir)
	b.File("/lib/modules/"+kver+"/modules.dep", "kernel/drivers/video/nvidia.ko:\nkernel/drivers/video/nvidia-vgpu-vfio.ko: kernel/drivers/video/nvidia.ko\n")
	b.Mkdir("/sys/bus/pci/drivers/nvidia")
	dev := "/sys/devices/pci0000:20/0000:20:01.0/" + t4
	b.Remove(dev+"/driver").Link(dev+"/driver", "/sys/bus/pci/drivers/nvidia")
	b.File(vgputest.MdevctlDir+"/"+t4+"/"+u3, `{"mdev_type": "nvidia-223", "start": "auto"}`)
	require.NoError(t, b.Err())
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	require.Equal(t, "nvidia", h.Root.LinkBase("/sys/bus/pci/devices/"+t4+"/driver"))
	return h
}

func avail(t *testing.T, h *vgputest.Host) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ty := range vgpu.Read(h.Root, t4).Types {
		out[ty.Name] = ty.Available
	}
	return out
}

func devices(h *vgputest.Host) map[string]string {
	out := map[string]string{}
	for _, i := range vgpu.Existing(h.Root, t4) {
		out[i.Device] = i.Type
	}
	return out
}

func TestMdevLifecycle(t *testing.T) {
	h := t4Host(t)
	ctx := context.Background()
	require.Equal(t, "", vgpu.Read(h.Root, t4).Interface, "no mdev parent before nvidia_vgpu_vfio")
	require.ErrorIs(t, h.WriteAttr(create+"nvidia-224/create", u1), syscall.ENOENT, "no create attribute yet")

	// loading nvidia_vgpu_vfio registers the T4, and mdevctl starts u3
	_, err := h.Run(ctx, "modprobe", "nvidia_vgpu_vfio")
	require.NoError(t, err)
	g := vgpu.Read(h.Root, t4)
	require.Equal(t, "mdev", g.Interface)
	require.Len(t, g.Types, 5)
	require.True(t, vgpu.ReadManager(h.Root).Installed)
	require.Equal(t, map[string]string{u3: "GRID T4-2Q"}, devices(h))
	require.Equal(t, map[string]int{"GRID T4-1Q": 0, "GRID T4-2Q": 7, "GRID T4-4Q": 0, "GRID T4-8Q": 0, "GRID T4-16Q": 0}, avail(t, h))

	// one type at a time; malformed and duplicate UUIDs refused
	require.ErrorIs(t, h.WriteAttr(create+"nvidia-224/create", u1), syscall.ENOSPC)
	require.ErrorIs(t, h.WriteAttr(create+"nvidia-223/create", "not-a-uuid"), syscall.EINVAL)
	require.ErrorIs(t, h.WriteAttr(create+"nvidia-223/create", u3), syscall.EEXIST)
	require.NoError(t, h.WriteAttr(create+"nvidia-223/create", u1))
	require.Equal(t, map[string]string{u1: "GRID T4-2Q", u3: "GRID T4-2Q"}, devices(h))
	require.Equal(t, 6, avail(t, h)["GRID T4-2Q"])
	grp := h.Root.LinkBase("/sys/bus/mdev/devices/" + u1 + "/iommu_group")
	require.NotEqual(t, h.Root.LinkBase("/sys/bus/mdev/devices/"+u3+"/iommu_group"), grp, "every mdev its own group")
	require.True(t, h.Root.Exists("/dev/vfio/"+grp))

	// the module is held while mdevs exist
	_, err = h.Run(ctx, "modprobe", "-r", "nvidia_vgpu_vfio")
	require.ErrorContains(t, err, "in use")

	// removing both frees every type again
	require.ErrorIs(t, h.WriteAttr("/sys/bus/mdev/devices/"+u2+"/remove", "1"), syscall.ENOENT)
	for _, u := range []string{u1, u3} {
		require.NoError(t, h.WriteAttr("/sys/bus/mdev/devices/"+u+"/remove", "1"))
	}
	require.Empty(t, devices(h))
	require.False(t, h.Root.Exists("/dev/vfio/"+grp))
	require.Equal(t, map[string]int{"GRID T4-1Q": 16, "GRID T4-2Q": 8, "GRID T4-4Q": 4, "GRID T4-8Q": 2, "GRID T4-16Q": 1}, avail(t, h))
	require.NoError(t, h.WriteAttr(create+"nvidia-226/create", u2))
	require.ErrorIs(t, h.WriteAttr(create+"nvidia-226/create", u1), syscall.ENOSPC, "a T4 holds one 16Q")
	require.NoError(t, h.WriteAttr("/sys/bus/mdev/devices/"+u2+"/remove", "1"))

	_, err = h.Run(ctx, "modprobe", "-r", "nvidia_vgpu_vfio")
	require.NoError(t, err)
	require.Equal(t, "", vgpu.Read(h.Root, t4).Interface)
	require.Empty(t, h.Root.Names("/sys/class/mdev_bus"))
}

func TestMdevKilledCreateHeals(t *testing.T) {
	h := t4Host(t)
	_, err := h.Run(context.Background(), "modprobe", "nvidia_vgpu_vfio")
	require.NoError(t, err)
	// a create killed before its /sys/bus/mdev/devices link: no device, and
	// the stale available_instances of a kill after it is recomputed
	dev := "/sys/devices/pci0000:20/0000:20:01.0/" + t4 + "/" + u1
	require.NoError(t, fixture.New(h.Dir).Link(dev+"/mdev_type", filepath.Dir(dev)+"/mdev_supported_types/nvidia-223").File(create+"nvidia-223/available_instances", "1\n").Err())
	require.Equal(t, map[string]string{u3: "GRID T4-2Q"}, devices(h))
	require.NoError(t, h.WriteAttr(create+"nvidia-223/create", u1))
	require.Equal(t, map[string]string{u1: "GRID T4-2Q", u3: "GRID T4-2Q"}, devices(h))
	require.Equal(t, 6, avail(t, h)["GRID T4-2Q"])
}

func TestCurrentVGPUType(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("vgpu-fresh-sriov", dir))
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	require.NoError(t, vgputest.AddVFs(fixture.New(dir), h.Root, "0000:41:00.0"))
	vf := "/sys/bus/pci/devices/0000:41:00.4/nvidia/"
	require.NoError(t, h.WriteAttr(vf+"current_vgpu_type", "1155"))
	cur, _ := h.Root.ReadString(vf + "current_vgpu_type")
	require.Equal(t, "1155", cur)
	require.Empty(t, vgpu.ParseCreatable(mustRead(t, h, vf+"creatable_vgpu_types")))
	require.NoError(t, h.WriteAttr(vf+"current_vgpu_type", "0"))
	require.Len(t, vgpu.ParseCreatable(mustRead(t, h, vf+"creatable_vgpu_types")), 2)
	require.ErrorIs(t, h.WriteAttr("/sys/bus/pci/devices/0000:41:00.0/driver_override", "vfio-pci"), vgputest.ErrNotSimulated)
}

func mustRead(t *testing.T, h *vgputest.Host, p string) string {
	t.Helper()
	b, err := h.Root.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

// modprobe -r unbinds the module's devices; loading nvidia binds the NVIDIA
// GPUs no driver holds before it lists the module.
func TestModprobeBindsAndUnbinds(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("vgpu-fresh-mdev", dir))
	require.NoError(t, fixture.New(dir).File("/lib/modules/5.15.0-91-generic/modules.dep", "kernel/drivers/video/nvidia.ko:\n").Err())
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	ctx := context.Background()
	require.Equal(t, "nouveau", h.Root.LinkBase("/sys/bus/pci/devices/"+t4+"/driver"))
	_, err = h.Run(ctx, "modprobe", "nvidia")
	require.NoError(t, err)
	require.Equal(t, "nouveau", h.Root.LinkBase("/sys/bus/pci/devices/"+t4+"/driver"), "nouveau still holds it")
	_, err = h.Run(ctx, "modprobe", "-r", "nvidia")
	require.NoError(t, err)

	_, err = h.Run(ctx, "modprobe", "-r", "nouveau")
	require.NoError(t, err)
	require.Equal(t, "", h.Root.LinkBase("/sys/bus/pci/devices/"+t4+"/driver"))
	require.False(t, h.Root.Exists("/sys/module/nouveau"))
	_, err = h.Run(ctx, "modprobe", "nvidia")
	require.NoError(t, err)
	require.Equal(t, "nvidia", h.Root.LinkBase("/sys/bus/pci/devices/"+t4+"/driver"))
	require.True(t, h.Root.Exists("/sys/bus/pci/drivers/nvidia/"+t4))
	require.True(t, h.Root.Exists("/sys/module/nvidia"))
}
