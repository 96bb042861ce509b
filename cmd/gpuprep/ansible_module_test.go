package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

const ansiblePlaybookBin = "/usr/bin/ansible-playbook"

// ansibleModuleRun runs the module as Ansible does: the binary (here the
// test's own process, through ansibleModuleMain) as AnsiballZ_NAME ARGSFILE.
func ansibleModuleRun(t *testing.T, args map[string]any) (map[string]any, int) {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "args")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	var out strings.Builder
	code, ok := ansibleModuleMain([]string{"/tmp/x/AnsiballZ_gpuprep_linux_amd64", f}, &out, nil)
	require.True(t, ok)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out.String()), &res), out.String())
	require.Equal(t, 1, strings.Count(strings.TrimSpace(out.String()), "\n")+1, "one JSON line")
	return res, code
}

func TestAnsibleModuleProtocol(t *testing.T) {
	_, ok := ansibleModuleMain([]string{"gpuprep", "check"}, &strings.Builder{}, nil)
	assert.False(t, ok, "the command line is not a module")
	_, ok = ansibleModuleMain([]string{"/x/AnsiballZ_check"}, &strings.Builder{}, nil)
	assert.False(t, ok, "a module has its arguments file")

	root := fixtureRoot(t, "vfio-bound")
	res, code := ansibleModuleRun(t, map[string]any{"_gpuprep_module": "check", "mode": "vm-passthrough", "root": root, "bogus": 1, "_ansible_check_mode": true})
	assert.Equal(t, 1, code)
	assert.Equal(t, true, res["failed"])
	assert.Contains(t, res["msg"], "unsupported parameters: bogus")

	res, _ = ansibleModuleRun(t, map[string]any{"_gpuprep_module": "nope"})
	assert.Contains(t, res["msg"], `_gpuprep_module "nope"`)

	res, _ = ansibleModuleRun(t, map[string]any{"_gpuprep_module": "apply", "mode": "vm-passthrough", "root": root, "nvswitch": "maybe"})
	assert.Contains(t, res["msg"], "argument nvswitch: want a boolean")

	// a templated boolean arrives as a string, a list as one comma-separated string
	res, code = ansibleModuleRun(t, map[string]any{"_gpuprep_module": "check", "mode": "vm-passthrough", "root": root, "skip": "node.label,vfio.binding", "_ansible_check_mode": "True"})
	assert.Equal(t, 0, code, res)
	assert.Equal(t, false, res["ready"], "skipped checks: not evaluated")
	assert.Equal(t, false, res["evaluated"])
	assert.NotContains(t, res, "failed")

	// check fails only when there is no report
	res, code = ansibleModuleRun(t, map[string]any{"_gpuprep_module": "check", "mode": "vm-passthrough", "root": filepath.Join(root, "nope")})
	assert.Equal(t, 1, code)
	assert.Equal(t, true, res["failed"])
	assert.NotContains(t, res, "rc", "Ansible takes a result's nonzero rc for a failure")
	assert.True(t, strings.HasPrefix(res["msg"].(string), "gpuprep check: "), res["msg"])
	assert.NotContains(t, res["msg"], "gpuprep: ", "gpuprep named once")
}

