package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// one returns the single finding of check on subject that counts for mode.
func one(t *testing.T, res *preflight.Result, check, subject string, mode preflight.Mode) preflight.Finding {
	t.Helper()
	f := find(res, want{check, subject, "", mode})
	require.Len(t, f, 1, "%s %s (%s): %+v", check, subject, mode, res.Findings)
	return f[0]
}

// A GPU on nouveau: only vm-passthrough is fixed by binding it to vfio-pci;
// containers need nouveau blacklisted (the operator's driver container then
// takes the GPU), vm-vgpu the vGPU manager (whose install blacklists it).
func TestNouveauRemedyFollowsTheMode(t *testing.T) {
	_, res := run(t, "vgpu-fresh-mdev")
	c := one(t, res, "driver.nouveau", "0000:21:00.0", preflight.Container)
	require.Equal(t, preflight.Fail, c.Status)
	require.Equal(t, []preflight.Mode{preflight.Container}, c.Modes)
	require.False(t, c.Fixable)
	require.Empty(t, c.FixCommand)
	require.Contains(t, c.Remedy, "`blacklist nouveau` and `options nouveau modeset=0`")
	require.Contains(t, c.Remedy, "regenerate the initramfs")
	require.NotContains(t, c.Remedy, "vfio")

	p := one(t, res, "driver.nouveau", "0000:21:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, p.Status)
	require.True(t, p.Fixable)
	require.Equal(t, "gpuprep vfio bind --persist", p.FixCommand)

	v := one(t, res, "driver.nouveau", "0000:21:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, v.Status)
	require.Equal(t, "gpuprep vgpu install --driver NVIDIA-Linux-x86_64-VER-vgpu-kvm.run", v.FixCommand)
	require.NotContains(t, v.Remedy, "vfio")
	for _, m := range preflight.Modes {
		require.Contains(t, res.Modes[m].Blockers, "driver.nouveau", m)
	}
}
