package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
)

// vfio bind (dry run too) and plan --mode vm-passthrough refuse a GPU whose
// vGPUs VMs run on; plan --mode container leaves it (and its VFs) alone.
func TestVFIOBindRefusesAGPUWithLiveVGPUs(t *testing.T) {
	d := realDeps()
	simulated(t, d)
	root := fixtureRoot(t, "sriov-vgpu")
	b := fixture.New(root)
	fixture.SRIOVVGPULive(b)
	b.File(vgpu.TypeNames, "# vGPU type id : name\n1430 : NVIDIA H200X-35C\n")
	require.NoError(t, b.Err())
	for _, args := range [][]string{
		{"vfio", "bind", "--root", root, "--select", "0000:41:00.0", "--dry-run"},
		{"vfio", "bind", "--root", root, "--select", "0000:41:00.0", "--force"},
		{"plan", "--root", root, "--mode", "vm-passthrough"},
	} {
		out, errs, code := gpuprepWith(t, d, args...)
		require.NotEqual(t, 0, code, args)
		require.NotContains(t, out, "driver/unbind", args)
		require.Contains(t, errs, "0000:41:00.0 hosts NVIDIA vGPU: 2 live vGPUs: VF 0000:41:00.4 (vGPU type 1430 (NVIDIA H200X-35C), in use by 5150 (qemu-system-x86: /dev/vfio/42))", args)
		require.Contains(t, errs, "/usr/lib/nvidia/sriov-manage -d 0000:41:00.0", args)
	}
	k, err := fixture.NewKernel(root)
	require.NoError(t, err)
	require.Equal(t, "nvidia", k.Driver("0000:41:00.0"))

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "container")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "/sys/bus/pci/devices/0000:41:00.", "container mode does not touch the GPU, its VFs or vGPUs")
	// and says the node is not ready for containers: the GPU is on the vGPU
	// manager's driver (a node runs one GPU workload type)
	require.Contains(t, out, "not ready after apply: vfio.binding 0000:41:00.0: on the NVIDIA vGPU manager's nvidia driver")
	require.NotContains(t, out, "label the node")
}
