package vgpu_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
)

// The boot unit waits for VF mdev parents only where a GPU's VFs are its
// mdev parents (an A16): not on a T4 (the PF is), nor on the
// vendor-specific interface (no mdev).
func TestApplyUnitWaitsForVFParents(t *testing.T) {
	require.Equal(t, []string{fixture.A16}, vgpu.VFParentGPUs(layoutHost(t, "vfmdev-vgpu").Root))
	require.Empty(t, vgpu.VFParentGPUs(layoutHost(t, "mdev-vgpu").Root))
	require.Empty(t, vgpu.VFParentGPUs(layoutHost(t, "sriov-vgpu").Root))

	args := []string{"vgpu", "apply", "-f", vgpu.PersistedConfig, "-c", "a16"}
	plain := string(vgpu.ApplyUnitContent(vgpu.InstalledBinary, args, nil))
	require.NotContains(t, plain, "ExecStartPre")
	u := string(vgpu.ApplyUnitContent(vgpu.InstalledBinary, args, []string{fixture.A16}))
	require.Contains(t, u, "\nTimeoutStartSec=5min\nExecStartPre=/bin/sh -c 'for i in 1 2 3")
	require.Contains(t, u, "do [ -d /sys/bus/pci/devices/0000:b2:00.0/virtfn0/mdev_supported_types ] && exit 0; sleep 2; done; "+
		`echo "0000:b2:00.0: its VFs are not mdev parents (VFs enabled? nvidia_vgpu_vfio loaded?)" >&2; exit 1'`+"\n"+
		"ExecStart=/usr/local/libexec/gpuprep/gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml -c a16\n")
	require.Equal(t, strings.Count(u, "ExecStartPre="), 1)
}
