package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

func TestLabelBeforeJoinKubeletEnv(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound") // /etc/default/kubelet labels it vm-passthrough, zone r1
	env := filepath.Join(root, "etc/default/kubelet")
	before, _ := os.ReadFile(env)
	out, stderr, code := gpuprep(t, "label", "--root", root, "--before-join", "--mode", "vm-vgpu", "--vgpu-config", "A10-12Q", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "--- a/etc/default/kubelet\n+++ b/etc/default/kubelet\n")
	require.Contains(t, out, `+KUBELET_EXTRA_ARGS="--node-labels=nvidia.com/gpu.workload.config=vm-vgpu,topology.kubernetes.io/zone=r1,nvidia.com/vgpu.config=A10-12Q"`)
	after, _ := os.ReadFile(env)
	require.Equal(t, before, after, "--dry-run changes nothing")

	_, stderr, code = gpuprep(t, "label", "--root", root, "--before-join", "--mode", "vm-vgpu", "--vgpu-config", "A10-12Q")
	require.Equal(t, 0, code, stderr)
	after, _ = os.ReadFile(env)
	require.Contains(t, string(after), "vgpu.config=A10-12Q")
	baks, _ := filepath.Glob(env + ".gpuprep-*.bak")
	require.Len(t, baks, 1)
	bak, _ := os.ReadFile(baks[0])
	require.Equal(t, before, bak)
	out, _, code = gpuprep(t, "label", "--root", root, "--before-join", "--mode", "vm-vgpu", "--vgpu-config", "A10-12Q")
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to do")
	// the check now reads the new label
	out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "vm-vgpu", "--select", "0000:11:00.0")
	require.Contains(t, out, "nvidia.com/gpu.workload.config=vm-vgpu: set in /etc/default/kubelet")
}

func TestLabelNewEnvFileAndErrors(t *testing.T) {
	root := fixtureRoot(t, "amd-ready") // Rocky: no kubelet file yet
	_, stderr, code := gpuprep(t, "label", "--root", root, "--before-join", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(filepath.Join(root, "etc/sysconfig/kubelet"))
	require.NoError(t, err)
	require.Equal(t, "KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\"\n", string(b))
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--mode", "vm"}, `unknown mode "vm"`},
		{[]string{"--mode", "vm-passthrough", "--vgpu-config", "x"}, "--vgpu-config applies to --mode vm-vgpu only"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config", "A10 12Q"}, "a label value is at most 63 characters"},
		{[]string{"--mode", "vm-passthrough", "--node", "x"}, "--node and --kubeconfig are for labelling through the API"},
		{[]string{"--mode", "vm-passthrough", "--before-join=false", "--kubeconfig", "/nonexistent"}, "kubeconfig"},
	} {
		_, stderr, code := gpuprep(t, append([]string{"label", "--root", root, "--before-join"}, c.args...)...)
		require.Equal(t, 2, code, c.args)
		require.Contains(t, stderr, c.err)
	}
}

func TestLabelKubeadmConfig(t *testing.T) {
	d := realDeps()
	root := fixtureRoot(t, "hgx-h200")
	f := filepath.Join(root, "etc/kubeadm/join.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
	in := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nnodeRegistration:\n  kubeletExtraArgs:\n  - name: max-pods\n    value: \"250\"\n"
	require.NoError(t, os.WriteFile(f, []byte(in), 0o600))
	_, stderr, code := gpuprepWith(t, d, "label", "--root", root, "--before-join", "--kubeadm-config", "etc/kubeadm/join.yaml", "--mode", "vm-passthrough")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "with --root, give the file's absolute path inside the root")
	out, stderr, code := gpuprepWith(t, d, "label", "--root", root, "--before-join", "--kubeadm-config", "/etc/kubeadm/join.yaml", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "+  - name: node-labels\n+    value: \"nvidia.com/gpu.workload.config=vm-passthrough\"\n")
	require.Contains(t, out, "wrote /etc/kubeadm/join.yaml (backup /etc/kubeadm/join.yaml.gpuprep-")
	b, _ := os.ReadFile(f)
	require.True(t, strings.HasSuffix(string(b), "  - name: max-pods\n    value: \"250\"\n"))
	st, _ := os.Stat(f)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "mode kept")
	// journalled in the root, so that rollback undoes it; nothing written beside the file but its backup
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	ents, err := journal.Read(r)
	require.NoError(t, err)
	require.Len(t, ents, 2) // intent, change
	require.Equal(t, "/etc/kubeadm/join.yaml", ents[0].Path)
	require.Equal(t, "/etc/kubeadm/join.yaml", ents[1].Path)
	_, err = os.Stat(filepath.Join(root, "etc/kubeadm/var"))
	require.ErrorIs(t, err, os.ErrNotExist)
	simulatedKernel(t, d)
	out, stderr, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "/etc/kubeadm/join.yaml")
	b, _ = os.ReadFile(f)
	require.Equal(t, in, string(b))
}