// rollback takes system_disk as label does: label --before-join on a
// system disk, then rollback there, gives the kubelet's file back.
func TestAnsibleRollbackSystemDisk(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	kubelet := filepath.Join(root, "etc/default/kubelet")
	before, err := os.ReadFile(kubelet)
	require.NoError(t, err)
	res, code := ansibleModuleRun(t, map[string]any{"_gpuprep_module": "label", "mode": "vm-vgpu", "vgpu_config": "A10-12Q", "before_join": true, "system_disk": true, "root": root})
	require.Equal(t, 0, code, res)
	require.Equal(t, true, res["changed"], res)
	res, code = ansibleModuleRun(t, map[string]any{"_gpuprep_module": "rollback", "system_disk": true, "root": root})
	require.Equal(t, 0, code, res)
	assert.Equal(t, true, res["changed"], res)
	after, err := os.ReadFile(kubelet)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

// ansibleCollection builds gpuprep and the collection with it as the
// module of this architecture (ansible/build.sh, as make
// ansible-collection does) and returns ANSIBLE_COLLECTIONS_PATH.
func ansibleCollection(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(ansiblePlaybookBin); err != nil {
		ansibleOracleMissing(t, "ansible-playbook is not installed (apt-get install ansible-core)")
	}
	return ansibleCollectionOf(t, sshdtest.Gpuprep(t))
}

// ansibleCollectionOf is ansibleCollection with the binary gpuprep as the
// module.
func ansibleCollectionOf(t *testing.T, gpuprep string) string {
	t.Helper()
	bins := t.TempDir()
	bin, err := os.ReadFile(gpuprep)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bins, "gpuprep-linux-"+runtime.GOARCH), bin, 0o755))
	dir := t.TempDir()
	out, err := exec.Command("../../ansible/build.sh", filepath.Join(dir, "ansible_collections/gpuprep/node"), bins).CombinedOutput()
	require.NoError(t, err, "%s", out)
	// Ansible kept off the user's configuration, home and caches
	cfg := filepath.Join(dir, "ansible.cfg")
	require.NoError(t, os.WriteFile(cfg, nil, 0o600))
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("ANSIBLE_CONFIG", cfg)
	t.Setenv("ANSIBLE_HOME", filepath.Join(dir, "ansible-home"))
	t.Setenv("ANSIBLE_LOCAL_TEMP", filepath.Join(dir, "ansible-tmp"))
	t.Setenv("ANSIBLE_REMOTE_TMP", filepath.Join(dir, "ansible-remote-tmp"))
	t.Setenv("ANSIBLE_COLLECTIONS_PATH", dir)
	t.Setenv("ANSIBLE_NOCOLOR", "1")
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	return dir
}

// ansibleOracleMissing skips, or fails under GPUPREP_REQUIRE_ORACLES=1 (as
// make test sets), as internal/fleet's oracleMissing does.
func ansibleOracleMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("GPUPREP_REQUIRE_ORACLES") == "1" {
		t.Fatalf(format+" (GPUPREP_REQUIRE_ORACLES=1)", args...)
	}
	t.Skipf(format, args...)
}

// ansiblePlaybook runs ansible-playbook, its output that of the default
// stdout callback.
func ansiblePlaybook(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(ansiblePlaybookBin, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err, "%s", out)
	}
	return string(out), code
}

// recapLine is a host's line of the PLAY RECAP (the default callback's
// v2_playbook_on_stats, lib/ansible/plugins/callback/default.py in
// ansible-core v2.14.18).
var recapLine = regexp.MustCompile(`(?m)^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)`)

// recap: each host of the PLAY RECAP and its failed count.
func recap(out string) map[string]string {
	m := map[string]string{}
	for _, l := range recapLine.FindAllStringSubmatch(out, -1) {
		m[l[1]] = l[5]
	}
	return m
}

func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintln(h, p, d.Type())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	}))
	return fmt.Sprintf("%x", h.Sum(nil))
}

