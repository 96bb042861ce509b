package kube

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/kubeletargs"
)

var (
	setPT   = []Label{{Key: WorkloadLabel, Value: "vm-passthrough"}}
	setVGPU = []Label{{Key: WorkloadLabel, Value: "vm-vgpu"}, {Key: VGPUConfigLabel, Value: "A10-12Q"}}
)

func TestEditKubeletEnv(t *testing.T) {
	cases := []struct {
		name, in, want string
		set            []Label
		remove         []string
	}{
		{"empty file", "", `KUBELET_EXTRA_ARGS="--node-labels=nvidia.com/gpu.workload.config=vm-passthrough"` + "\n", setPT, nil},
		{"no newline at end", "# kubelet\nFOO=1", "# kubelet\nFOO=1\nKUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\"\n", setPT, nil},
		{"empty value", "KUBELET_EXTRA_ARGS=\n", "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\n", setPT, nil},
		{"other flags, double quotes",
			"# managed by hand\nKUBELET_EXTRA_ARGS=\"--max-pods=250 --cgroup-driver=systemd\"\n",
			"# managed by hand\nKUBELET_EXTRA_ARGS=\"--max-pods=250 --cgroup-driver=systemd --node-labels=nvidia.com/gpu.workload.config=vm-passthrough\"\n", setPT, nil},
		{"existing labels merged in place, single quotes",
			"KUBELET_EXTRA_ARGS='--node-labels=zone=r1,nvidia.com/gpu.workload.config=container,rack=7 --v=2'\n",
			"KUBELET_EXTRA_ARGS='--node-labels=zone=r1,nvidia.com/gpu.workload.config=vm-vgpu,rack=7,nvidia.com/vgpu.config=A10-12Q --v=2'\n", setVGPU, nil},
		{"space-separated flag value",
			"KUBELET_EXTRA_ARGS=\"--node-labels zone=r1 --v=2\"\n",
			"KUBELET_EXTRA_ARGS=\"--node-labels zone=r1,nvidia.com/gpu.workload.config=vm-passthrough --v=2\"\n", setPT, nil},
		{"remove the vgpu label when leaving vm-vgpu",
			"KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-vgpu,nvidia.com/vgpu.config=A10-12Q\n",
			"KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\n", setPT, []string{VGPUConfigLabel}},
		{"last assignment wins", "KUBELET_EXTRA_ARGS=\"--v=1\"\nKUBELET_EXTRA_ARGS=\"--v=2\"\n",
			"KUBELET_EXTRA_ARGS=\"--v=1\"\nKUBELET_EXTRA_ARGS=\"--v=2 --node-labels=nvidia.com/gpu.workload.config=vm-passthrough\"\n", setPT, nil},
	}
	for _, c := range cases {
		got, err := kubeletargs.EditEnv("/etc/default/kubelet", []byte(c.in), c.set, c.remove)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, string(got), c.name)
		again, err := kubeletargs.EditEnv("/etc/default/kubelet", got, c.set, c.remove)
		require.NoError(t, err, c.name)
		require.Equal(t, string(got), string(again), "%s: a second run changes nothing", c.name)
	}
}

func TestEditKubeletEnvRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"A=1\nKUBELET_EXTRA_ARGS=\"--v=2 \\\n  --max-pods=10\"\n": "/etc/default/kubelet:2: KUBELET_EXTRA_ARGS continues on the next line",
		"KUBELET_EXTRA_ARGS=\"$EXTRA --v=2\"\n":                   "/etc/default/kubelet:1: KUBELET_EXTRA_ARGS refers to variables",
		"KUBELET_EXTRA_ARGS=\"--node-labels=a\"\n":                `/etc/default/kubelet:1: --node-labels "a": "a" is not key=value`,
	} {
		_, err := kubeletargs.EditEnv("/etc/default/kubelet", []byte(in), setPT, nil)
		require.ErrorContains(t, err, want, in)
	}
}

// nodeLabels reads node-labels back the way kubeadm would.
func nodeLabels(t *testing.T, text string) string {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var doc struct {
			Kind             string `yaml:"kind"`
			NodeRegistration struct {
				KubeletExtraArgs yaml.Node `yaml:"kubeletExtraArgs"`
			} `yaml:"nodeRegistration"`
		}
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("no JoinConfiguration: %v\n%s", err, text)
		}
		if doc.Kind != "JoinConfiguration" {
			continue
		}
		a := doc.NodeRegistration.KubeletExtraArgs
		if a.Kind == yaml.MappingNode {
			var m map[string]string
			require.NoError(t, a.Decode(&m))
			return m["node-labels"]
		}
		var l []struct{ Name, Value string }
		require.NoError(t, a.Decode(&l))
		for _, x := range l {
			if x.Name == "node-labels" {
				return x.Value
			}
		}
		return ""
	}
}

