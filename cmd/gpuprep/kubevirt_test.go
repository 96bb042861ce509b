package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// report writes the JSON report of a fixture scenario to a file.
func reportFile(t *testing.T, scenario string, args ...string) string {
	t.Helper()
	out, stderr, code := gpuprep(t, append([]string{"check", "--root", fixtureRoot(t, scenario), "-o", "json"}, args...)...)
	require.Contains(t, []int{0, 1}, code, stderr)
	p := filepath.Join(t.TempDir(), scenario+".json")
	require.NoError(t, os.WriteFile(p, []byte(out), 0o644))
	return p
}

func TestKubeVirtConfigFromReports(t *testing.T) {
	hgx := reportFile(t, "hgx-h200")
	mdev := reportFile(t, "mdev-vgpu")
	hgx2 := reportFile(t, "hgx-h200") // a second node of the same model: merged
	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", hgx, "--from-report", mdev, "--from-report", hgx2)
	require.Equal(t, 0, code, stderr)
	golden(t, "kubevirt-config.yaml", out)
	_, _, code = gpuprep(t, "kubevirt", "config")
	require.Equal(t, 2, code)
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"apiVersion":"v9","kind":"ReadinessReport"}`), 0o644))
	_, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", bad)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `apiVersion "v9"`)
}

func TestOperatorValuesFromReports(t *testing.T) {
	a := reportFile(t, "vfio-bound", "--mode", "vm-passthrough")
	b := reportFile(t, "hgx-h200", "--mode", "vm-passthrough")
	c := reportFile(t, "sriov-vgpu", "--mode", "vm-vgpu")
	out, stderr, code := gpuprep(t, "operator", "values", "--from-report", a, "--from-report", b, "--from-report", c)
	require.Equal(t, 0, code, stderr)
	golden(t, "operator-values.yaml", out)
	_, stderr, code = gpuprep(t, "operator", "values", "--from-report", reportFile(t, "hgx-h200"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "have no mode")
}

// The PF of an SR-IOV vGPU GPU is never passable, and NVSwitches go to VMs
// only with --nvswitch (as plan/apply --nvswitch).
func TestKubeVirtConfigPermitsWhatTheModeAllocates(t *testing.T) {
	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", reportFile(t, "sriov-vgpu"))
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "10DE:2335")
	require.NotContains(t, out, "pciVendorSelector")
	require.Contains(t, out, "are left out of pciHostDevices: a vm-vgpu node's GPUs are not passed to VMs whole")

	hgx := reportFile(t, "hgx-h200", "--mode", "vm-passthrough")
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", hgx)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "10DE:22A3")
	require.Contains(t, out, "10DE:2335")
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--nvswitch", "--from-report", hgx)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "pciVendorSelector: 10DE:22A3")
}
