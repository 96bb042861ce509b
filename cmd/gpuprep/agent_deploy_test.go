package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
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

// daemonSetMounts are the host paths deploy/daemonset.yaml gives the agent
// (hostPath volumes) and whether each is mounted read-only; every one is
// mounted at /host + its host path, where --root=/host reads it.
func daemonSetMounts(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../deploy/daemonset.yaml")
	require.NoError(t, err)
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args         []string `yaml:"args"`
						VolumeMounts []struct {
							Name      string `yaml:"name"`
							MountPath string `yaml:"mountPath"`
							ReadOnly  bool   `yaml:"readOnly"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
					Volumes []struct {
						Name     string `yaml:"name"`
						HostPath struct {
							Path string `yaml:"path"`
						} `yaml:"hostPath"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &ds))
	pod := ds.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	require.Contains(t, pod.Containers[0].Args, "--root=/host")
	host := map[string]string{}
	for _, v := range pod.Volumes {
		require.NotEmpty(t, v.HostPath.Path, "volume %s: only hostPath volumes", v.Name)
		host[v.Name] = v.HostPath.Path
	}
	mounts := map[string]bool{}
	for _, m := range pod.Containers[0].VolumeMounts {
		p, ok := host[m.Name]
		require.True(t, ok, "mount %s: no such volume", m.Name)
		require.Equal(t, "/host"+p, m.MountPath, "the host's %s where --root=/host reads it", p)
		mounts[p] = m.ReadOnly
	}
	return mounts
}

// The DaemonSet's read-only mounts are all the agent reads: for every
// fixture scenario, a root holding only the host paths daemonset.yaml
// mounts (copied as the kubelet bind-mounts them: the path resolved on the
// host, what is below it as it is) gets the same verdict, blockers and
// findings as the whole root. A path the checks read that the manifest
// does not mount shows here as a difference, scenario by scenario. The one
// writable mount is the feature directory.
func TestDaemonSetMountsAreWhatTheAgentReads(t *testing.T) {
	if testing.Short() {
		t.Skip("every fixture scenario, twice")
	}
	mounts := daemonSetMounts(t)
	for p, ro := range mounts {
		require.Equal(t, p != provision.NFDFeatureDir, ro, "%s: only the feature directory is writable", p)
	}
	for _, p := range []string{"/sys", "/proc", "/etc", "/boot", "/lib/modules"} {
		require.Contains(t, mounts, p, "the issue's read-only mounts")
	}
	verdict := func(root string) (string, report.Report) {
		out, errs, _ := gpuprep(t, "check", "--root", root, "-o", "json")
		var rep report.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep), errs)
		var b strings.Builder
		for _, m := range preflight.Modes {
			if mr := rep.Modes[m]; mr != nil {
				fmt.Fprintf(&b, "%s ready=%v blockers=%v unknown=%v\n", m, mr.Ready, mr.Blockers, mr.Unknown)
			}
		}
		for _, f := range rep.Findings {
			fmt.Fprintf(&b, "%s %s %s: %s\n", f.Check, f.Status, f.Subject, f.Message)
		}
		return b.String(), rep
	}
	var differ []string
	for _, name := range fixture.Names() {
		full := fixtureRoot(t, name)
		pod := t.TempDir()
		for p := range mounts {
			src := filepath.Join(full, p)
			if _, err := os.Stat(src); err != nil {
				continue // the kubelet would refuse the pod (type Directory); not this test's point
			}
			dst := filepath.Join(pod, p)
			require.NoError(t, os.MkdirAll(dst, 0o755))
			out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
			require.NoError(t, err, "%s", out)
		}
		want, _ := verdict(full)
		got, _ := verdict(pod)
		if want != got {
			differ = append(differ, name+":\n"+lineDiff(want, got))
		}
	}
	require.Empty(t, differ, "the DaemonSet does not mount what these read:\n%s", strings.Join(differ, "\n"))
}

// lineDiff: the lines only in a ("- ") and only in b ("+ ").
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ia, ib := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !ib[l] {
			out = append(out, "  - "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ia[l] {
			out = append(out, "  + "+l)
		}
	}
	return strings.Join(out, "\n")
}
