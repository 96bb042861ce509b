package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

func TestVGPUApplyPruneAndPersist(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	write := func(body string) {
		require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  h200:\n    - devices: all\n      vgpu-devices:\n"+body), 0o644))
	}
	write("        \"H200X-70C\": 2\n")
	_, stderr, code := gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200")
	require.Equal(t, 0, code, stderr)

	// a VM holds VF .4 (group 42)
	b := fixture.New(root)
	b.File("/proc/999/comm", "qemu-kvm\n").Mkdir("/proc/999/fd")
	require.NoError(t, b.Err())
	require.NoError(t, os.Symlink("/dev/vfio/42", filepath.Join(root, "proc/999/fd/3")))

	write("        \"H200X-35C\": 1\n")
	out, stderr, code := gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "0000:41:00.5 (NVIDIA H200X-70C) is not in config \"h200\"; left alone (--prune removes it)")
	require.NotContains(t, out, "> /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type")
	out, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--dry-run", "--prune")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "0000:41:00.4 (NVIDIA H200X-70C) is not in config \"h200\" but in use by 999 (qemu-kvm: /dev/vfio/42); kept")
	require.Contains(t, out, "would write 0 > /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type  (remove the NVIDIA H200X-70C of VF 0000:41:00.5)\n"+
		"would write 1430 > /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type  (make VF 0000:41:00.5 a NVIDIA H200X-35C)\n")

	// --persist: config copy and unit, enabled through systemctl
	h, err := vgputest.New(root)
	require.NoError(t, err)
	oldR, oldB := vgpuApplyRunner, gpuprepBinary
	t.Cleanup(func() { vgpuApplyRunner, gpuprepBinary = oldR, oldB })
	vgpuApplyRunner = func(*host.Root) host.Runner { return h }
	gpuprepBinary = func() string { return "/usr/local/bin/gpuprep" }
	out, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--prune", "--persist", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "would write /etc/systemd/system/gpuprep-vgpu-apply.service\n--- /dev/null\n")
	require.Contains(t, out, "+ExecStart=/usr/local/bin/gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml -c h200 --prune\n")
	require.Contains(t, out, "+After=gpuprep-vgpu-sriov.service nvidia-vgpud.service nvidia-vgpu-mgr.service\n")
	require.Contains(t, stderr, "/usr/local/bin/gpuprep, which is not in this root")
	require.Empty(t, h.Commands())

	b.File("/usr/local/bin/gpuprep", "")
	b.File("/etc/systemd/system/gpuprep-vgpu-sriov.service", "")
	require.NoError(t, b.Err())
	out, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--persist")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "persisted: gpuprep-vgpu-apply.service re-applies config \"h200\" at boot")
	require.Equal(t, []string{"systemctl daemon-reload", "systemctl enable gpuprep-vgpu-apply.service"}, h.Commands())
	c, err := os.ReadFile(filepath.Join(root, "etc/gpuprep/vgpu-config.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(c), "H200X-35C")
	out, stderr, code = gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--persist")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "persisted: gpuprep-vgpu-apply.service is in place and enabled")
	require.Len(t, h.Commands(), 2)
}
