package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// An installed vGPU manager whose daemon cannot be seen (no process list
// under /proc) is not a pass: VMs start vGPUs only through nvidia-vgpu-mgr.
func TestVGPUManagerDaemonUnknownIsNoPass(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("mdev-vgpu", dir))
	require.NoError(t, fixture.New(dir).Remove("/proc/1").Remove("/proc/2211").Remove("/proc/2240").Err())
	_, res := runRoot(t, dir)
	f := find(res, want{"vgpu.manager", "nvidia vGPU manager", "", ""})
	require.Len(t, f, 1)
	require.Equal(t, preflight.Warn, f[0].Status, f[0].Message)
	require.Contains(t, f[0].Message, "no process list under /proc")
	require.Contains(t, f[0].Remedy, "systemctl status nvidia-vgpu-mgr")
}
