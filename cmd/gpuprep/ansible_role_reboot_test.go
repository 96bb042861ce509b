package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// The role gpuprep.node.prepare (through the example playbook) over SSH to
// a loopback sshd host (ansible.builtin.reboot refuses the local
// connection: lib/ansible/plugins/action/reboot.py, ansible-core v2.14.18),
// against a fixture root that needs a reboot (iommu-off-kernel,
// vm-passthrough) and that the login user owns: apply asks for the
// reboot; ansible.builtin.reboot runs the role's gpuprep_reboot_command,
// which boots the fixture (fixture-boot: the kernel comes up with the
// configured arguments and the IOMMU on, a new btime) and waits until
// gpuprep_boot_time_command (btime in the fixture's /proc/stat) prints
// another value; apply then binds the GPU and labels the node; check ends
// ready. The play ends with no failure, one reboot.
func TestAnsiblePrepareRoleReboots(t *testing.T) {
	env := sshdtest.Shared(t, "ans")
	dir := ansibleFixtureCollection(t)
	node, err := os.MkdirTemp(env.Dir, "ansible-boot-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(node) })
	root := filepath.Join(node, "root")
	require.NoError(t, fixture.Build("iommu-off-kernel", root))
	withTools(t, root)
	boot := filepath.Join(node, fixtureBootName)
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(boot, self, 0o755))
	out, err := exec.Command("chown", "-R", env.User+":", node).CombinedOutput()
	require.NoError(t, err, "%s", out)
	btime := func() string {
		b, err := os.ReadFile(filepath.Join(root, "proc/stat"))
		require.NoError(t, err)
		return regexp.MustCompile(`(?m)^btime .*$`).FindString(string(b))
	}
	bootedAt := btime()

	kh := filepath.Join(dir, "known_hosts")
	s := env.Start(t, "127.0.4.1")
	sshdtest.Trust(t, kh, false, s)
	var inv strings.Builder
	fmt.Fprintf(&inv, "[gpu_nodes]\nnode ansible_host=%s ansible_port=%d ansible_python_interpreter=/usr/bin/python3 gpuprep_root=%s", s.Host, s.Port, root)
	fmt.Fprintf(&inv, " gpuprep_reboot_command='%s %s' gpuprep_boot_time_command='grep btime %s/proc/stat'\n", boot, root, root)
	sshGroupVars(&inv, env, kh)
	invFile := filepath.Join(dir, "hosts.ini")
	require.NoError(t, os.WriteFile(invFile, []byte(inv.String()), 0o600))
	ansibleOverSSH(t, env)

	out2, code := ansiblePlaybook(t, "-i", invFile, "gpuprep.node.prepare")
	require.Equal(t, 0, code, out2)
	assert.Equal(t, map[string]string{"node": "0"}, recap(out2), out2)
	assert.Regexp(t, `TASK \[gpuprep.node.prepare : Reboot, as apply asks\] \*+\nchanged: \[node\]`, out2)
	assert.Regexp(t, `TASK \[gpuprep.node.prepare : Apply again after the reboot\] \*+\nchanged: \[node\]`, out2)
	assert.Regexp(t, `TASK \[gpuprep.node.prepare : The node is ready\] \*+\nok: \[node\]`, out2)
	assert.NotEqual(t, bootedAt, btime(), "the fixture booted")

	// the node as gpuprep sees it now
	cmdline, err := os.ReadFile(filepath.Join(root, "proc/cmdline"))
	require.NoError(t, err)
	assert.Contains(t, string(cmdline), " intel_iommu=on iommu=pt")
	assert.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
	_, errs, c := gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough")
	assert.Equal(t, exitOK, c, errs)
}

// The example playbook for real (not in check mode) over three loopback
// sshd hosts, with the test binary as the module so that apply changes
// fixture roots: the canary (VT-x off in the firmware, which no step
// changes) fails, and the play stops there: the two other hosts, whose
// roots apply would change (IOMMU off in the kernel), are not in the
// PLAY RECAP and their roots are byte for byte what they were.
func TestAnsibleCanaryStopsTheRealPlay(t *testing.T) {
	env := sshdtest.Shared(t, "ans")
	dir := ansibleFixtureCollection(t)
	nodes, err := os.MkdirTemp(env.Dir, "ansible-canary-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(nodes) })
	kh := filepath.Join(dir, "known_hosts")
	var inv strings.Builder
	inv.WriteString("[gpu_nodes]\n")
	roots := map[string]string{}
	for i, h := range []struct{ name, fixture string }{{"canary", "vtx-disabled"}, {"n2", "iommu-off-kernel"}, {"n3", "iommu-off-kernel"}} {
		root := filepath.Join(nodes, h.name)
		require.NoError(t, fixture.Build(h.fixture, root))
		withTools(t, root)
		roots[h.name] = root
		s := env.Start(t, fmt.Sprintf("127.0.4.%d", i+11))
		sshdtest.Trust(t, kh, false, s)
		fmt.Fprintf(&inv, "%s ansible_host=%s ansible_port=%d ansible_python_interpreter=/usr/bin/python3 gpuprep_root=%s\n", h.name, s.Host, s.Port, root)
	}
	out, err := exec.Command("chown", "-R", env.User+":", nodes).CombinedOutput()
	require.NoError(t, err, "%s", out)
	before := map[string]string{}
	for _, h := range []string{"n2", "n3"} {
		before[h] = treeHash(t, roots[h])
		// what apply would do there: it is not ready, and the plan changes it
		_, _, c := gpuprep(t, "check", "--root", roots[h], "--mode", "vm-passthrough")
		require.Equal(t, exitNotReady, c)
	}
	sshGroupVars(&inv, env, kh)
	invFile := filepath.Join(dir, "hosts.ini")
	require.NoError(t, os.WriteFile(invFile, []byte(inv.String()), 0o600))
	ansibleOverSSH(t, env)

	play, code := ansiblePlaybook(t, "-i", invFile, "gpuprep.node.prepare")
	assert.Equal(t, 2, code, play)
	assert.Equal(t, map[string]string{"canary": "1"}, recap(play), play)
	assert.Regexp(t, `fatal: \[canary\]: FAILED! => .*cpu\.virtualization`, play)
	for _, h := range []string{"n2", "n3"} {
		assert.Equal(t, before[h], treeHash(t, roots[h]), "%s untouched", h)
	}
}
