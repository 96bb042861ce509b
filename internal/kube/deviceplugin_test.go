package kube

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// sandboxDaemonSetJSON is the GPU Operator's sandbox device plugin DaemonSet
// (assets/state-sandbox-device-plugin/0500_daemonset.yaml at a22dbf67),
// reduced to what the API server requires, with the image the operator
// writes for values.yaml's sandboxDevicePlugin (repository/image:version).
const sandboxDaemonSetJSON = `{"apiVersion":"apps/v1","kind":"DaemonSet",
 "metadata":{"name":"nvidia-sandbox-device-plugin-daemonset","labels":{"app":"nvidia-sandbox-device-plugin-daemonset"}},
 "spec":{"selector":{"matchLabels":{"app":"nvidia-sandbox-device-plugin-daemonset"}},
  "template":{"metadata":{"labels":{"app":"nvidia-sandbox-device-plugin-daemonset"}},
   "spec":{"nodeSelector":{"nvidia.com/gpu.deploy.sandbox-device-plugin":"true"},
    "initContainers":[{"name":"vfio-pci-validation","image":"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.0"}],
    "containers":[{"name":"nvidia-sandbox-device-plugin-ctr","image":"nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.4.0"}]}}}}`

func TestSandboxDevicePluginAndNodeResourcesAgainstARealAPIServer(t *testing.T) {
	s := kubetest.Start(t)
	ctx := context.Background()
	admin, err := NewClient(s.AdminKubeconfig(t))
	require.NoError(t, err)

	imgs, err := admin.SandboxDevicePluginImages(ctx)
	require.NoError(t, err)
	require.Empty(t, imgs)

	s.MustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"gpu-operator"}}`)
	s.MustDo(t, "POST", "/apis/apps/v1/namespaces/gpu-operator/daemonsets", "application/json", sandboxDaemonSetJSON)
	imgs, err = admin.SandboxDevicePluginImages(ctx)
	require.NoError(t, err)
	require.Equal(t, []DevicePluginImage{{Namespace: "gpu-operator", Image: "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.4.0"}}, imgs)

	s.CreateNode(t, "gpu-1", nil)
	s.CreateNode(t, "gpu-2", nil)
	s.MustDo(t, "PATCH", "/api/v1/nodes/gpu-1/status", "application/merge-patch+json",
		`{"status":{"capacity":{"cpu":"64","nvidia.com/2909":"8"},"allocatable":{"cpu":"63","nvidia.com/2909":"8"}}}`)
	res, err := admin.NodeResources(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"gpu-1": {"cpu", "nvidia.com/2909"}, "gpu-2": nil}, res)

	// a DaemonSet of that name that is not the operator's: said, not guessed
	s.MustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"other"}}`)
	s.MustDo(t, "POST", "/apis/apps/v1/namespaces/other/daemonsets", "application/json",
		strings.Replace(sandboxDaemonSetJSON, `"name":"nvidia-sandbox-device-plugin-ctr"`, `"name":"plugin"`, 1))
	_, err = admin.SandboxDevicePluginImages(ctx)
	require.ErrorContains(t, err, "DaemonSet other/nvidia-sandbox-device-plugin-daemonset has no container nvidia-sandbox-device-plugin-ctr")

	viewer, err := NewClient(s.Kubeconfig(t, "viewer", s.View))
	require.NoError(t, err)
	_, err = viewer.SandboxDevicePluginImages(ctx)
	require.ErrorContains(t, err, `forbidden: viewer may not list daemonsets (RBAC: grant verb "list" on resource "daemonsets" in API group "apps")`)
}
