package main

// deploy/nodefeaturerule.yaml and gpuprep's feature file held against Node
// Feature Discovery v0.19.0, the NFD the GPU Operator deploys
// (NVIDIA/gpu-operator v26.7.0, deployments/gpu-operator/Chart.yaml:
// dependency node-feature-discovery 0.19.0):
//   - the rule is created on the real kube-apiserver with NFD's own CRD
//     installed (testdata/nfd/nfd-api-crds.yaml, NFD's file unchanged): the
//     server's structural-schema validation is the oracle for its shape;
//   - what the rule matches is evaluated with NFD's matching semantics, read in
//     kubernetes-sigs/node-feature-discovery v0.19.0 (45d276ed). NFD's module is
//     not served by the module proxy, so they are restated here (not copied),
//     and held against the cases of NFD's own TestEvaluateMatchExpression;
//   - the feature file gpuprep writes is read as NFD's local source reads it
//     (source/local/local.go at v0.19.0), the expiry directive included.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// installNFDCRDs creates NFD v0.19.0's CustomResourceDefinitions on s and
// waits until the NodeFeatureRule resource is served.
func installNFDCRDs(t *testing.T, s *kubetest.Server) {
	t.Helper()
	b, err := os.ReadFile("../../testdata/nfd/nfd-api-crds.yaml")
	require.NoError(t, err)
	var names []string
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		if yamlKind(string(doc)) != "CustomResourceDefinition" {
			continue
		}
		out := s.MustDo(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?fieldValidation=Strict", "application/yaml", string(doc))
		var crd struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(out, &crd))
		names = append(names, crd.Metadata.Name)
	}
	require.Contains(t, names, "nodefeaturerules.nfd.k8s-sigs.io")
	eventually(t, func() string {
		code, out := s.Do(t, s.Admin, "GET", "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules", "", nil)
		if code != 200 {
			return fmt.Sprintf("nodefeaturerules not served: %d %s", code, out)
		}
		return ""
	})
}

// The example rule is a NodeFeatureRule that NFD's own CRD accepts, with no
// field the schema does not know (fieldValidation=Strict); the same request
// with a wrong operator or a misspelt field is refused, so the schema is
// really applied. (NFD's CRD does not enumerate a taint's effect: a typo there
// is created; TestDeployNodeFeatureRule checks the effect.)
func TestDeployNodeFeatureRuleAgainstNFDsCRD(t *testing.T) {
	s := kubetest.Start(t)
	installNFDCRDs(t, s)
	rule, err := os.ReadFile("../../deploy/nodefeaturerule.yaml")
	require.NoError(t, err)
	const path = "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules?fieldValidation=Strict"

	for name, bad := range map[string]string{
		"an operator NFD does not have": strings.Replace(string(rule), "op: NotIn", "op: NotEqual", 1),
		"a misspelt field":              strings.Replace(string(rule), "matchExpressions:", "matchExpression:", 1),
	} {
		require.NotEqual(t, string(rule), bad, name)
		code, out := s.Do(t, s.Admin, "POST", path, "application/yaml", []byte(bad))
		require.Contains(t, []int{400, 422}, code, "%s must be refused: %d %s", name, code, out)
	}

	s.MustDo(t, "POST", path, "application/yaml", string(rule))
	// what the server stored is what the file says (nothing pruned as unknown)
	var stored struct {
		Spec json.RawMessage `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(s.MustDo(t, "GET", "/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules/gpuprep-not-ready-vm-passthrough", "", ""), &stored))
	var file struct {
		Spec any `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(rule, &file))
	want, err := json.Marshal(file.Spec)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(stored.Spec))
}

// nfdFeatures is the part of NFD's Features (api/nfd/v1alpha1 types.go) the
// rule reads: attribute features (local.label) and instance features
// (pci.device).
type nfdFeatures struct {
	attributes map[string]map[string]string
	instances  map[string][]map[string]string
}

