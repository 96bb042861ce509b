package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// h200ConfigFile is a vgpu-device-manager config for the H200 of sriov-vgpu
// (and one for an H100 PCIe, whose types an H200 does not have).
func h200ConfigFile(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  h200-141c:\n    - devices: all\n      vgpu-devices:\n        H200X-141C: 1\n  h100-80c:\n    - devices: all\n      vgpu-devices:\n        H100-80C: 1\n"), 0o644))
	return cfg
}

// plan judges the vGPU manager by check's evidence: on sriov-vgpu (a
// snapshot: systemctl does not run against it) check finds nvidia-vgpu-mgr
// running under /proc, so plan asks for no --driver; 4 of 16 VFs enabled is
// planned as sriov-manage -e (what vgpu install would still do), not a
// reinstall; a snapshot without /proc does not make the daemon "stopped".
func TestPlanVMVGPUAgreesWithCheckOnTheManager(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	require.NoError(t, fixture.New(root).Mkdir("/sys/module/pci_pf_stub").Err())
	cfg := h200ConfigFile(t)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "h200-141c"}

	out, errs, _ := gpuprep(t, "check", "-v", "--root", root, "--mode", "vm-vgpu")
	require.Contains(t, out, "nvidia-vgpu-mgr running", errs)

	out, errs, code := gpuprep(t, append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p), out)
	require.Equal(t, []string{"vgpu-install", "vgpu-devices", "label"}, p.ids())
	s := p.Steps[0]
	require.Equal(t, "enable the SR-IOV VFs of 0000:41:00.0 (4 of 16 VFs enabled), as gpuprep vgpu install does: the vGPU manager is installed and running", s.Title)
	require.Contains(t, s.Commands, "/usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.Equal(t, "/etc/systemd/system/gpuprep-vgpu-sriov.service", s.Files[0].Path)
	require.True(t, p.Steps[1].Deferred)
	require.Contains(t, p.Steps[1].Title, "planned once the VFs are enabled")

	// the daemon stopped (no such process under /proc): --driver needed,
	// and the message says why
	require.NoError(t, os.RemoveAll(filepath.Join(root, "proc/3120")))
	out, errs, code = gpuprep(t, append([]string{"plan"}, args...)...)
	require.Equal(t, exitUsage, code, out)
	require.Contains(t, errs, "--driver FILE is required: the vGPU manager is not installed and running (the nvidia-vgpu-mgr daemon is not running (no such process under /proc); VFs not all enabled: 0000:41:00.0 (4 of 16 VFs enabled))")

	// no /proc at all: whether it runs is unknown, not "stopped"
	require.NoError(t, os.RemoveAll(filepath.Join(root, "proc/1")))
	out, errs, code = gpuprep(t, append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errs)
	require.NoError(t, json.Unmarshal([]byte(out), &p), out)
	require.Equal(t, "vgpu-install", p.ids()[0])
	require.Contains(t, out, "whether nvidia-vgpu-mgr runs is not known")
}

// apply runs that plan: the VFs enabled through sriov-manage, then the
// vGPUs created on them.
func TestApplyVMVGPUEnablesVFsWithoutDriver(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	require.NoError(t, fixture.New(root).Mkdir("/sys/module/pci_pf_stub").Err())
	n, d := simulatedVGPUNode(t, root)
	cfg := h200ConfigFile(t)
	out, errs, code := gpuprepWith(t, d, "apply", "--yes", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "h200-141c")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, n.h.Commands(), "/usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.NotContains(t, strings.Join(n.h.Commands(), "\n"), "sh ", "no installer run")
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices/0000:41:00.0/sriov_numvfs"))
	require.NoError(t, err)
	require.Equal(t, "16", strings.TrimSpace(string(b)))
	require.Equal(t, "1428", vfType(t, root, "0000:41:00.4"))
	require.FileExists(t, filepath.Join(root, "etc/systemd/system/gpuprep-vgpu-sriov.service"))
	require.Contains(t, out, "vm-vgpu         READY")
}

// A config whose types cannot be the GPUs' is refused by name before the
// vGPU manager runs (no GPU lists types then): H200X types on the H100
// PCIe of vfio-bound; once a GPU lists its types, they decide (sriov-vgpu's
// H200 offers no H100-80C).
func TestPlanVMVGPURefusesTypesOfAnotherBoard(t *testing.T) {
	cfg := h200ConfigFile(t)
	_, errs, code := gpuprep(t, "plan", "--root", fixtureRoot(t, "vfio-bound"), "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "h200-141c")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, cfg+`: config "h200-141c" asks for vGPU types these GPUs cannot have: "H200X-141C" on NVIDIA GH100 [H100 PCIe] 0000:11:00.0, 0000:21:00.0, 0000:31:00.0, 0000:41:00.0`)

	root := fixtureRoot(t, "sriov-vgpu")
	require.NoError(t, fixture.New(root).Mkdir("/sys/module/pci_pf_stub").Err())
	_, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "h100-80c")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, `config "h100-80c" asks for vGPU types these GPUs cannot have: "H100-80C" on NVIDIA GH100 [H200 SXM 141GB] 0000:41:00.0`)
}
