package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ansibleFixtureCollection is the collection with this test binary as the
// module of this architecture (fixtureHostMain: apply and rollback change
// fixture roots through the kernel simulator), and returns
// ANSIBLE_COLLECTIONS_PATH.
func ansibleFixtureCollection(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(ansiblePlaybookBin); err != nil {
		ansibleOracleMissing(t, "ansible-playbook is not installed (apt-get install ansible-core)")
	}
	return ansibleCollectionOf(t, os.Args[0])
}

// localPlay runs the tasks (YAML, indented as a play's tasks) on
// localhost with the local connection, with ansible-playbook's extra
// arguments, and returns each registered result the tasks list in
// register, by name, and ansible-playbook's output.
func localPlay(t *testing.T, dir, tasks string, register []string, args ...string) (map[string]map[string]any, string) {
	t.Helper()
	pb, results := filepath.Join(dir, "play.yml"), filepath.Join(dir, "results.json")
	var vars []string
	for _, r := range register {
		vars = append(vars, fmt.Sprintf("'%s': %s", r, r))
	}
	play := "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks + fmt.Sprintf(`
    - name: results
      ansible.builtin.copy:
        dest: %q
        content: "{{ {%s} | to_json }}"
      diff: false
      check_mode: false
`, results, strings.Join(vars, ", "))
	require.NoError(t, os.WriteFile(pb, []byte(play), 0o600))
	require.NoError(t, os.RemoveAll(results))
	out, code := ansiblePlaybook(t, append([]string{"-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=/usr/bin/python3"}, append(args, pb)...)...)
	require.Equal(t, 0, code, out)
	b, err := os.ReadFile(results)
	require.NoError(t, err)
	var run map[string]map[string]any
	require.NoError(t, json.Unmarshal(b, &run))
	return run, out
}

// gpuprepPlanText is gpuprep plan's text for root in mode (in process, as
// gpuprep runs it).
func gpuprepPlanText(t *testing.T, root, mode string) string {
	t.Helper()
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", mode)
	require.Equal(t, exitOK, code, errs)
	return out
}

// gpuprep.node.apply and gpuprep.node.rollback under real ansible-playbook
// (ansible-core v2.14.18), on localhost with the local connection, writing
// fixture roots (ansibleFixtureCollection): a node apply makes ready at
// once (vfio-bound to container: the GPUs off vfio-pci, the kubelet's
// label) and one that needs a reboot first (iommu-off-kernel to
// vm-passthrough: the kernel arguments). Check mode is the plan: changed
// predicted, nothing written, --diff shows the plan as gpuprep plan prints
// it, its file diffs among it. The real run changes the files (changed,
// the diff again), the second run changes nothing; the result says when a
// reboot is needed and why. rollback puts every file back byte for byte
// and the drivers where they were; a second rollback changes nothing.
func TestAnsibleApplyRollbackLocal(t *testing.T) {
	dir := ansibleFixtureCollection(t)
	ready, boot := fixtureRoot(t, "vfio-bound"), fixtureRoot(t, "iommu-off-kernel")
	withTools(t, boot)
	origReady, origBoot := tree(t, ready), tree(t, boot)
	hashReady, hashBoot := treeHash(t, ready), treeHash(t, boot)
	planReady, planBoot := gpuprepPlanText(t, ready, "container"), gpuprepPlanText(t, boot, "vm-passthrough")
	require.Contains(t, planReady, "+++ b/etc/default/kubelet", "the plan's file diff")
	require.Contains(t, planBoot, `+GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt"`)
	applyTasks := fmt.Sprintf(`
    - {name: ready 1, gpuprep.node.apply: {mode: container, root: %[1]q}, register: ready1}
    - {name: ready 2, gpuprep.node.apply: {mode: container, root: %[1]q}, register: ready2}
    - {name: boot 1, gpuprep.node.apply: {mode: vm-passthrough, root: %[2]q}, register: boot1}
    - {name: boot 2, gpuprep.node.apply: {mode: vm-passthrough, root: %[2]q}, register: boot2}
`, ready, boot)
	names := []string{"ready1", "ready2", "boot1", "boot2"}

	// check mode: the plan, nothing written
	run, out := localPlay(t, dir, applyTasks, names, "--check", "--diff")
	assert.Equal(t, hashReady, treeHash(t, ready), "check mode writes nothing")
	assert.Equal(t, hashBoot, treeHash(t, boot), "check mode writes nothing")
	for name, want := range map[string]string{"ready1": planReady, "boot1": planBoot} {
		assert.Equal(t, true, run[name]["changed"], name)
		assert.Equal(t, want, run[name]["diff"].(map[string]any)["prepared"], name)
		assert.Contains(t, out, want, "--diff prints the plan")
	}
	assert.Equal(t, false, run["ready1"]["reboot_required"])
	assert.Equal(t, true, run["boot1"]["reboot_required"], "the plan has the reboot step")

	// the real run, twice
	run, out = localPlay(t, dir, applyTasks, names, "--diff")
	assert.Contains(t, out, planReady, "--diff prints the plan apply ran")
	r1, r2 := run["ready1"], run["ready2"]
	assert.Equal(t, true, r1["changed"], r1)
	assert.Equal(t, true, r1["ready"], r1)
	assert.Equal(t, false, r1["reboot_required"], r1)
	assert.Equal(t, "ready for container", r1["msg"])
	assert.Equal(t, false, r2["changed"], "idempotent: %v", r2)
	assert.NotContains(t, r2, "diff", "nothing to do, no diff")
	assert.Equal(t, true, r2["ready"], r2)
	kubelet, err := os.ReadFile(filepath.Join(ready, "etc/default/kubelet"))
	require.NoError(t, err)
	assert.Equal(t, "KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=container,topology.kubernetes.io/zone=r1\"\n", string(kubelet))
	for _, g := range []string{"0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:41:00.0"} {
		assert.Equal(t, "", driverOf(t, ready, g), "off vfio-pci")
	}

	b1, b2 := run["boot1"], run["boot2"]
	assert.Equal(t, true, b1["changed"], b1)
	assert.Equal(t, true, b1["reboot_required"], b1)
	assert.Equal(t, "kernel-args", b1["reboot_for"], b1)
	assert.Equal(t, "reboot the node, then apply again (kernel-args)", b1["msg"])
	assert.Equal(t, false, b1["failed"], "a reboot asked is no failure")
	assert.Equal(t, false, b2["changed"], "before the reboot, apply again only asks for it: %v", b2)
	assert.Equal(t, true, b2["reboot_required"], b2)
	grubFile, err := os.ReadFile(filepath.Join(boot, "etc/default/grub"))
	require.NoError(t, err)
	assert.Contains(t, string(grubFile), `GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt"`)

	// rollback, twice
	run, _ = localPlay(t, dir, fmt.Sprintf(`
    - {name: undo ready, gpuprep.node.rollback: {root: %[1]q}, register: undo_ready}
    - {name: undo ready again, gpuprep.node.rollback: {root: %[1]q}, register: undo_ready2}
    - {name: undo boot, gpuprep.node.rollback: {root: %[2]q}, register: undo_boot}
    - {name: undo boot again, gpuprep.node.rollback: {root: %[2]q}, register: undo_boot2}
`, ready, boot), []string{"undo_ready", "undo_ready2", "undo_boot", "undo_boot2"})
	assert.Equal(t, origReady, tree(t, ready), "rollback: every file as it was")
	assert.Equal(t, origBoot, tree(t, boot), "rollback: every file as it was")
	for _, g := range []string{"0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:41:00.0"} {
		assert.Equal(t, "vfio-pci", driverOf(t, ready, g), "back on vfio-pci")
	}
	assert.Equal(t, true, run["undo_ready"]["changed"], run["undo_ready"])
	assert.Equal(t, false, run["undo_ready"]["reboot_required"], run["undo_ready"])
	assert.Equal(t, true, run["undo_boot"]["changed"], run["undo_boot"])
	for _, n := range []string{"undo_ready2", "undo_boot2"} {
		assert.Equal(t, false, run[n]["changed"], n)
		assert.Equal(t, "nothing to roll back", run[n]["msg"], n)
	}
}