type nfdExpr struct {
	Op    string   `yaml:"op"`
	Value []string `yaml:"value"`
}

// nfdEvalExpr is NFD's evaluateMatchExpression (expression.go) for the
// operators the example uses: Exists/DoesNotExist look only at whether the
// name is there (and take no values); In/NotIn need values and match only a
// name that is there -- NotIn on an absent label is false, which is why the
// rule has a second DoesNotExist alternative. Any other operator is an error
// here (not restated).
func nfdEvalExpr(e nfdExpr, present bool, value string) (bool, error) {
	switch e.Op {
	case "Exists", "DoesNotExist":
		if len(e.Value) != 0 {
			return false, fmt.Errorf("op %s takes no value", e.Op)
		}
		return present == (e.Op == "Exists"), nil
	case "In", "NotIn":
		if len(e.Value) == 0 {
			return false, fmt.Errorf("op %s needs a value", e.Op)
		}
		if !present {
			return false, nil
		}
		in := false
		for _, v := range e.Value {
			in = in || v == value
		}
		return in == (e.Op == "In"), nil
	}
	return false, fmt.Errorf("op %s not restated from NFD", e.Op)
}

// nfdMatchTerm is NFD's evaluateFeatureMatcher for one term with MatchMulti
// (expression.go): a feature the node does not have matches nothing; an
// attribute feature matches when every expression matches its value; an
// instance feature when one instance matches every expression.
func nfdMatchTerm(feature string, exprs map[string]nfdExpr, f nfdFeatures) (bool, error) {
	feature = strings.ToLower(feature)
	attrs, okA := f.attributes[feature]
	insts, okI := f.instances[feature]
	if !okA && !okI {
		return false, nil
	}
	all := func(vals map[string]string) (bool, error) {
		for name, e := range exprs {
			v, ok := vals[name]
			m, err := nfdEvalExpr(e, ok, v)
			if err != nil || !m {
				return false, err
			}
		}
		return true, nil
	}
	if okA {
		if m, err := all(attrs); err != nil || m {
			return m, err
		}
	}
	for _, in := range insts {
		if m, err := all(in); err != nil || m {
			return m, err
		}
	}
	return false, nil
}

// nfdTaints is what NFD's Execute (rule.go) gives the node for r: the rule's
// taints when one matchAny alternative matches (every term of it: a logical
// AND), none otherwise.
func nfdTaints(t *testing.T, r nodeFeatureRule, f nfdFeatures) []string {
	t.Helper()
	var taints []string
	for _, rule := range r.Spec.Rules {
		matched := len(rule.MatchAny) == 0
		for _, alt := range rule.MatchAny {
			ok := true
			for _, term := range alt.MatchFeatures {
				exprs := map[string]nfdExpr{}
				for k, v := range term.MatchExpressions {
					exprs[k] = nfdExpr{Op: v.Op, Value: v.Value}
				}
				m, err := nfdMatchTerm(term.Feature, exprs, f)
				require.NoError(t, err)
				ok = ok && m
			}
			matched = matched || ok
		}
		if matched {
			for _, ta := range rule.Taints {
				taints = append(taints, ta.Key+"="+ta.Value+":"+ta.Effect)
			}
		}
	}
	return taints
}

