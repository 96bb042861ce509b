package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
)

// mixedConfigFile asks for an H200X-35C and an H200X-70C on each GPU.
func mixedConfigFile(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  m:\n  - devices: all\n    vgpu-devices:\n      \"H200X-35C\": 1\n      \"H200X-70C\": 1\n"), 0o644))
	return cfg
}

func heteroMode(t *testing.T, n *vgpuNode) string {
	t.Helper()
	h, err := vgpu.QueryHetero(context.Background(), n.h, "0000:41:00.0")
	require.NoError(t, err)
	return h.Mode
}

// gpuprep vgpu apply of mixed sizes on one GPU: the dry run shows the
// heterogeneous mode step before the writes, the apply runs and checks it
// and then both writes succeed; rollback removes the vGPUs, then turns
// the mode off. A GPU without the capability is refused before anything is
// written.
func TestVGPUApplyMixedSizes(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	n, d := simulatedVGPUNode(t, root)
	d.vgpuSysfs = func(*host.Root) vgpu.AttrWriter { return n }
	d.vgpuApplyRunner = func(*host.Root) host.Runner { return n }
	cfg := mixedConfigFile(t)

	out, errs, code := gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "m", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "would run nvidia-smi vgpu -shm 1 -i 00000000:41:00.0  (turn on the heterogeneous vGPU mode of 0000:41:00.0 for vGPUs of framebuffer sizes 35 and 70; then check nvidia-smi -q reads vGPU Heterogeneous Mode: Enabled)\n"+
		"would write 1430 > /sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type  (make VF 0000:41:00.4 a NVIDIA H200X-35C)\n"+
		"would write 1429 > /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type  (make VF 0000:41:00.5 a NVIDIA H200X-70C)\n", out)
	require.Equal(t, "Disabled", heteroMode(t, n))

	out, errs, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "m")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "ran nvidia-smi vgpu -shm 1 -i 00000000:41:00.0  (turn on the heterogeneous vGPU mode of 0000:41:00.0 for vGPUs of framebuffer sizes 35 and 70; nvidia-smi -q reads vGPU Heterogeneous Mode: Enabled)\nwrote 1430 > ")
	require.Equal(t, map[string]string{"0000:41:00.4": "1430", "0000:41:00.5": "1429"}, vgpusOf(t, root))
	require.Equal(t, "Enabled", heteroMode(t, n))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "nvidia-smi vgpu -shm 0 -i 00000000:41:00.0")
	require.Empty(t, vgpusOf(t, root))
	require.Equal(t, "Disabled", heteroMode(t, n))
	require.Equal(t, "nvidia-smi vgpu -shm 0 -i 00000000:41:00.0", n.h.Commands()[len(n.h.Commands())-1])

	// no capability: refused, nothing written
	require.NoError(t, n.h.SetHeterogeneousUnsupported("0000:41:00.0"))
	out, errs, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "m")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "0000:41:00.0: vGPUs of different framebuffer sizes (NVIDIA H200X-35C, NVIDIA H200X-70C) on one GPU need its heterogeneous vGPU mode (nvidia-smi vgpu -shm 1 -i 00000000:41:00.0), which it does not support (nvidia-smi -q: Heterogenous Multi-vGPU: Not Supported): give it types of one framebuffer size")
	require.Empty(t, out)
	require.Empty(t, vgpusOf(t, root))
}

// apply --mode vm-vgpu: the mode is set after sriov-manage -e (which
// resets it) and before the vGPUs are created.
func TestApplyVMVGPUMixedSizesAfterSRIOVManage(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	require.NoError(t, fixture.New(root).Mkdir("/sys/module/pci_pf_stub").Err())
	n, d := simulatedVGPUNode(t, root)
	require.NoError(t, n.h.SetHeterogeneous("0000:41:00.0", true)) // sriov-manage resets it
	cfg := mixedConfigFile(t)
	out, errs, code := gpuprepWith(t, d, "apply", "--yes", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "m")
	require.Equal(t, 0, code, out+errs)
	cmds := n.h.Commands()
	e := slices.Index(cmds, "/usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	m := slices.Index(cmds, "nvidia-smi vgpu -shm 1 -i 00000000:41:00.0")
	require.True(t, e >= 0 && m > e, "%q", cmds)
	require.Equal(t, map[string]string{"0000:41:00.4": "1430", "0000:41:00.5": "1429"}, vgpusOf(t, root))
	require.Equal(t, "Enabled", heteroMode(t, n))
}