// The modules under real ansible-playbook, on localhost with the local
// connection, against fixture roots: check says what gpuprep check says,
// apply in check mode is gpuprep plan (its text the --diff) and changes
// nothing, label in check mode changes nothing and then labels once; the
// binary run is the host architecture's.
func TestAnsibleModulesLocal(t *testing.T) {
	dir := ansibleCollection(t)
	hgx, ready, labelled := fixtureRoot(t, "hgx-h200"), fixtureRoot(t, "vfio-bound"), fixtureRoot(t, "vfio-bound")
	// the collection has the binary of this machine's architecture only
	otherMachine, otherModule := "aarch64", "gpuprep_linux_arm64"
	if runtime.GOARCH == "arm64" {
		otherMachine, otherModule = "x86_64", "gpuprep_linux_amd64"
	}
	// check's selection and check arguments, for the run in check mode: one
	// GPU of hgx's, one of the checks that keep it from vm-passthrough ignored
	hgxJSON, _, _ := gpuprep(t, "check", "--root", hgx, "--mode", "vm-passthrough", "-o", "json")
	var hgxRep struct {
		GPUs  []struct{ Address string }
		Modes map[string]struct{ Blockers []string }
	}
	require.NoError(t, json.Unmarshal([]byte(hgxJSON), &hgxRep))
	require.Greater(t, len(hgxRep.GPUs), 1)
	require.NotEmpty(t, hgxRep.Modes["vm-passthrough"].Blockers)
	selected, ignored := hgxRep.GPUs[1].Address, hgxRep.Modes["vm-passthrough"].Blockers[0]
	pb, results := filepath.Join(dir, "local.yml"), filepath.Join(dir, "results.json")
	require.NoError(t, os.WriteFile(pb, []byte(fmt.Sprintf(`
- hosts: localhost
  gather_facts: false
  tasks:
    - name: check hgx
      gpuprep.node.check: {mode: vm-passthrough, root: %[1]q}
      register: check_hgx
    - name: check ready
      gpuprep.node.check: {mode: vm-passthrough, root: %[2]q}
      register: check_ready
    - name: check dry
      gpuprep.node.check: {mode: vm-passthrough, root: %[1]q, select: [%[6]q], ignore: [%[7]q], skip: [node.label]}
      register: check_dry
      check_mode: true
    - name: plan hgx
      gpuprep.node.apply: {mode: vm-passthrough, root: %[1]q}
      register: plan_hgx
      check_mode: true
      diff: true
    - name: label dry
      gpuprep.node.label: {mode: vm-vgpu, vgpu_config: A10-12Q, before_join: true, system_disk: true, root: %[4]q}
      register: label_dry
      check_mode: true
      diff: true
    - name: label
      gpuprep.node.label: {mode: vm-vgpu, vgpu_config: A10-12Q, before_join: true, system_disk: true, root: %[4]q}
      register: label
    - name: label again
      gpuprep.node.label: {mode: vm-vgpu, vgpu_config: A10-12Q, before_join: true, system_disk: true, root: %[4]q}
      register: label_again
    - name: other arch
      gpuprep.node.check: {mode: vm-passthrough, root: %[1]q}
      vars: {ansible_facts: {system: Linux, architecture: %[5]s}}
      ignore_errors: true
      register: other_arch
    - name: no arch
      gpuprep.node.check: {mode: vm-passthrough, root: %[1]q}
      vars: {ansible_facts: {system: Linux, architecture: riscv64}}
      ignore_errors: true
      register: no_arch
    - name: results
      ansible.builtin.copy:
        dest: %[3]q
        content: "{{ {'check hgx': check_hgx, 'check ready': check_ready, 'check dry': check_dry, 'plan hgx': plan_hgx, 'label dry': label_dry, 'label': label, 'label again': label_again, 'other arch': other_arch, 'no arch': no_arch} | to_json }}"
`, hgx, ready, results, labelled, otherMachine, selected, ignored)), 0o600))
	hgxBefore := treeHash(t, hgx)
	kubelet := filepath.Join(labelled, "etc/default/kubelet")
	kubeletBefore, err := os.ReadFile(kubelet)
	require.NoError(t, err)

	out, code := ansiblePlaybook(t, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=/usr/bin/python3", pb)
	require.Equal(t, 0, code, out)
	b, err := os.ReadFile(results)
	require.NoError(t, err)
	var run map[string]map[string]any
	require.NoError(t, json.Unmarshal(b, &run))

	for task, root := range map[string]string{"check hgx": hgx, "check ready": ready} {
		res := run[task]
		out, _, c := gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
		var want map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &want))
		assert.Equal(t, want["ready"], res["ready"], task)
		assert.Equal(t, c == exitOK, res["ready"], task)
		assert.Equal(t, want["modes"], res["report"].(map[string]any)["modes"], task)
		assert.Equal(t, false, res["changed"], task)
	}
	// check mode runs check (not skipped) with the task's select, ignore and skip
	checkDry := run["check dry"]
	assert.NotContains(t, checkDry, "skipped", "check supports check mode")
	wantDry, _, c := gpuprep(t, "check", "--root", hgx, "--mode", "vm-passthrough", "--select", selected, "--ignore", ignored, "--skip", "node.label", "-o", "json")
	var wantRep map[string]any
	require.NoError(t, json.Unmarshal([]byte(wantDry), &wantRep))
	assert.Equal(t, wantRep["findings"], checkDry["report"].(map[string]any)["findings"])
	assert.Equal(t, wantRep["gpus"], checkDry["report"].(map[string]any)["gpus"])
	assert.Len(t, checkDry["report"].(map[string]any)["gpus"], 1, "select")
	assert.Equal(t, float64(c), checkDry["exit_code"])
	assert.Equal(t, false, checkDry["changed"])
	blockers, _ := checkDry["report"].(map[string]any)["modes"].(map[string]any)["vm-passthrough"].(map[string]any)["blockers"].([]any)
	assert.NotContains(t, blockers, ignored, "ignore")
	assert.Equal(t, false, run["check hgx"]["ready"])
	assert.Equal(t, true, run["check ready"]["ready"])

	plan := run["plan hgx"]
	wantText, _, c := gpuprep(t, "plan", "--root", hgx, "--mode", "vm-passthrough")
	require.Equal(t, exitOK, c)
	assert.Equal(t, true, plan["changed"])
	assert.Equal(t, wantText, plan["diff"].(map[string]any)["prepared"], "the plan is the --diff")
	wantJSON, _, _ := gpuprep(t, "plan", "--root", hgx, "--mode", "vm-passthrough", "-o", "json")
	var wantPlan map[string]any
	require.NoError(t, json.Unmarshal([]byte(wantJSON), &wantPlan))
	assert.Equal(t, wantPlan["steps"], plan["plan"].(map[string]any)["steps"])
	assert.Equal(t, hgxBefore, treeHash(t, hgx), "check mode changes nothing")

	dry := run["label dry"]
	assert.Equal(t, true, dry["changed"])
	assert.Contains(t, dry["diff"].(map[string]any)["prepared"], "+++ b/etc/default/kubelet")
	assert.Equal(t, true, run["label"]["changed"])
	assert.Equal(t, false, run["label again"]["changed"])
	after, err := os.ReadFile(kubelet)
	require.NoError(t, err)
	assert.NotEqual(t, kubeletBefore, after)
	assert.Contains(t, string(after), "nvidia.com/vgpu.config=A10-12Q")

	// the action plugin runs the binary of the host's architecture
	assert.Contains(t, run["other arch"]["msg"], "gpuprep.node."+otherModule+" was not found")
	assert.Equal(t, "gpuprep runs on Linux amd64 and arm64, not on Linux riscv64", run["no arch"]["msg"])
}

