package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// The least privilege deploy/rbac.yaml claims, asked of the real
// kube-apiserver's RBAC authorizer (kubetest runs --authorization-mode RBAC)
// with SubjectAccessReviews for the agent's ServiceAccount, as the groups its
// token carries: get nodes and patch nodes/status, nothing else of what an
// agent could want (the other verbs on nodes, their subresources, labels
// through the node object, pods, secrets, the NFD objects).
func TestDeployRBACLeastPrivilege(t *testing.T) {
	s := kubetest.Start(t)
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
