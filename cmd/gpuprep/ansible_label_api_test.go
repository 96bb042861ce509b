package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// gpuprep.node.label through the Kubernetes API under real ansible-playbook
// (ansible-core v2.14.18, localhost, local connection), against the real
// kube-apiserver of internal/kube/kubetest, with this test binary as the
// module (ansibleFixtureCollection). A label through the API is journalled
// on the machine the module runs on, never under its root (docs/root.md):
// here the fixture root stands in for that machine (fixtureThisMachineEnv),
// so gpuprep.node.rollback of that root undoes it. Check mode is a server-side dry run: changed
// predicted, the Node untouched (labels and resourceVersion), nothing
// journalled. The real run sets nvidia.com/gpu.workload.config (and
// nvidia.com/vgpu.config for vm-vgpu, a stale one removed for the other
// modes) and says changed; the second run changes nothing. The node name
// defaults to the root's host name. rollback puts every Node's labels back.
// A missing node and a bad kubeconfig fail the task with gpuprep's message.
func TestAnsibleLabelThroughAPI(t *testing.T) {
	s := kubetest.Start(t)
	dir := ansibleFixtureCollection(t)
	root := fixtureRoot(t, "vfio-bound")
	t.Setenv(fixtureThisMachineEnv, root) // the module's this machine
	host, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/hostname"))
	require.NoError(t, err)
	hostNode := strings.ToLower(strings.TrimSpace(string(host)))
	kc := s.AdminKubeconfig(t)
	pt := map[string]string{"zone": "r1", kube.WorkloadLabel: "container", kube.VGPUConfigLabel: "A10-12Q"}
	vg := map[string]string{"zone": "r2"}
	s.CreateNode(t, hostNode, pt)
	s.CreateNode(t, "gpu-vgpu", vg)
	_, rvPT := s.NodeLabels(t, hostNode)
	_, rvVG := s.NodeLabels(t, "gpu-vgpu")

	tasks := fmt.Sprintf(`
    - {name: pt, gpuprep.node.label: {mode: vm-passthrough, kubeconfig: %[1]q, root: %[2]q}, register: pt}
    - {name: vgpu, gpuprep.node.label: {mode: vm-vgpu, vgpu_config: H200-35C, node: gpu-vgpu, kubeconfig: %[1]q, root: %[2]q}, register: vgpu}
`, kc, root)
	names := []string{"pt", "vgpu"}

	// check mode: the API's dry run, nothing persisted or journalled
	run, out := localPlay(t, dir, tasks, names, "--check", "--diff")
	for _, n := range names {
		assert.Equal(t, true, run[n]["changed"], "%s: %v", n, run[n])
	}
	assert.Contains(t, run["pt"]["msg"], "would label (server-side dry run) node "+hostNode+": nvidia.com/gpu.workload.config=vm-passthrough, removed nvidia.com/vgpu.config")
	assert.Contains(t, out, "would label (server-side dry run) node gpu-vgpu", "--diff shows it")
	got, rv := s.NodeLabels(t, hostNode)
	assert.Equal(t, pt, got)
	assert.Equal(t, rvPT, rv, "check mode writes nothing to the API")
	got, rv = s.NodeLabels(t, "gpu-vgpu")
	assert.Equal(t, vg, got)
	assert.Equal(t, rvVG, rv, "check mode writes nothing to the API")
	assert.Equal(t, 0, journalLen(t, root), "check mode journals nothing")

	// the real run, twice
	run, _ = localPlay(t, dir, tasks, names)
	for _, n := range names {
		assert.Equal(t, true, run[n]["changed"], "%s: %v", n, run[n])
	}
	assert.Equal(t, "labelled node gpu-vgpu: nvidia.com/gpu.workload.config=vm-vgpu,nvidia.com/vgpu.config=H200-35C", run["vgpu"]["msg"])
	wantPT := map[string]string{"zone": "r1", kube.WorkloadLabel: "vm-passthrough"}
	wantVG := map[string]string{"zone": "r2", kube.WorkloadLabel: "vm-vgpu", kube.VGPUConfigLabel: "H200-35C"}
	got, rvPT = s.NodeLabels(t, hostNode)
	assert.Equal(t, wantPT, got)
	got, rvVG = s.NodeLabels(t, "gpu-vgpu")
	assert.Equal(t, wantVG, got)
	es := labelEntries(t, root)
	require.Len(t, es, 2, "each change journalled on this machine")
	assert.Equal(t, []string{hostNode, "gpu-vgpu"}, []string{es[0].Device, es[1].Device})
	assert.Equal(t, kc, es[0].Path, "the kubeconfig rollback will use")

	run, _ = localPlay(t, dir, tasks, names)
	for _, n := range names {
		assert.Equal(t, false, run[n]["changed"], "idempotent: %s: %v", n, run[n])
	}
	_, rv = s.NodeLabels(t, hostNode)
	assert.Equal(t, rvPT, rv, "not written again")
	_, rv = s.NodeLabels(t, "gpu-vgpu")
	assert.Equal(t, rvVG, rv, "not written again")
	assert.Equal(t, 2, journalLen(t, root), "nothing to change: nothing journalled")

	// rollback: the labels as they were
	run, _ = localPlay(t, dir, fmt.Sprintf(`
    - {name: undo, gpuprep.node.rollback: {root: %[1]q}, register: undo}
    - {name: undo again, gpuprep.node.rollback: {root: %[1]q}, register: undo2}
`, root), []string{"undo", "undo2"})
	assert.Equal(t, true, run["undo"]["changed"], run["undo"])
	assert.Equal(t, false, run["undo2"]["changed"], run["undo2"])
	got, _ = s.NodeLabels(t, hostNode)
	assert.Equal(t, pt, got, "the old workload label and the vGPU config are back")
	got, _ = s.NodeLabels(t, "gpu-vgpu")
	assert.Equal(t, vg, got, "the labels it added are gone")

	journalled := journalLen(t, root)

	// failures: the task fails with gpuprep's message, no Go stack, no client-go hint
	garbage := filepath.Join(t.TempDir(), "garbage")
	require.NoError(t, os.WriteFile(garbage, []byte("{not yaml: ["), 0o600))
	run, _ = localPlay(t, dir, fmt.Sprintf(`
    - {name: missing, gpuprep.node.label: {mode: container, node: nope, kubeconfig: %[1]q, root: %[2]q}, register: missing, ignore_errors: true}
    - {name: no file, gpuprep.node.label: {mode: container, node: gpu-vgpu, kubeconfig: %[3]q, root: %[2]q}, register: nofile, ignore_errors: true}
    - {name: garbage, gpuprep.node.label: {mode: container, node: gpu-vgpu, kubeconfig: %[4]q, root: %[2]q}, register: garbage, ignore_errors: true}
    - {name: none, gpuprep.node.label: {mode: container, node: gpu-vgpu, root: %[2]q}, register: nokc, ignore_errors: true, environment: {KUBECONFIG: ""}}
`, kc, root, filepath.Join(t.TempDir(), "absent"), garbage), []string{"missing", "nofile", "garbage", "nokc"})
	for n, want := range map[string]string{
		"missing": `node "nope" not found`,
		"nofile":  "absent",
		"garbage": "garbage",
		"nokc":    "no kubeconfig",
	} {
		r := run[n]
		assert.Equal(t, true, r["failed"], "%s: %v", n, r)
		assert.Equal(t, false, r["changed"], n)
		msg, _ := r["msg"].(string)
		assert.True(t, strings.HasPrefix(msg, "gpuprep label: "), "%s: %q", n, msg)
		assert.NotContains(t, msg, "gpuprep: ", "gpuprep named once")
		assert.Contains(t, msg, want, n)
		for _, bad := range []string{"KUBERNETES_MASTER", "goroutine", "panic", ".go:"} {
			assert.NotContains(t, msg, bad, n)
		}
	}
	got, _ = s.NodeLabels(t, "gpu-vgpu")
	assert.Equal(t, vg, got, "the failed tasks changed nothing")
	assert.Equal(t, journalled, journalLen(t, root), "nor journalled anything")
}