// The restatement agrees with NFD's own expectations: the In, NotIn, Exists
// and DoesNotExist rows of TestEvaluateMatchExpression
// (pkg/apis/nfd/nodefeaturerule/expression_test.go at v0.19.0, lines 68-87:
// name, values, input, valid, result).
func TestNFDMatchExpressionAsNFDTestsIt(t *testing.T) {
	for _, c := range []struct {
		name   string
		op     string
		values []string
		input  string
		valid  bool
		want   bool
	}{
		{"MatchIn-1", "In", []string{"1"}, "2", false, false},
		{"MatchIn-2", "In", []string{"1"}, "2", true, false},
		{"MatchIn-3", "In", []string{"1", "2", "3"}, "2", false, false},
		{"MatchIn-4", "In", []string{"1", "2", "3"}, "2", true, true},
		{"MatchNotIn-1", "NotIn", []string{"2"}, "2", false, false},
		{"MatchNotIn-2", "NotIn", []string{"1"}, "2", true, true},
		{"MatchNotIn-3", "NotIn", []string{"1", "2", "3"}, "2", false, false},
		{"MatchNotIn-4", "NotIn", []string{"1", "2", "3"}, "2", true, false},
		{"MatchExists-1", "Exists", nil, "", false, false},
		{"MatchExists-2", "Exists", nil, "", true, true},
		{"MatchDoesNotExist-1", "DoesNotExist", nil, "", false, true},
		{"MatchDoesNotExist-2", "DoesNotExist", nil, "", true, false},
	} {
		got, err := nfdEvalExpr(nfdExpr{Op: c.op, Value: c.values}, c.valid, c.input)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	// the error rows: In/NotIn without values, DoesNotExist with one
	for _, e := range []nfdExpr{{Op: "In"}, {Op: "NotIn"}, {Op: "DoesNotExist", Value: []string{"1"}}} {
		_, err := nfdEvalExpr(e, true, "val")
		require.Error(t, err, e.Op)
	}
}

// pciDevices are the pci.device instances NFD's pci source reads from root's
// sysfs (source/pci/utils.go readSinglePciAttribute: "0x" stripped, class cut
// to its first four hex digits).
func pciDevices(t *testing.T, root string) []map[string]string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, "sys/bus/pci/devices/*"))
	require.NoError(t, err)
	var out []map[string]string
	for _, d := range dirs {
		attrs := map[string]string{}
		for _, a := range []string{"class", "vendor", "device"} {
			b, err := os.ReadFile(filepath.Join(d, a))
			require.NoError(t, err)
			v := strings.TrimSpace(strings.TrimPrefix(string(b), "0x"))
			if a == "class" && len(v) > 4 {
				v = v[:4]
			}
			attrs[a] = v
		}
		out = append(out, attrs)
	}
	require.NotEmpty(t, out, "fixture root without PCI devices")
	return out
}

func readRule(t *testing.T) nodeFeatureRule {
	t.Helper()
	b, err := os.ReadFile("../../deploy/nodefeaturerule.yaml")
	require.NoError(t, err)
	var r nodeFeatureRule
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&r))
	return r
}

