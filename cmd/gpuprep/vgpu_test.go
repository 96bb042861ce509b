package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVGPUTypesAndAssert(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	out, stderr, code := gpuprep(t, "vgpu", "types", "--root", root)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "0000:41:00.0  sriov      1428  NVIDIA H200X-141C  4     nvidia.com/NVIDIA_H200X-141C", "one on each of its 4 VFs with no type")
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  h200:\n    - devices: all\n      vgpu-devices:\n        \"H200X-70C\": 2\n"), 0o644))
	_, _, code = gpuprep(t, "vgpu", "assert", "--root", root, "-f", cfg, "-c", "h200")
	require.Equal(t, 1, code)
	out, _, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--dry-run")
	require.Equal(t, 0, code)
	require.Contains(t, out, "would write 1429 > /sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type")
	_, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "nope")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `no vgpu-config "nope" (have h200)`)
	_, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg)
	require.Equal(t, 2, code, stderr)
}