// The example playbook (gpuprep.node.prepare: serial [1, "10%", "50%"],
// max_fail_percentage 0) in check mode on five local hosts, so batches of
// 1, 1 (10%), 2 (50%) and 1: a canary the plan cannot make ready (VT-x off
// in the firmware) fails and the play stops before any other host; with a
// good canary, one failed host of the third batch ends the play after that
// batch (its other host runs, the fifth never does).
func TestAnsibleCanaryStopsPlay(t *testing.T) {
	dir := ansibleCollection(t)
	vtx, hgx := fixtureRoot(t, "vtx-disabled"), fixtureRoot(t, "hgx-h200")
	for _, tc := range []struct {
		bad   string
		recap map[string]string // host: failed count
	}{
		{"canary", map[string]string{"canary": "1"}},
		{"n3", map[string]string{"canary": "0", "n2": "0", "n3": "1", "n4": "0"}},
	} {
		var inv strings.Builder
		inv.WriteString("[gpu_nodes]\n")
		for _, h := range []string{"canary", "n2", "n3", "n4", "n5"} {
			root := hgx
			if h == tc.bad {
				root = vtx
			}
			fmt.Fprintf(&inv, "%s gpuprep_root=%s\n", h, root)
		}
		inv.WriteString("[gpu_nodes:vars]\nansible_connection=local\nansible_become=false\nansible_python_interpreter=/usr/bin/python3\n")
		file := filepath.Join(dir, "hosts.ini")
		require.NoError(t, os.WriteFile(file, []byte(inv.String()), 0o600))
		out, code := ansiblePlaybook(t, "-i", file, "--check", "gpuprep.node.prepare")
		assert.Equal(t, 2, code, out)
		assert.Equal(t, tc.recap, recap(out), out)
		assert.Regexp(t, `fatal: \[`+tc.bad+`\]: FAILED! => .*cpu\.virtualization`, out)
	}
}