// The kubelet merges repeated --node-labels, the last value of a key
// winning: label --before-join changes every occurrence, so that check then
// reads the wanted label.
func TestLabelBeforeJoinRepeatedFlags(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`KUBELET_EXTRA_ARGS="--node-labels=nvidia.com/gpu.workload.config=vm-vgpu --node-labels nvidia.com/gpu.workload.config=vm-passthrough"`,
			`KUBELET_EXTRA_ARGS="--node-labels nvidia.com/gpu.workload.config=container"`},
		{`KUBELET_EXTRA_ARGS="--node-labels=a=b --node-labels=nvidia.com/gpu.workload.config=vm-vgpu"`,
			`KUBELET_EXTRA_ARGS="--node-labels=a=b --node-labels=nvidia.com/gpu.workload.config=container"`},
	} {
		root := fixtureRoot(t, "hgx-h200")
		env := filepath.Join(root, "etc/default/kubelet")
		require.NoError(t, os.WriteFile(env, []byte(c.in+"\n"), 0o644))
		_, stderr, code := gpuprep(t, "label", "--root", root, "--before-join", "--mode", "container")
		require.Equal(t, 0, code, stderr)
		b, _ := os.ReadFile(env)
		require.Equal(t, c.want+"\n", string(b))
		out, _, code := gpuprep(t, "label", "--root", root, "--before-join", "--mode", "container")
		require.Equal(t, 0, code)
		require.Contains(t, out, "nothing to do")
		out, _, _ = gpuprep(t, "check", "-v", "--root", root, "--mode", "container")
		require.Contains(t, out, "nvidia.com/gpu.workload.config=container: set in /etc/default/kubelet")
		require.NotContains(t, out, "labels this node for vm-")
	}
}

// kubeadm-flags.env comes before /etc/default/kubelet on the kubelet's
// command line: a stale vGPU config (or workload label) there leaves it,
// with its own diff, backup and journal entry.
func TestLabelBeforeJoinStaleKubeadmFlags(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	flags := filepath.Join(root, "var/lib/kubelet/kubeadm-flags.env")
	require.NoError(t, os.MkdirAll(filepath.Dir(flags), 0o755))
	in := `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-labels=nvidia.com/gpu.workload.config=vm-vgpu,nvidia.com/vgpu.config=A10-8Q"` + "\n"
	require.NoError(t, os.WriteFile(flags, []byte(in), 0o644))
	out, stderr, code := gpuprep(t, "label", "--root", root, "--before-join", "--mode", "vm-passthrough", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "--- a/var/lib/kubelet/kubeadm-flags.env\n+++ b/var/lib/kubelet/kubeadm-flags.env\n")
	require.Contains(t, out, `+KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock"`)
	require.Contains(t, out, "+++ b/etc/default/kubelet\n")
	b, _ := os.ReadFile(flags)
	require.Equal(t, in, string(b), "--dry-run changes nothing")

	out, stderr, code = gpuprep(t, "label", "--root", root, "--before-join", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "wrote /var/lib/kubelet/kubeadm-flags.env (backup /var/lib/kubelet/kubeadm-flags.env.gpuprep-")
	require.Contains(t, out, "wrote /etc/default/kubelet")
	b, _ = os.ReadFile(flags)
	require.NotContains(t, string(b), "nvidia.com/")
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	ents, err := journal.Read(r)
	require.NoError(t, err)
	var paths []string
	for _, e := range ents {
		paths = append(paths, e.Path)
	}
	require.Contains(t, paths, "/var/lib/kubelet/kubeadm-flags.env")
	out, _, _ = gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "nvidia.com/gpu.workload.config=vm-passthrough: set in /etc/default/kubelet")

	// with --kubeadm-config, the labels go to the JoinConfiguration and leave
	// the environment files, which come after it on the command line
	join := filepath.Join(root, "etc/kubeadm/join.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(join), 0o755))
	require.NoError(t, os.WriteFile(join, []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"), 0o644))
	out, stderr, code = gpuprep(t, "label", "--root", root, "--before-join", "--kubeadm-config", "/etc/kubeadm/join.yaml", "--mode", "vm-vgpu", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "+++ b/etc/kubeadm/join.yaml\n")
	require.Contains(t, out, "-KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\"\n")
}
