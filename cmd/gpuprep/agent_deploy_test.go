package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// The manifests of deploy/ are what the real kube-apiserver accepts: each
// object of rbac.yaml is created, daemonset.yaml's DaemonSet passes the
// server's validation (dry run), and the DaemonSet grants no privilege.
func TestDeployManifestsValidate(t *testing.T) {
	s := kubetest.Start(t)
	paths := map[string]string{
		"Namespace": "/api/v1/namespaces", "ServiceAccount": "/api/v1/namespaces/gpuprep/serviceaccounts",
		"ClusterRole":        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
		"ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
		"DaemonSet":          "/apis/apps/v1/namespaces/gpuprep/daemonsets?dryRun=All&fieldValidation=Strict",
	}
	var kinds []string
	for _, f := range []string{"rbac.yaml", "daemonset.yaml"} {
		b, err := os.ReadFile("../../deploy/" + f)
		require.NoError(t, err)
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			kind := yamlKind(string(doc))
			p, ok := paths[kind]
			require.True(t, ok, "%s: kind %q", f, kind)
			s.MustDo(t, "POST", p, "application/yaml", string(doc))
			kinds = append(kinds, kind)
		}
	}
	require.Equal(t, []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"}, kinds)

	ds, err := os.ReadFile("../../deploy/daemonset.yaml")
	require.NoError(t, err)
	for _, want := range []string{"privileged: false", "allowPrivilegeEscalation: false", "readOnlyRootFilesystem: true", "capabilities: {drop: [ALL]}", "--root=/host"} {
		require.Contains(t, string(ds), want)
	}
	for _, l := range strings.Split(string(ds), "\n") {
		if strings.Contains(l, "mountPath: /host/") && !strings.Contains(l, "features.d") {
			require.Contains(t, l, "readOnly: true", "only the NFD feature directory is writable: %s", l)
		}
	}
	for _, no := range []string{"hostNetwork", "hostPID", "hostIPC", "privileged: true", "add:"} {
		require.NotContains(t, string(ds), no)
	}
}

func yamlKind(doc string) string {
	for _, l := range strings.Split(doc, "\n") {
		if k, ok := strings.CutPrefix(l, "kind: "); ok {
			return strings.TrimSpace(k)
		}
	}
	return ""
}

// nodeFeatureRule is the part of NFD's NodeFeatureRule (api/nfd/v1alpha1
// types.go at 76e6cc8c: Rule.Taints, MatchAny, MatchFeatures, MatchExpression
// {op, value}) the example uses, decoded strictly.
type nodeFeatureRule struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Rules []struct {
			Name   string `yaml:"name"`
			Taints []struct {
				Key    string `yaml:"key"`
				Value  string `yaml:"value"`
				Effect string `yaml:"effect"`
			} `yaml:"taints"`
			MatchAny []struct {
				MatchFeatures []struct {
					Feature          string `yaml:"feature"`
					MatchExpressions map[string]struct {
						Op    string   `yaml:"op"`
						Value []string `yaml:"value"`
					} `yaml:"matchExpressions"`
				} `yaml:"matchFeatures"`
			} `yaml:"matchAny"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

// The NodeFeatureRule example matches the labels gpuprep writes: the ready
// label of the mode, "not true" or absent, on an NVIDIA GPU node, and taints
// with a key NFD may set.
func TestDeployNodeFeatureRule(t *testing.T) {
	b, err := os.ReadFile("../../deploy/nodefeaturerule.yaml")
	require.NoError(t, err)
	var r nodeFeatureRule
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&r))
	require.Equal(t, "nfd.k8s-sigs.io/v1alpha1", r.APIVersion)
	require.Equal(t, "NodeFeatureRule", r.Kind)
	require.Len(t, r.Spec.Rules, 1)
	rule := r.Spec.Rules[0]
	require.Len(t, rule.Taints, 1)
	require.True(t, strings.HasPrefix(rule.Taints[0].Key, report.NFDPrefix), "NFD taints only in feature.node.kubernetes.io/")
	require.Contains(t, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}, rule.Taints[0].Effect)
	ready := report.NFDReadyLabel(preflight.VMPassthrough)
	var ops []string
	for _, alt := range rule.MatchAny {
		var local, pciDev bool
		for _, mf := range alt.MatchFeatures {
			switch mf.Feature {
			case "local.label":
				e, ok := mf.MatchExpressions[ready]
				require.True(t, ok, "matches %s", ready)
				ops = append(ops, e.Op+" "+strings.Join(e.Value, ","))
				local = true
			case "pci.device":
				require.Equal(t, []string{"10de"}, mf.MatchExpressions["vendor"].Value)
				pciDev = true
			default:
				t.Fatalf("feature %q", mf.Feature)
			}
		}
		require.True(t, local && pciDev)
	}
	require.ElementsMatch(t, []string{"NotIn true", "DoesNotExist "}, ops)
}
