package vgpu_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// sriov-vgpu's H200 has 4 of its 16 VFs enabled. With no vGPU on them,
// PlanEnableVFs plans sriov-manage -e; with one, it refuses: the kernel
// disables the enabled VFs before enabling more, and the vGPU goes with them.
func TestPlanEnableVFsRefusesWhileVGPUsLive(t *testing.T) {
	h200 := []vgpu.GPUInfo{{Address: "0000:41:00.0", DeviceID: "2335"}}
	for _, tc := range []struct {
		name, current, err string
	}{
		{name: "no vGPUs", current: "0"},
		{name: "a vGPU on a VF", current: "1429", err: "0000:41:00.0 has 4 of its 16 SR-IOV VFs enabled and 1 vGPU on them (NVIDIA H200X-70C on 0000:41:00.5)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, fixture.Build("sriov-vgpu", dir))
			cur := filepath.Join(dir, "sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type")
			require.NoError(t, os.WriteFile(cur, []byte(tc.current+"\n"), 0o644))
			h, err := vgputest.New(dir)
			require.NoError(t, err)
			p, err := vgpu.PlanEnableVFs(context.Background(), effect.Effector{Root: h.Root, Runner: h}, h200)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Empty(t, h.Commands(), "nothing ran")
				return
			}
			require.NoError(t, err)
			require.Contains(t, titles(p), "enable the SR-IOV VFs of 0000:41:00.0")
		})
	}
}
