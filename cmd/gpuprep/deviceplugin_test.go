package main

// kubevirt config and check name resources as the sandbox device plugin
// release does: the GPU Operator's default (v1.6.0, pci.ids 2025.07.11),
// --device-plugin-version, or the release the cluster runs.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// withDeviceID rewrites a report's GPUs as model deviceID, keeping the
// resource name an older gpuprep wrote (named from its newest pci.ids), so
// that kubevirt config must name them again itself.
func withDeviceID(t *testing.T, report, deviceID, staleName string) string {
	t.Helper()
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal(b, &r))
	for _, g := range r["gpus"].([]any) {
		g.(map[string]any)["deviceID"] = deviceID
		g.(map[string]any)["resourceName"] = staleName
	}
	b, err = json.Marshal(r)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), deviceID+".json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// HGX B200 (10de:2909) is newer than v1.6.0's pci.ids: the plugin
// advertises nvidia.com/2909, and so must the patch.
func TestKubeVirtConfigNamesAsTheDevicePlugin(t *testing.T) {
	b200 := withDeviceID(t, reportFile(t, "hgx-h200", "--mode", "vm-passthrough"), "2909", "nvidia.com/GB100_HGX_B200_168GB")
	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", b200)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "- pciVendorSelector: 10DE:2909\n          resourceName: nvidia.com/2909\n")
	require.NotContains(t, out, "GB100_HGX_B200_168GB")
	require.Contains(t, out, "# resource names as NVIDIA's sandbox device plugin v1.6.0 (pci.ids 2025.07.11) names them (what the GPU Operator deploys by default")

	// H200 (2335) is unknown to v1.2.7's pci.ids (2023.11.11), named by v1.2.8's
	h200 := reportFile(t, "hgx-h200", "--mode", "vm-passthrough")
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", h200, "--device-plugin-version", "v1.2.7")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resourceName: nvidia.com/2335\n")
	require.Contains(t, out, "v1.2.7 (pci.ids 2023.11.11) names them (--device-plugin-version)")
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", h200, "--device-plugin-version", "v1.2.8")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resourceName: nvidia.com/GH100_H200_SXM_141GB\n")

	_, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", h200, "--device-plugin-version", "v1.7.0")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--device-plugin-version: sandbox device plugin version "v1.7.0": gpuprep does not know which pci.ids it bundles`)

	// a model the release names with a trailing "_", which kubelet refuses: left out
	a4500 := withDeviceID(t, h200, "24fa", "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU")
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", a4500)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "10DE:24FA")
	require.Contains(t, out, "names device 24fa nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU_, which kubelet refuses")
}

func TestCheckNamesAsTheDevicePluginVersion(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	out, stderr, code := gpuprep(t, "check", "--root", root, "-o", "json", "--device-plugin-version", "v1.2.7")
	require.Contains(t, []int{0, 1, 3}, code, stderr)
	require.Contains(t, out, `"resourceName": "nvidia.com/2335"`)
	_, stderr, code = gpuprep(t, "check", "--root", root, "--device-plugin-version", "v1.2.1")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "releases before v1.2.2 look the device ID up anywhere")
}

// With --kubeconfig: the release the cluster's GPU Operator runs (its
// DaemonSet's image tag), and the entries no node advertises.
func TestKubeVirtConfigReadsTheClustersDevicePlugin(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	b200 := withDeviceID(t, reportFile(t, "hgx-h200", "--mode", "vm-passthrough"), "2901", "nvidia.com/GB100_B200")

	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", b200, "--kubeconfig", kc)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resourceName: nvidia.com/GB100_B200\n")
	require.Contains(t, out, "v1.6.0 (pci.ids 2025.07.11) names them (the GPU Operator's default; no sandbox device plugin DaemonSet")

	s.MustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"gpu-operator"}}`)
	ds := `{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"nvidia-sandbox-device-plugin-daemonset"},
	 "spec":{"selector":{"matchLabels":{"app":"sdp"}},"template":{"metadata":{"labels":{"app":"sdp"}},
	 "spec":{"containers":[{"name":"nvidia-sandbox-device-plugin-ctr","image":"nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.3.0"}]}}}}`
	s.MustDo(t, "POST", "/apis/apps/v1/namespaces/gpu-operator/daemonsets", "application/json", ds)
	s.CreateNode(t, "gpu-1", nil)
	s.MustDo(t, "PATCH", "/api/v1/nodes/gpu-1/status", "application/merge-patch+json",
		`{"status":{"capacity":{"nvidia.com/GB100_B200":"8"},"allocatable":{"nvidia.com/GB100_B200":"8"}}}`)

	// v1.3.0 bundles pci.ids 2024.06.23, which has no B200 yet
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", b200, "--kubeconfig", kc)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resourceName: nvidia.com/2901\n")
	require.Contains(t, out, "v1.3.0 (pci.ids 2024.06.23) names them (the release the cluster runs: DaemonSet gpu-operator/nvidia-sandbox-device-plugin-daemonset")
	require.Contains(t, out, "# permittedHostDevices nvidia.com/2901: no node of 1 advertises it; nodes advertise nvidia.com/GB100_B200\n")

	// an explicit release wins, and says what the cluster runs
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", b200, "--kubeconfig", kc, "--device-plugin-version", "v1.6.0")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "resourceName: nvidia.com/GB100_B200\n")
	require.Contains(t, out, "(--device-plugin-version; the cluster runs v1.3.0")
	require.NotContains(t, out, "no node of")
}