// End to end on NFD's semantics: gpuprep agent --once writes the feature file
// of a fixture node (what the timer of apply --nfd-timer runs); NFD's local
// source reads it; NFD's rule evaluation with that node's pci.device
// instances taints the node that is not ready, not the one that is, and the
// one whose file expired (its refresher stopped) or is missing.
func TestNodeFeatureRuleTaintsTheNodeNotReady(t *testing.T) {
	rule := readRule(t)
	taint := "feature.node.kubernetes.io/gpuprep-not-ready=vm-passthrough:NoSchedule"
	ready := report.NFDReadyLabel(preflight.VMPassthrough)
	node := func(breakKVM bool) (root string, file []byte) {
		root = fixtureRoot(t, "vfio-bound")
		if breakKVM {
			require.NoError(t, os.Remove(filepath.Join(root, "dev/kvm")))
		}
		out, errs, code := gpuprep(t, "agent", "--once", "--root", root, "--mode", "vm-passthrough", "--feature-file", "default")
		require.Equal(t, 0, code, out+errs)
		file, err := os.ReadFile(filepath.Join(root, "etc/kubernetes/node-feature-discovery/features.d/gpuprep"))
		require.NoError(t, err)
		return root, file
	}
	features := func(root string, file []byte, at time.Time) nfdFeatures {
		labels, errs := nfdLocalLabels(file, at)
		require.Empty(t, errs, "nfd-worker would log these for:\n%s", file)
		return nfdFeatures{
			// local.label is always there, empty without files (local.go Discover, NewAttributeFeatures)
			attributes: map[string]map[string]string{"local.label": labels},
			instances:  map[string][]map[string]string{"pci.device": pciDevices(t, root)},
		}
	}
	now := time.Now()

	root, file := node(false)
	f := features(root, file, now)
	require.Equal(t, "true", f.attributes["local.label"][ready], "%s", file)
	require.Empty(t, nfdTaints(t, rule, f), "a ready node is not tainted")

	broken, bfile := node(true)
	f = features(broken, bfile, now)
	require.Equal(t, "false", f.attributes["local.label"][ready])
	require.Equal(t, "fail", f.attributes["local.label"][report.NFDPrefix+"gpuprep.check.kvm.device"])
	require.Equal(t, []string{taint}, nfdTaints(t, rule, f), "a node not ready is tainted")

	// the ready node's file, read after its expiry: NFD drops its labels, and the node is tainted
	require.Equal(t, []string{taint}, nfdTaints(t, rule, features(root, file, now.Add(time.Hour))))
	// no file at all
	require.Equal(t, []string{taint}, nfdTaints(t, rule, features(root, nil, now)))

	// a node without an NVIDIA display or 3D controller is never tainted
	f = features(broken, bfile, now)
	var other []map[string]string
	for _, d := range f.instances["pci.device"] {
		if d["vendor"] != "10de" {
			other = append(other, d)
		}
	}
	f.instances["pci.device"] = other
	require.Empty(t, nfdTaints(t, rule, f))
}

// The feature file's expiry directive is one NFD parses: the labels are there
// until the expiry and gone after it (with a directive NFD did not parse they
// would never leave the node); check -o nfd writes the same format.
func TestFeatureFileExpiresAsNFDReadsIt(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	before := time.Now()
	out, errs, code := gpuprep(t, "agent", "--once", "--root", root, "--mode", "vm-passthrough", "--feature-file", "default", "--interval", "5m")
	require.Equal(t, 0, code, out+errs)
	file, err := os.ReadFile(filepath.Join(root, "etc/kubernetes/node-feature-discovery/features.d/gpuprep"))
	require.NoError(t, err)

	labels, perr := nfdLocalLabels(file, before)
	require.Empty(t, perr)
	require.Equal(t, "true", labels[report.NFDReadyLabel(preflight.VMPassthrough)])
	require.Contains(t, labels, report.NFDPrefix+"gpuprep.version")
	for k := range labels {
		require.True(t, strings.HasPrefix(k, report.NFDPrefix+"gpuprep."), k)
	}
	kept, dropped := nfdNodeLabels(labels)
	require.Empty(t, dropped, "NFD's worker and master keep every label")
	require.Equal(t, labels, kept)
	// still there a little after one interval (a late refresh does not flap), gone well after
	var lastSeen, firstGone time.Duration
	for d := time.Duration(0); d <= time.Hour; d += time.Minute {
		l, _ := nfdLocalLabels(file, before.Add(d))
		if len(l) > 0 {
			lastSeen = d
		} else if firstGone == 0 {
			firstGone = d
		}
	}
	require.GreaterOrEqual(t, lastSeen, 5*time.Minute, "%s", file)
	require.NotZero(t, firstGone, "the labels never expire:\n%s", file)
	require.Less(t, firstGone, time.Hour)

	// the agent's file has every mode (its --mode names the Node condition's); check's the node's
	out, errs, _ = gpuprep(t, "check", "--root", root, "-o", "nfd")
	require.Contains(t, out, "# +expiry-time=", errs)
	cl, perr := nfdLocalLabels([]byte(out), time.Now())
	require.Empty(t, perr)
	require.Equal(t, "true", cl[report.NFDReadyLabel(preflight.VMPassthrough)], out)
	for k, v := range cl {
		require.Equal(t, labels[k], v, "check -o nfd and the agent's file give NFD the same %s", k)
	}
}
