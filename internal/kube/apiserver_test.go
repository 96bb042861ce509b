package kube

// Integration tests against a real kube-apiserver and etcd on loopback
// (internal/kube/kubetest: they skip without them, unless
// GPUPREP_REQUIRE_KUBE=1, set by make test, makes that a failure).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
	"github.com/gpuprep/gpuprep/report"
)

// nodeLabelsVia reads a node's labels and resourceVersion through this
// package's own client.
func nodeLabelsVia(t *testing.T, s *kubetest.Server, name string) (map[string]string, string) {
	c, err := NewClient(s.Kubeconfig(t, "admin", s.Admin))
	require.NoError(t, err)
	n, err := c.getNode(context.Background(), name)
	require.NoError(t, err)
	return n.Metadata.Labels, n.Metadata.ResourceVersion
}

func TestLabelNodeAgainstARealAPIServer(t *testing.T) {
	s := kubetest.Start(t)
	ctx := context.Background()
	admin, err := NewClient(s.Kubeconfig(t, "admin", s.Admin))
	require.NoError(t, err)
	require.Equal(t, "admin", admin.User)
	s.CreateNode(t, "gpu-1", map[string]string{"zone": "r1", WorkloadLabel: "container", VGPUConfigLabel: "A10-12Q"})

	// create/update: workload label changed, stale vGPU config removed, others kept
	res, err := admin.LabelNode(ctx, "gpu-1", setPT, []string{VGPUConfigLabel}, false)
	require.NoError(t, err)
	require.True(t, res.Changed)
	labels, rv := nodeLabelsVia(t, s, "gpu-1")
	require.Equal(t, "vm-passthrough", labels[WorkloadLabel])
	require.NotContains(t, labels, VGPUConfigLabel)
	require.Equal(t, "r1", labels["zone"])

	// no-op: nothing written, resourceVersion unchanged
	res, err = admin.LabelNode(ctx, "gpu-1", setPT, []string{VGPUConfigLabel}, false)
	require.NoError(t, err)
	require.False(t, res.Changed)
	_, rv2 := nodeLabelsVia(t, s, "gpu-1")
	require.Equal(t, rv, rv2)

	// server-side dry run: validated, not persisted
	res, err = admin.LabelNode(ctx, "gpu-1", setVGPU, nil, true)
	require.NoError(t, err)
	require.True(t, res.Changed)
	labels, _ = nodeLabelsVia(t, s, "gpu-1")
	require.Equal(t, "vm-passthrough", labels[WorkloadLabel])

	// a conflict: another writer changes the Node between gpuprep's read and
	// its patch; the patch carries the old resourceVersion, is refused (409)
	// and retried on a fresh read, and nobody's change is lost
	calls := 0
	admin.beforePatch = func() {
		calls++
		if calls == 1 {
			s.MustDo(t, "PATCH", "/api/v1/nodes/gpu-1", "application/merge-patch+json", `{"metadata":{"labels":{"rack":"r7"}}}`)
		}
	}
	res, err = admin.LabelNode(ctx, "gpu-1", []Label{{Key: WorkloadLabel, Value: "container"}}, nil, false)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, 2, calls, "retried once after the conflict")
	labels, _ = nodeLabelsVia(t, s, "gpu-1")
	require.Equal(t, "container", labels[WorkloadLabel])
	require.Equal(t, "r7", labels["rack"], "the other writer's change survives")
	admin.beforePatch = nil

	// a user without patch on nodes
	viewer, err := NewClient(s.Kubeconfig(t, "viewer", s.View))
	require.NoError(t, err)
	_, err = viewer.LabelNode(ctx, "gpu-1", setVGPU, nil, false)
	require.ErrorContains(t, err, `forbidden: viewer may not patch nodes (RBAC: grant verb "patch" on resource "nodes" in API group "")`)

	// a missing node
	_, err = admin.LabelNode(ctx, "gpu-404", setPT, nil, false)
	require.ErrorContains(t, err, `node "gpu-404" not found on `+s.URL)

	// wrong credentials
	bad, err := NewClient(s.Kubeconfig(t, "nobody", "wrongtoken"))
	require.NoError(t, err)
	_, err = bad.LabelNode(ctx, "gpu-1", setPT, nil, false)
	require.ErrorContains(t, err, "unauthorized")
}

func TestLabelNodeAPIServerDown(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kubeconfig")
	port := kubetest.FreePort(t) // nothing listens there now
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:%d\", insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", port)), 0o600))
	c, err := NewClient(p)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.LabelNode(ctx, "gpu-1", setPT, nil, false)
	require.ErrorContains(t, err, fmt.Sprintf("API server https://127.0.0.1:%d unreachable", port))
}

const kubeVirtCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"kubevirts.kubevirt.io"},
"spec":{"group":"kubevirt.io","scope":"Namespaced",
 "names":{"plural":"kubevirts","singular":"kubevirt","kind":"KubeVirt","listKind":"KubeVirtList"},
 "versions":[{"name":"v1","served":true,"storage":true,
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func TestApplyKubeVirtAgainstARealAPIServer(t *testing.T) {
	s := kubetest.Start(t)
	ctx := context.Background()
	s.MustDo(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", kubeVirtCRD)
	s.MustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"kubevirt"}}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := s.Do(t, s.Admin, "POST", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts", "application/json",
			[]byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt"},"spec":{"configuration":{
"developerConfiguration":{"featureGates":["LiveMigration"]},
"permittedHostDevices":{"pciHostDevices":[{"pciVendorSelector":"10DE:1EB8","resourceName":"nvidia.com/TU104GL_Tesla_T4","externalResourceProvider":true},
{"pciVendorSelector":"8086:1592","resourceName":"intel.com/ice","externalResourceProvider":false}]}}}}`))
		if code == 201 {
			break
		}
		require.True(t, time.Now().Before(deadline), "KubeVirt CRD never became usable (last %d)", code)
		time.Sleep(200 * time.Millisecond)
	}
	hosts := []Host{{Name: "n1", Report: sampleReport()}}
	patch, _, _ := KubeVirt(hosts, KubeVirtOptions{})
	admin, err := NewClient(s.Kubeconfig(t, "admin", s.Admin))
	require.NoError(t, err)
	res, err := admin.ApplyKubeVirt(ctx, patch, "", "", false)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, "kubevirt", res.Namespace)
	raw := s.MustDo(t, "GET", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt", "", "")
	var cr kubeVirtCR
	require.NoError(t, json.Unmarshal(raw, &cr))
	require.Equal(t, []string{"LiveMigration"}, cr.Spec.Configuration.DeveloperConfiguration.FeatureGates, "existing gates kept; KubeVirt 1.9 needs no GPU gate")
	require.Equal(t, []PCIHostDevice{
		{"10DE:1EB8", "nvidia.com/TU104GL_TESLA_T4", true}, // the stale mixed-case name corrected in place
		{"8086:1592", "intel.com/ice", false},              // someone else's device kept
		{"10DE:2335", "nvidia.com/GH100_H200_SXM_141GB", true},
	}, cr.Spec.Configuration.PermittedHostDevices.PCIHostDevices)
	res, err = admin.ApplyKubeVirt(ctx, patch, "", "", false)
	require.NoError(t, err)
	require.False(t, res.Changed, "a second apply changes nothing")
	// the release the CR reports is what kubevirt config assumes with a cluster
	rel, err := admin.KubeVirtRelease(ctx, "", "")
	require.NoError(t, err)
	require.Empty(t, rel, "virt-operator has not reported one yet")
	s.MustDo(t, "PATCH", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt", "application/merge-patch+json", `{"status":{"observedKubeVirtVersion":"v1.3.1"}}`)
	rel, err = admin.KubeVirtRelease(ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, "v1.3.1", rel)
	// an older KubeVirt wants the GPU gate, added to the CR's own; and the
	// mdevs of a vGPU node turn KubeVirt's mdev handling off (v1.8 on: the
	// field; the CR's other gates and fields stay)
	old, err := ParseKubeVirtVersion("1.3")
	require.NoError(t, err)
	oldPatch, _, _ := KubeVirt(hosts, KubeVirtOptions{Version: old})
	res, err = admin.ApplyKubeVirt(ctx, oldPatch, "", "", false)
	require.NoError(t, err)
	require.Equal(t, []string{"featureGate GPU"}, res.Added)
	mdev := &report.Report{GPUs: []report.GPU{{VendorID: "10de", DeviceID: "1eb8", ResourceName: "nvidia.com/TU104GL_TESLA_T4",
		VGPU: &report.VGPU{Interface: "mdev", Types: []report.VGPUType{{Name: "GRID T4-1Q", ResourceName: "nvidia.com/GRID_T4-1Q"}}}}}}
	mdevPatch, _, _ := KubeVirt([]Host{{Name: "v1", Report: mdev}}, KubeVirtOptions{})
	res, err = admin.ApplyKubeVirt(ctx, mdevPatch, "", "", false)
	require.NoError(t, err)
	require.Contains(t, res.Added, "mediatedDevicesConfiguration.enabled: false")
	raw = s.MustDo(t, "GET", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt", "", "")
	cr = kubeVirtCR{}
	require.NoError(t, json.Unmarshal(raw, &cr))
	require.Equal(t, []string{"LiveMigration", "GPU"}, cr.Spec.Configuration.DeveloperConfiguration.FeatureGates)
	require.False(t, *cr.Spec.Configuration.MediatedDevicesConfiguration.Enabled)
	res, err = admin.ApplyKubeVirt(ctx, mdevPatch, "", "", false)
	require.NoError(t, err)
	require.False(t, res.Changed, "mdev handling already off: nothing to change")

	viewer, err := NewClient(s.Kubeconfig(t, "viewer", s.View))
	require.NoError(t, err)
	_, err = viewer.ApplyKubeVirt(ctx, patch, "", "", false)
	require.ErrorContains(t, err, `forbidden: viewer may not list kubevirts (RBAC: grant verb "list" on resource "kubevirts" in API group "kubevirt.io")`)
	_, err = admin.ApplyKubeVirt(ctx, patch, "other", "", false)
	require.ErrorContains(t, err, "no KubeVirt resource found")
}