// The example playbook over SSH, against three loopback sshd hosts (the
// sshdtest harness), in check mode (apply changes only the running
// system, not a fixture root): the module is copied over SSH and run as the
// login user, the canary (VT-x off in the firmware) fails and the play
// stops before the others (TestAnsibleCanaryStopsPlay has them run with a
// good canary).
func TestAnsibleCanaryOverSSH(t *testing.T) {
	env := sshdtest.Shared(t, "ans")
	dir := ansibleCollection(t)
	roots := map[string]string{}
	for _, name := range []string{"vtx-disabled", "hgx-h200"} {
		roots[name] = filepath.Join(env.Dir, "ansible-root-"+name)
		if _, err := os.Stat(roots[name]); err != nil {
			require.NoError(t, fixture.Build(name, roots[name]))
			require.NoError(t, exec.Command("chmod", "-R", "a+rX", roots[name]).Run())
		}
	}
	kh := filepath.Join(dir, "known_hosts")
	var inv strings.Builder
	inv.WriteString("[gpu_nodes]\n")
	for i, h := range []struct{ name, root string }{{"canary", "vtx-disabled"}, {"n2", "hgx-h200"}, {"n3", "hgx-h200"}} {
		s := env.Start(t, fmt.Sprintf("127.0.3.%d", i+1))
		sshdtest.Trust(t, kh, false, s)
		fmt.Fprintf(&inv, "%s ansible_host=%s ansible_port=%d gpuprep_root=%s\n", h.name, s.Host, s.Port, roots[h.root])
	}
	sshGroupVars(&inv, env, kh)
	invFile := filepath.Join(dir, "hosts.ini")
	require.NoError(t, os.WriteFile(invFile, []byte(inv.String()), 0o600))
	ansibleOverSSH(t, env)

	out, code := ansiblePlaybook(t, "-i", invFile, "--check", "gpuprep.node.prepare")
	assert.Equal(t, 2, code, out)
	assert.Equal(t, map[string]string{"canary": "1"}, recap(out), out)
	assert.Regexp(t, `fatal: \[canary\]: FAILED! => .*cpu\.virtualization`, out)
}

// sshGroupVars: group gpu_nodes' variables for the harness's hosts: its
// login user and key, the host keys in known_hosts kh, no become.
func sshGroupVars(inv *strings.Builder, env *sshdtest.Env, kh string) {
	fmt.Fprintf(inv, "[gpu_nodes:vars]\nansible_user=%s\nansible_ssh_private_key_file=%s\nansible_become=false\n", env.User, env.ClientKey)
	fmt.Fprintf(inv, "ansible_ssh_common_args='-o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes'\n", kh)
}

// ansibleOverSSH sets ansible-playbook up for the harness's sshd hosts.
func ansibleOverSSH(t *testing.T, env *sshdtest.Env) {
	t.Helper()
	// no ControlPersist master left running after the test; the files go
	// through the session itself (the harness's sshd has no sftp subsystem);
	// options of lib/ansible/plugins/connection/ssh.py (ansible-core v2.14.18)
	t.Setenv("ANSIBLE_SSH_ARGS", "-o ControlMaster=no")
	t.Setenv("ANSIBLE_SSH_TRANSFER_METHOD", "piped")
	// the harness's sshd allows no PTY; the remote tmp dir is the login
	// user's, not the controller's (ansibleCollection)
	t.Setenv("ANSIBLE_SSH_USETTY", "False")
	t.Setenv("ANSIBLE_REMOTE_TMP", filepath.Join(env.Home[env.User], ".ansible/tmp"))
}
