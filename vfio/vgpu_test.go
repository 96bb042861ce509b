package vfio

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// A GPU with live vGPUs (VFs with a vGPU type) and its SR-IOV VFs enabled is
// refused, with or without --force: the refusal names the vGPUs, the VM
// that holds one, and what to do.
func TestBindRefusesAGPUWithLiveSRIOVVGPUs(t *testing.T) {
	t.Parallel()
	k := sim(t, "sriov-vgpu", fixture.SRIOVVGPULive)
	inv := inventory(t, k)
	for _, force := range []bool{false, true} {
		o := opts()
		o.Force = force
		_, err := NewPlan(k.Root, inv, selector(t, "0000:41:00.0"), o)
		var r *Refused
		require.ErrorAs(t, err, &r)
		require.Len(t, r.Reasons, 1)
		msg := r.Reasons[0]
		for _, want := range []string{
			"0000:41:00.0 hosts NVIDIA vGPU: 2 live vGPUs: VF 0000:41:00.4 (vGPU type 1430, in use by 5150 (qemu-system-x86: /dev/vfio/42)), VF 0000:41:00.5 (vGPU type 1430)",
			"4 SR-IOV VFs enabled (0000:41:00.4 … 0000:41:00.7)",
			"unbinding nvidia from it would destroy the vGPUs (under the VMs that use them) and disable the VFs",
			"shut down the VMs that use them",
			"echo 0 > /sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type; echo 0 > /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type",
			"/usr/lib/nvidia/sriov-manage -d 0000:41:00.0",
			"--force does not override this",
		} {
			require.Contains(t, msg, want)
		}
	}
	// the VFs alone (no vGPU on them) are refused too: the unbind disables them
	k = sim(t, "sriov-vgpu")
	_, err := NewPlan(k.Root, inventory(t, k), pci.Selector{}, opts())
	require.ErrorContains(t, err, "0000:41:00.0 hosts NVIDIA vGPU: 4 SR-IOV VFs enabled (0000:41:00.4 … 0000:41:00.7); unbinding nvidia from it would disable the VFs. To give the whole GPU to VFIO: disable the VFs: /usr/lib/nvidia/sriov-manage -d 0000:41:00.0; then bind again")
	require.NotContains(t, err.Error(), "live vGPU")
}

func TestBindRefusesAGPUWithMdevs(t *testing.T) {
	t.Parallel()
	k := sim(t, "mdev-vgpu", fixture.MdevVGPULive)
	inv := inventory(t, k)
	_, err := NewPlan(k.Root, inv, selector(t, "0000:21:00.0"), opts())
	require.ErrorContains(t, err, "0000:21:00.0 hosts NVIDIA vGPU: 4 live vGPUs: mdev "+fixture.MdevVGPULiveUUIDs[0]+" (vGPU type GRID T4-4Q, in use by 6160 (qemu-system-x86: /dev/vfio/90)), mdev "+fixture.MdevVGPULiveUUIDs[1]+" (vGPU type GRID T4-4Q)")
	require.ErrorContains(t, err, "echo 1 > /sys/bus/mdev/devices/"+fixture.MdevVGPULiveUUIDs[3]+"/remove")
	require.NotContains(t, err.Error(), "SR-IOV") // the T4 reports 16 VFs, none enabled
	// the other T4, with mdev types and no mdev, is the GPU's to give away
	p, err := NewPlan(k.Root, inv, selector(t, "0000:41:00.0"), opts())
	require.NoError(t, err)
	require.NotEmpty(t, p.Steps)
}

// vfio unbind leaves a vGPU host's GPU and VFs alone: none is on VFIO
// (the VFs' VFIO driver is nvidia itself).
func TestUnbindLeavesLiveVGPUsAlone(t *testing.T) {
	t.Parallel()
	k := sim(t, "sriov-vgpu", fixture.SRIOVVGPULive)
	for _, s := range []string{"0000:41:00.0", "0000:41:00.4"} {
		_, err := Unbind(context.Background(), env(k), inventory(t, k), selector(t, s), opts())
		require.ErrorIs(t, err, ErrNothing)
	}
	for _, a := range []string{"0000:41:00.0", "0000:41:00.4", "0000:41:00.5"} {
		require.Equal(t, "nvidia", k.Driver(a))
	}
	cur, err := k.Root.ReadString("/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type")
	require.NoError(t, err)
	require.Equal(t, "1430", cur)
}

// Another vendor's SR-IOV device (a NIC with VFs enabled) is refused for its
// VFs, in words that fit it: no vGPU, no sriov-manage.
func TestVFsOfAnotherVendorAreNotVGPU(t *testing.T) {
	r := vgpuReason(nil, VGPUUse{GPU: "0000:3b:00.0", VFs: []string{"0000:3b:00.2", "0000:3b:00.3"}}, "ice", false)
	require.Contains(t, r, "0000:3b:00.0 has 2 SR-IOV VFs enabled (0000:3b:00.2, 0000:3b:00.3); unbinding ice from it would disable them")
	require.Contains(t, r, "echo 0 > /sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs")
	require.NotContains(t, r, "vGPU")
	require.NotContains(t, r, "sriov-manage")
}
