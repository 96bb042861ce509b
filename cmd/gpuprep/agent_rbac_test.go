package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// The least privilege deploy/rbac.yaml claims, asked of the real
// kube-apiserver's RBAC authorizer (kubetest runs --authorization-mode RBAC)
// with SubjectAccessReviews for the agent's ServiceAccount, as the groups its
// token carries: get nodes and patch nodes/status, nothing else of what an
// agent could want (the other verbs on nodes, their subresources, labels
// through the node object, pods, secrets, the NFD objects).
// createDeployRBAC creates every object of deploy/rbac.yaml on s.
func createDeployRBAC(t *testing.T, s *kubetest.Server) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/rbac.yaml")
	require.NoError(t, err)
	paths := map[string]string{
		"Namespace": "/api/v1/namespaces", "ServiceAccount": "/api/v1/namespaces/gpuprep/serviceaccounts",
		"ClusterRole":        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
		"ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
	}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		p, ok := paths[yamlKind(string(doc))]
		require.True(t, ok, yamlKind(string(doc)))
		s.MustDo(t, "POST", p+"?fieldValidation=Strict", "application/yaml", string(doc))
	}
}

func TestDeployRBACLeastPrivilege(t *testing.T) {
	s := kubetest.Start(t)
	createDeployRBAC(t, s)
	allowed := func(verb, group, resource, sub, ns string) bool {
		review := map[string]any{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
			"spec": map[string]any{
				"user":   "system:serviceaccount:gpuprep:gpuprep-agent",
				"groups": []string{"system:serviceaccounts", "system:serviceaccounts:gpuprep", "system:authenticated"},
				"resourceAttributes": map[string]string{"verb": verb, "group": group, "resource": resource,
					"subresource": sub, "namespace": ns, "name": "gpu-1"},
			},
		}
		body, err := json.Marshal(review)
		require.NoError(t, err)
		out := s.MustDo(t, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "application/json", string(body))
		var r struct {
			Status struct {
				Allowed bool `json:"allowed"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(out, &r))
		return r.Status.Allowed
	}
	// The authorizer reads roles and bindings from its informers, which see
	// the objects just created a moment later (under load, after the first
	// review): wait until a permission the role grants is seen.
	for deadline := time.Now().Add(30 * time.Second); !allowed("patch", "", "nodes", "status", ""); time.Sleep(100 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the ClusterRoleBinding never reached the RBAC authorizer")
	}
	var got []string
	for _, a := range [][5]string{
		{"get", "", "nodes", "", ""}, {"patch", "", "nodes", "status", ""},
		{"list", "", "nodes", "", ""}, {"watch", "", "nodes", "", ""}, {"patch", "", "nodes", "", ""},
		{"update", "", "nodes", "", ""}, {"delete", "", "nodes", "", ""}, {"create", "", "nodes", "", ""},
		{"update", "", "nodes", "status", ""}, {"get", "", "nodes", "status", ""}, {"get", "", "nodes", "proxy", ""},
		{"get", "", "secrets", "", "gpuprep"}, {"list", "", "pods", "", "gpuprep"}, {"create", "", "pods", "", "gpuprep"},
		{"create", "", "pods", "eviction", "gpuprep"}, {"patch", "apps", "daemonsets", "", "gpuprep"},
		{"create", "", "events", "", "gpuprep"}, {"get", "", "configmaps", "", "gpuprep"},
		{"create", "nfd.k8s-sigs.io", "nodefeatures", "", "gpuprep"}, {"patch", "nfd.k8s-sigs.io", "nodefeaturerules", "", ""},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""}, {"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"impersonate", "", "users", "", ""}, {"create", "", "serviceaccounts", "token", "gpuprep"},
	} {
		if allowed(a[0], a[1], a[2], a[3], a[4]) {
			got = append(got, fmt.Sprintf("%s %s/%s/%s", a[0], a[1], a[2], a[3]))
		}
	}
	require.Equal(t, []string{"get /nodes/", "patch /nodes/status"}, got)
}

// agentToken is a token of deploy/rbac.yaml's ServiceAccount, as the
// kubelet gets one for the pod: the TokenRequest API (authentication.k8s.io/v1
// TokenRequest on serviceaccounts/token), signed by the apiserver's service
// account key.
func agentToken(t *testing.T, s *kubetest.Server) string {
	t.Helper()
	out := s.MustDo(t, "POST", "/api/v1/namespaces/gpuprep/serviceaccounts/gpuprep-agent/token", "application/json",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}`)
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(out, &tr))
	require.NotEmpty(t, tr.Status.Token)
	return tr.Status.Token
}

// The agent does its work with deploy/rbac.yaml's grants and nothing more:
// as the DaemonSet's ServiceAccount (a token from the TokenRequest API) it
// sets GPUPrepReady False on a node without /dev/kvm, then True once the
// node is fixed (the transition kept by the get), and changes nothing else
// of the Node. Without the ClusterRoleBinding the same run is refused and
// says which grant it lacks: the grants are needed, not only sufficient.
func TestAgentRunsWithTheDeployedRBAC(t *testing.T) {
	s := kubetest.Start(t)
	createDeployRBAC(t, s)
	s.CreateNode(t, "gpu-sa", map[string]string{"zone": "r1"})
	kc := s.Kubeconfig(t, "gpuprep-agent", agentToken(t, s))
	root := fixtureRoot(t, "vfio-bound")
	kvm := filepath.Join(root, "dev/kvm")
	off := filepath.Join(root, "kvm.off")
	require.NoError(t, os.Rename(kvm, off))
	client, err := kube.NewClient(s.AdminKubeconfig(t))
	require.NoError(t, err)
	once := func() (string, int) {
		out, errs, code := gpuprep(t, "agent", "--once", "--root", root, "--kubeconfig", kc, "--node", "gpu-sa", "--mode", "vm-passthrough")
		return out + errs, code
	}
	status := func() *kube.Condition {
		c, err := client.NodeCondition(context.Background(), "gpu-sa", ConditionType)
		require.NoError(t, err)
		require.NotNil(t, c)
		return c
	}

	// the binding reaches the RBAC authorizer's informers a moment after it is created
	var out string
	var code int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if out, code = once(); code == 0 || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, 0, code, out)
	c := status()
	require.Equal(t, "False", c.Status)
	require.Contains(t, c.Message, "kvm.device")

	require.NoError(t, os.Rename(off, kvm))
	out, code = once()
	require.Equal(t, 0, code, out)
	c = status()
	require.Equal(t, "True", c.Status, c.Message)
	labels, _ := s.NodeLabels(t, "gpu-sa")
	require.Equal(t, map[string]string{"zone": "r1"}, labels)

	s.MustDo(t, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpuprep-agent", "", "")
	require.NoError(t, os.Rename(kvm, off))
	eventually(t, func() string {
		if out, code = once(); code != exitUnknown {
			return fmt.Sprintf("without the binding: exit %d\n%s", code, out)
		}
		return ""
	})
	require.Contains(t, out, "RBAC: grant verb")
	require.Equal(t, "True", status().Status, "the refused run changed nothing")
}
