package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// With --kubeconfig, the KubeVirt release assumed is the one the cluster's
// KubeVirt CR reports (status.observedKubeVirtVersion), and the output is
// what that release wants; with no KubeVirt there, the default, saying why.
func TestKubeVirtConfigReadsTheClustersKubeVirt(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	rep := reportFile(t, "hgx-h200", "--mode", "vm-passthrough")

	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", rep, "--kubeconfig", kc)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "# KubeVirt 1.9 assumed (the default: the cluster's KubeVirt CR could not be read")
	require.NotContains(t, out, "featureGates")

	s.MustDo(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json",
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"kubevirts.kubevirt.io"},
"spec":{"group":"kubevirt.io","scope":"Namespaced","names":{"plural":"kubevirts","singular":"kubevirt","kind":"KubeVirt","listKind":"KubeVirtList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	s.MustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"kubevirt"}}`)
	cr := []byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt"},"spec":{},"status":{"observedKubeVirtVersion":"v1.3.1"}}`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if c, _ := s.Do(t, s.Admin, "POST", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts", "application/json", cr); c == 201 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the KubeVirt CRD never became usable")
	}
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", rep, "--kubeconfig", kc)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "# KubeVirt 1.3 assumed (the cluster's KubeVirt CR, status.observedKubeVirtVersion v1.3.1): feature gate GPU (GA from 1.4)")
	require.Contains(t, out, "featureGates:\n        - GPU\n")
	// the flag wins over the cluster
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", rep, "--kubeconfig", kc, "--kubevirt-version", "1.9")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "# KubeVirt 1.9 assumed (--kubevirt-version)")
}
