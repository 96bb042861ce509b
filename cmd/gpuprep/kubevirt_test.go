package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// report writes the JSON report of a fixture scenario to a file.
func reportFile(t *testing.T, scenario string, args ...string) string {
	t.Helper()
	out, stderr, code := gpuprep(t, append([]string{"check", "--root", fixtureRoot(t, scenario), "-o", "json"}, args...)...)
	require.Contains(t, []int{0, 1, 3}, code, stderr)
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

// fleetReportFile writes a FleetReport of the evaluated reports (name: file)
// and of hosts that were not evaluated (name: status).
func fleetReportFile(t *testing.T, evaluated map[string]string, missing map[string]string) string {
	t.Helper()
	var hosts []map[string]any
	for name, f := range evaluated {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		hosts = append(hosts, map[string]any{"name": name, "status": "evaluated", "report": json.RawMessage(b)})
	}
	for name, st := range missing {
		hosts = append(hosts, map[string]any{"name": name, "status": st, "error": "connection refused"})
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "gpuprep/v1", "kind": "FleetReport", "hosts": hosts})
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "fleet.json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// A merge patch replaces pciHostDevices whole: a patch without the GPUs of
// hosts that could not be evaluated would drop their models from the CR. So
// kubevirt config (and operator values) refuse a partial view (exit 3, as
// fleet check) unless --allow-partial; --apply too, before any API call.
func TestKubeVirtConfigRefusesAPartialFleet(t *testing.T) {
	fleet := fleetReportFile(t, map[string]string{"hgx": reportFile(t, "hgx-h200", "--mode", "vm-passthrough")}, map[string]string{"dead": "unreachable"})
	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", fleet)
	require.Equal(t, exitUnknown, code, stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, "1 host could not be evaluated: dead (unreachable: connection refused)")
	require.Contains(t, stderr, "give --allow-partial")
	_, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", fleet, "--apply", "--kubeconfig", "/nonexistent")
	require.Equal(t, exitUnknown, code, "refused before the API is asked: %s", stderr)
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", fleet, "--allow-partial")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "# --allow-partial: 1 host not evaluated, their GPUs are not in the patch: dead (unreachable: connection refused)")
	require.Contains(t, out, "pciVendorSelector: 10DE:2335")

	_, stderr, code = gpuprep(t, "operator", "values", "--from-report", fleet)
	require.Equal(t, exitUnknown, code, stderr)
	require.Contains(t, stderr, "1 host could not be evaluated: dead")
	out, stderr, code = gpuprep(t, "operator", "values", "--from-report", fleet, "--allow-partial")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "defaultWorkload: vm-passthrough")

	// -i: a host that cannot be evaluated (no sshd needed), the only one
	inv := filepath.Join(t.TempDir(), "inv.yaml")
	require.NoError(t, os.WriteFile(inv, []byte("apiVersion: gpuprep/v1\nkind: Inventory\nhosts:\n  - {name: dead, address: 127.0.0.1, port: 1}\n"), 0o644))
	out, stderr, code = gpuprep(t, "kubevirt", "config", "-i", inv, "--retries", "0", "--allow-partial")
	require.Equal(t, exitUnknown, code, stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, "no host could be evaluated: dead")
}

// A GPU whose IOMMU group holds other devices cannot be passed through: its
// model is permitted only for hosts that can, left out when none can, and
// the command exits 1 naming the GPUs.
func TestKubeVirtConfigNonViableGPUs(t *testing.T) {
	shared := reportFile(t, "consumer-shared-group", "--mode", "vm-passthrough")
	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", shared)
	require.Equal(t, exitNotReady, code, stderr)
	require.NotContains(t, out, "pciVendorSelector: 10DE:2684")
	require.Contains(t, out, "# 10DE:2684 (nvidia.com/AD102_GEFORCE_RTX_4090) is left out of pciHostDevices: no host can pass it through: desktop 0000:02:00.0 (IOMMU group 5 shared with 0000:00:14.0, 0000:00:17.0, 0000:03:00.0)")
	require.Contains(t, stderr, "1 GPU of vm-passthrough hosts cannot be passed through")
	require.Contains(t, stderr, "desktop 0000:02:00.0")

	// another host of the same model that can pass it through
	b, err := os.ReadFile(shared)
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal(b, &r))
	r["host"].(map[string]any)["name"] = "desktop-2"
	for _, g := range r["gpus"].([]any) {
		g.(map[string]any)["passthroughViable"] = true
	}
	b, err = json.Marshal(r)
	require.NoError(t, err)
	viable := filepath.Join(t.TempDir(), "viable.json")
	require.NoError(t, os.WriteFile(viable, b, 0o644))
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", shared, "--from-report", viable, "-o", "json")
	require.Equal(t, exitNotReady, code, stderr)
	require.Contains(t, out, `"pciVendorSelector": "10DE:2684"`)
	require.Contains(t, stderr, "gpuprep: note: 10DE:2684 (nvidia.com/AD102_GEFORCE_RTX_4090) is permitted for the hosts that can pass it through (desktop-2), but these cannot: desktop 0000:02:00.0")
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", viable)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "10DE:2684")
}

// The operator does not deploy what the hosts have installed themselves: a
// host vGPU manager (vgpu.manager) disables vgpuManager, a host NVIDIA
// driver (hostDriver) driver; when only some hosts have it, a note names
// the nodes to keep the daemonset off.
func TestOperatorValuesHostInstalledDrivers(t *testing.T) {
	mdev := reportFile(t, "mdev-vgpu", "--mode", "vm-vgpu")
	out, stderr, code := gpuprep(t, "operator", "values", "--from-report", mdev)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "vgpuManager:\n  enabled: false\n")
	require.Contains(t, out, "# vgpuManager is disabled: every vm-vgpu host has the vGPU manager installed on the host itself")
	require.Contains(t, out, "nvidia-vgpu-mgr running")
	require.Contains(t, out, "vgpuDeviceManager:\n  enabled: true\n")

	fresh := reportFile(t, "hgx-h200", "--mode", "vm-vgpu") // no vGPU manager yet
	out, stderr, code = gpuprep(t, "operator", "values", "--from-report", mdev, "--from-report", fresh)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "vgpuManager:\n  enabled: true\n")
	require.Contains(t, out, "# label 1 node nvidia.com/gpu.deploy.vgpu-manager=false: the vGPU manager is installed on the host")

	root := fixtureRoot(t, "hgx-h200")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/bin/nvidia-smi"), []byte("#!/bin/sh\n"), 0o755))
	rout, stderr, code := gpuprep(t, "check", "--root", root, "--mode", "container", "-o", "json")
	require.Contains(t, []int{0, 1}, code, stderr)
	hostDrv := filepath.Join(t.TempDir(), "host-driver.json")
	require.NoError(t, os.WriteFile(hostDrv, []byte(rout), 0o644))
	require.Contains(t, rout, `"hostDriver": {`)
	out, stderr, code = gpuprep(t, "operator", "values", "--from-report", hostDrv)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "driver:\n  enabled: false\n")
	require.Contains(t, out, "# driver is disabled: every container host has the NVIDIA driver installed on the host itself")
	out, stderr, code = gpuprep(t, "operator", "values", "--from-report", hostDrv, "--from-report", reportFile(t, "hgx-h200", "--mode", "container"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "driver:\n  enabled: true\n")
	require.Contains(t, out, "nvidia.com/gpu.deploy.driver=false")
}