func TestEditKubeadmConfig(t *testing.T) {
	const head = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\n"
	const head4 = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"
	disc := "discovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443 # the VIP\n    token: abcdef.0123456789abcdef\n"
	cases := []struct {
		name, in, labels string
	}{
		{"no nodeRegistration", head + disc, "nvidia.com/gpu.workload.config=vm-passthrough"},
		{"nodeRegistration without kubeletExtraArgs", head + "nodeRegistration:\n  taints:\n  - key: gpu\n    effect: NoSchedule\n  name: gpu-1\n" + disc, "nvidia.com/gpu.workload.config=vm-passthrough"},
		{"map without node-labels", head + "nodeRegistration:\n  kubeletExtraArgs:\n    max-pods: \"250\"\n" + disc, "nvidia.com/gpu.workload.config=vm-passthrough"},
		{"map with node-labels", head + "nodeRegistration:\n  kubeletExtraArgs:\n    node-labels: zone=r1,nvidia.com/gpu.workload.config=container # keep me\n", "zone=r1,nvidia.com/gpu.workload.config=vm-passthrough"},
		{"single-quoted", head + "nodeRegistration:\n  kubeletExtraArgs:\n    node-labels: 'zone=r1'\n", "zone=r1,nvidia.com/gpu.workload.config=vm-passthrough"},
		{"v1beta4 list without node-labels", head4 + "nodeRegistration:\n  kubeletExtraArgs:\n  - name: max-pods\n    value: \"250\"\n", "nvidia.com/gpu.workload.config=vm-passthrough"},
		{"v1beta4 list with node-labels", head4 + "nodeRegistration:\n  kubeletExtraArgs:\n    - name: node-labels\n      value: \"zone=r1\"\n", "zone=r1,nvidia.com/gpu.workload.config=vm-passthrough"},
		{"multi-document", "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n---\n" + head + "nodeRegistration:\n  kubeletExtraArgs:\n    v: \"2\"\n", "nvidia.com/gpu.workload.config=vm-passthrough"},
	}
	for _, c := range cases {
		got, err := EditKubeadmConfig("join.yaml", []byte(c.in), setPT, nil)
		require.NoError(t, err, c.name)
		require.Equal(t, c.labels, nodeLabels(t, string(got)), "%s:\n%s", c.name, got)
		// every original line is still there, in order
		rest := string(got)
		for _, l := range strings.SplitAfter(c.in, "\n") {
			if strings.Contains(l, "node-labels") || strings.Contains(l, "zone=r1") { // the edited line
				continue
			}
			i := strings.Index(rest, l)
			require.GreaterOrEqual(t, i, 0, "%s: line %q lost:\n%s", c.name, l, got)
			rest = rest[i+len(l):]
		}
		again, err := EditKubeadmConfig("join.yaml", got, setPT, nil)
		require.NoError(t, err)
		require.Equal(t, string(got), string(again), "%s: a second run changes nothing", c.name)
	}
	got, _ := EditKubeadmConfig("join.yaml", []byte(head+"nodeRegistration:\n  kubeletExtraArgs:\n    node-labels: zone=r1 # keep me\n"), setPT, nil)
	require.Contains(t, string(got), "node-labels: \"zone=r1,nvidia.com/gpu.workload.config=vm-passthrough\" # keep me\n")
	_, err := EditKubeadmConfig("join.yaml", []byte(head+"nodeRegistration: {name: a}\n"), setPT, nil)
	require.EqualError(t, err, "join.yaml:3: nodeRegistration is a flow-style mapping; gpuprep edits block style only")
	_, err = EditKubeadmConfig("join.yaml", []byte("apiVersion: v1\nkind: ConfigMap\n"), setPT, nil)
	require.EqualError(t, err, "join.yaml: no JoinConfiguration or InitConfiguration document")
}

func TestValidateLabelValue(t *testing.T) {
	require.NoError(t, ValidateLabelValue(VGPUConfigLabel, "A10-12Q"))
	require.NoError(t, ValidateLabelValue(VGPUConfigLabel, "default"))
	require.Error(t, ValidateLabelValue(VGPUConfigLabel, "A10 12Q"))
	require.Error(t, ValidateLabelValue(VGPUConfigLabel, "-x"))
	require.Error(t, ValidateLabelValue(VGPUConfigLabel, strings.Repeat("a", 64)))
}
