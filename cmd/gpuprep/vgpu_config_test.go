package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// shippedVGPUConfig writes data.config.yaml of the GPU Operator's own
// ConfigMap (vgpu/testdata/shipped) to a file, as the operator mounts it.
func shippedVGPUConfig(t *testing.T) string {
	b, err := os.ReadFile("../../vgpu/testdata/shipped/gpu-operator-default-vgpu-devices-config.yaml")
	require.NoError(t, err)
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cm))
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(cm.Data["config.yaml"]), 0o644))
	return p
}

// The GPU Operator's shipped config plans unchanged on a node it fits: its
// "default" config gives each T4 (0x1EB810DE) two T4-8Q (nvidia-225 in
// the fixture), as vgpu-device-manager would.
func TestShippedVGPUConfigPlansOnT4s(t *testing.T) {
	root := fixtureRoot(t, "mdev-vgpu")
	cfg := shippedVGPUConfig(t)
	out, stderr, code := gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "default", "--dry-run")
	require.Equal(t, 0, code, stderr)
	for _, gpu := range []string{"0000:21:00.0", "0000:41:00.0"} {
		re := regexp.MustCompile(`would write <uuid> > /sys/bus/pci/devices/` + regexp.QuoteMeta(gpu) + `/mdev_supported_types/nvidia-225/create`)
		require.Len(t, re.FindAllString(out, -1), 2, out)
	}
	out, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "T4-16Q", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Len(t, regexp.MustCompile(`nvidia-226/create`).FindAllString(out, -1), 2, out)
	// a config for another board: refused by what the GPU offers
	_, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "A10-4Q", "--dry-run")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `0000:21:00.0 cannot create vGPU type "A10-4Q"`)
	// --select 1eb8 narrows the GPUs; indices still count every GPU
	sel := filepath.Join(t.TempDir(), "sel.yaml")
	require.NoError(t, os.WriteFile(sel, []byte("version: v1\nvgpu-configs:\n  second:\n    - devices: [1]\n      vgpu-devices: {T4-4Q: 4}\n"), 0o644))
	out, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", sel, "-c", "second", "--dry-run", "--select", "0000:41:00.0")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "/sys/bus/pci/devices/0000:41:00.0/mdev_supported_types/nvidia-224/create")
	_, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", sel, "-c", "second", "--dry-run", "--select", "0000:21:00.0")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `config "second" matches none of the selected GPUs (0000:21:00.0 (index 0, 0x1EB810DE:0x`)
	require.Contains(t, stderr, "gpuprep: note: "+sel+`: config "second" names GPU 0000:41:00.0 (index 1), which --select leaves out: left alone`)
}

// vgpu-devices: {} clears a GPU: assert fails while it has vGPUs (as
// vgpu-device-manager's assert, VGPUConfig.Equals), and --prune removes
// those no VM holds.
func TestVGPUConfigThatClearsAGPU(t *testing.T) {
	root := fixtureRoot(t, "mdev-vgpu")
	b := fixture.New(root)
	fixture.MdevVGPULive(b)
	require.NoError(t, b.Err())
	cfg := filepath.Join(t.TempDir(), "clear.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  none:\n    - devices: all\n      vgpu-devices: {}\n"), 0o644))
	out, _, code := gpuprep(t, "vgpu", "assert", "--root", root, "-f", cfg, "-c", "none")
	require.Equal(t, 1, code)
	require.Contains(t, out, `vGPU config "none" is not applied: 0 vGPUs missing, 4 not in the config`)
	out, stderr, code := gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "none", "--prune", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Len(t, regexp.MustCompile(`would write 1 > /sys/bus/mdev/devices/[0-9a-f-]+/remove`).FindAllString(out, -1), 3, out)
	require.Contains(t, stderr, fixture.MdevVGPULiveUUIDs[0]+" (GRID T4-4Q) is not in config \"none\" but in use by 6160")
	// the other T4 has none: nothing to do there, and it is fine to be named
	require.NotContains(t, out, "0000:41:00.0")
}
