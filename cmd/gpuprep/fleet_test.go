package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
	"github.com/gpuprep/gpuprep/internal/testrun"
	"github.com/gpuprep/gpuprep/report"
)

// TestMain: testrun points the fleet client's local hash cache (see
// fleet.hashOpenFile) into a directory of the tests' own, not the user's,
// and removes it, the sshd users and processes on every exit path. The
// binary run as the gpuprep.node collection's module, or as a fixture's
// boot, is that and no test run (fixtureHostMain).
func TestMain(m *testing.M) {
	if code, ok := fixtureHostMain(os.Args, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	os.Exit(testrun.Main(m))
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := execute(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestFleetUsage(t *testing.T) {
	code, _, stderr := runCLI("fleet", "check")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--inventory (-i) is required")
	code, _, stderr = runCLI("fleet", "check", "-i", "../../internal/fleet/testdata/bad-port.yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `bad-port.yaml:7: hosts[1].port: "twenty-two" is not a TCP port`)
	code, _, stderr = runCLI("fleet", "check", "-i", "../../internal/fleet/testdata/hosts.ini", "-o", "yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "want text, json, junit, markdown or html")
	code, _, stderr = runCLI("fleet", "check", "-i", "../../internal/fleet/testdata/hosts.ini", "--group", "nope", "--dry-run")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `--group "nope"`)
}

// Without --ssh-config, ~/.ssh/config and then the system-wide file apply
// (the first value wins, as in ssh); a named file is read alone and must
// exist.
func TestFleetSSHConfigFiles(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	require.NoError(t, os.Mkdir(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host gpu-a01\n  User from-user-config\n"), 0o600))
	sys := writeFile(t, "ssh_config", "Host gpu-a0*\n  User from-system\n  Port 2200\n")
	defer func(old string) { fleet.SystemSSHConfig = old }(fleet.SystemSSHConfig)
	fleet.SystemSSHConfig = sys
	inv := writeFile(t, "hosts.ini", "gpu-a01\ngpu-a02\n")

	code, out, stderr := runCLI("fleet", "check", "-i", inv, "--dry-run")
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `from-user-config@gpu-a01:2200\b`, out)
	assert.Regexp(t, `from-system@gpu-a02:2200\b`, out)

	code, out, stderr = runCLI("fleet", "check", "-i", inv, "--dry-run", "--ssh-config", filepath.Join(home, ".ssh", "config"))
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `from-user-config@gpu-a01:22\b`, out, "a named file alone")
	assert.NotContains(t, out, "from-system")

	code, _, stderr = runCLI("fleet", "check", "-i", inv, "--dry-run", "--ssh-config", filepath.Join(home, "nope"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--ssh-config: ")
	assert.Contains(t, stderr, "nope")
}

func TestFleetDryRun(t *testing.T) {
	code, out, _ := runCLI("fleet", "check", "-i", "../../internal/fleet/testdata/hosts.ini", "--ssh-config", "none",
		"--dry-run", "--limit", "rack_b,gpu-a10", "--mode", "vm-vgpu")
	require.Equal(t, 0, code)
	assert.Regexp(t, `fleet@10.0.2.1:2222 +jump@bastion.example`, out)
	assert.Contains(t, out, "'check' '--root=/srv/roots/a b' '-o' 'json' '--compact' '--mode' 'vm-vgpu'")
	assert.Contains(t, out, "2 hosts would be contacted")
	code, out, _ = runCLI("fleet", "run", "-i", "../../internal/fleet/testdata/gpuprep.yaml", "--ssh-config", "none",
		"--dry-run", "-o", "json", "--", "grub", "show")
	require.Equal(t, 0, code)
	var plan struct {
		Kind  string
		Hosts []struct{ Name, Target string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	assert.Equal(t, "FleetPlan", plan.Kind)
	assert.Len(t, plan.Hosts, 3)
}

func TestFleetDryRunHostSelect(t *testing.T) {
	inv := writeFile(t, "sel.yaml", `apiVersion: gpuprep/v1
kind: Inventory
hosts:
  - {name: a, address: 10.0.0.1}
  - {name: b, address: 10.0.0.2, vars: {gpuprep_select: " 1234:1111, 0000:04:00.0 "}}
`)
	code, out, _ := runCLI("fleet", "check", "-i", inv, "--ssh-config", "none", "--dry-run", "-o", "json", "--select", "10de")
	require.Equal(t, 0, code)
	var plan struct {
		Hosts []struct {
			Name string
			Args []string `json:"gpuprepArgs"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	require.Len(t, plan.Hosts, 2)
	assert.Equal(t, []string{"check", "-o", "json", "--compact", "--select", "10de"}, plan.Hosts[0].Args)
	assert.Equal(t, []string{"check", "-o", "json", "--compact", "--select", "1234:1111", "--select", "0000:04:00.0"}, plan.Hosts[1].Args)
}

// gpuprep's YAML inventory reads the host variables gpuprep_mode and
// gpuprep_jump as Ansible inventories do, and refuses bad values.
func TestFleetDryRunHostVars(t *testing.T) {
	inv := writeFile(t, "vars.yaml", `apiVersion: gpuprep/v1
kind: Inventory
defaults: {user: root}
hosts:
  - {name: h1, address: 127.0.0.202, port: 41202, vars: {gpuprep_mode: vm-passthrough, gpuprep_jump: "root@127.0.0.201:41201"}}
`)
	code, out, stderr := runCLI("fleet", "check", "-i", inv, "--ssh-config", "none", "--dry-run", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var plan struct {
		Hosts []struct {
			Jump string
			Mode string
			Args []string `json:"gpuprepArgs"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	require.Len(t, plan.Hosts, 1)
	assert.Equal(t, "root@127.0.0.201:41201", plan.Hosts[0].Jump)
	assert.Equal(t, []string{"check", "-o", "json", "--compact", "--mode", "vm-passthrough"}, plan.Hosts[0].Args)

	bad := writeFile(t, "bad.yaml", "hosts:\n  - name: a\n    vars: {gpuprep_mode: vm-passthru}\n")
	code, _, stderr = runCLI("fleet", "check", "-i", bad, "--dry-run")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `bad.yaml:3: hosts[0].vars.gpuprep_mode: host "a": "vm-passthru": want container, vm-passthrough or vm-vgpu`)
}

// A missing --identity file is a usage error naming it, before anything
// is contacted (fleet apply and kubevirt config -i too), as a missing key
// file in an inventory is.
func TestFleetIdentityMissing(t *testing.T) {
	inv := writeFile(t, "h.yaml", "hosts:\n  - {name: a, address: 192.0.2.1, mode: container}\n")
	missing := filepath.Join(t.TempDir(), "id_nope")
	for _, args := range [][]string{
		{"fleet", "check", "-i", inv, "--identity", missing},
		{"fleet", "check", "-i", inv, "--identity", missing, "--dry-run"},
		{"fleet", "run", "-i", inv, "--identity", missing, "--", "checks"},
		{"fleet", "apply", "-i", inv, "--identity", missing, "--dry-run", "--yes"},
		{"kubevirt", "config", "-i", inv, "--identity", missing},
	} {
		code, _, stderr := runCLI(args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "--identity: key file "+missing+" does not exist", args)
	}
}

// Typos in --skip, --ignore and --select are usage errors here, before any
// host is contacted; with an --agent-binary of another version, an ID
// this gpuprep does not know is left to the hosts when it looks like one.
func TestFleetCheckFlagsLocally(t *testing.T) {
	inv := writeFile(t, "h.yaml", "hosts:\n  - {name: a, address: 192.0.2.1, mode: container}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "check", "--skip", "iommu.kernal"}, "--skip iommu.kernal: no such check"},
		{[]string{"fleet", "check", "--skip", "gpu.present, iommu.kernal"}, "--skip iommu.kernal: no such check"},
		{[]string{"fleet", "check", "--ignore", "all,vfio.bindng"}, "--ignore vfio.bindng: no such check"},
		{[]string{"fleet", "check", "--select", "nvidia"}, `--select "nvidia": want a PCI address`},
		{[]string{"fleet", "apply", "--dry-run", "--yes", "--select", "10de:zz"}, `--select "10de:zz": want a PCI address`},
		{[]string{"fleet", "check", "--agent-binary", "/bin/true", "--skip", "IOMMU kernel"}, "--skip IOMMU kernel: no such check"},
	} {
		code, _, stderr := runCLI(append(tc.args, "-i", inv, "--timeout", "1s", "--retries", "0")...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
	code, out, stderr := runCLI("fleet", "check", "-i", inv, "--dry-run", "--agent-binary", "/bin/true", "--skip", "gpu.future-check")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "'--skip' 'gpu.future-check'")
	code, _, stderr = runCLI("fleet", "check", "-i", inv, "--dry-run", "--skip", "gpu.future-check")
	assert.Equal(t, exitUsage, code, stderr)
}

// JUnit has one testcase per (check, subject, mode) for a report without a
// mode, named as in a report for each mode (a fleet check renders host
// reports the same way).
func TestFleetJUnitCasesUniqueAcrossModes(t *testing.T) {
	cases := func(args ...string) map[string]string {
		code, out, stderr := runCLI(append([]string{"--root", fixtureRoot(t, "hgx-h200"), "check", "-o", "junit"}, args...)...)
		require.Contains(t, []int{0, 1, 3}, code, stderr)
		var doc struct {
			Suites []struct {
				Cases []struct {
					Name    string    `xml:"name,attr"`
					Failure *struct{} `xml:"failure"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		require.NoError(t, xml.Unmarshal([]byte(out), &doc), out)
		require.Len(t, doc.Suites, 1)
		m := map[string]string{}
		for _, c := range doc.Suites[0].Cases {
			_, dup := m[c.Name]
			require.False(t, dup, "testcase %q twice", c.Name)
			m[c.Name] = "pass"
			if c.Failure != nil {
				m[c.Name] = "fail"
			}
		}
		return m
	}
	all := cases()
	assert.Equal(t, "fail", all["vfio.binding 0000:13:00.0 [vm-passthrough]"])
	assert.Equal(t, "pass", all["vfio.binding 0000:13:00.0 [container]"])
	pt := cases("--mode", "vm-passthrough")
	assert.Equal(t, "fail", pt["vfio.binding 0000:13:00.0 [vm-passthrough]"], "the same name with --mode")
}

// The global --root (or GPUPREP_ROOT) is this machine's root: the fleet
// commands refuse it, pointing to --remote-root, instead of ignoring it.
func TestFleetRefusesRoot(t *testing.T) {
	inv := writeFile(t, "h.yaml", "hosts:\n  - {name: a, address: 192.0.2.1, mode: container}\n")
	for _, args := range [][]string{
		{"fleet", "check", "-i", inv},
		{"fleet", "check", "-i", inv, "--dry-run"},
		{"fleet", "run", "-i", inv, "--", "checks"},
		{"fleet", "apply", "-i", inv, "--dry-run", "--yes"},
		{"kubevirt", "config", "-i", inv},
	} {
		code, _, stderr := runCLI(append([]string{"--root", "roots/no-gpu"}, append(args, "--timeout", "1s", "--retries", "0")...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "--root roots/no-gpu (or GPUPREP_ROOT) is the root of gpuprep on this machine", args)
		assert.Contains(t, stderr, "give their root with --remote-root", args)
	}
	t.Setenv("GPUPREP_ROOT", "roots/no-gpu")
	code, _, stderr := runCLI("fleet", "check", "-i", inv, "--dry-run")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "--remote-root")
}

// The end of a host's stderr kept in messages starts on a character.
func TestFleetTailKeepsUTF8(t *testing.T) {
	for _, pad := range []string{"", "x", "xx"} {
		got := tail([]byte(pad + strings.Repeat("€", 200)))
		assert.True(t, utf8.ValidString(got), "%q", got)
		assert.True(t, strings.HasPrefix(got, "…€"), "%q", got)
	}
}

// cliRig: real sshd hosts for the CLI.
type cliRig struct {
	env      *sshdtest.Env
	bin, kh  string
	hgx, amd string // fixture roots
}

func newCLIRig(t *testing.T) *cliRig {
	env := sshdtest.Shared(t, "cli")
	r := &cliRig{env: env, bin: sshdtest.Gpuprep(t), kh: filepath.Join(t.TempDir(), "known_hosts")}
	r.hgx = filepath.Join(env.Dir, "root-hgx")
	r.amd = filepath.Join(env.Dir, "root-amd")
	for dir, name := range map[string]string{r.hgx: "hgx-h200", r.amd: "amd-ready"} {
		if _, err := os.Stat(dir); err != nil {
			require.NoError(t, fixture.Build(name, dir))
			require.NoError(t, exec.Command("chmod", "-R", "a+rX", dir).Run())
		}
	}
	return r
}

func (r *cliRig) args(extra ...string) []string {
	return append([]string{"--agent-binary", r.bin, "--known-hosts", r.kh, "--identity", r.env.ClientKey, "--ssh-config", "none", "--timeout", "3s", "--retries", "0"}, extra...)
}

func writeFile(t *testing.T, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestFleetCheckReadyFleet(t *testing.T) {
	r := newCLIRig(t)
	a := r.env.Start(t, "127.0.1.1")
	b := r.env.Start(t, "127.0.1.2")
	sshdtest.Trust(t, r.kh, false, a, b)
	inv := writeFile(t, "fleet.yaml", fmt.Sprintf(`apiVersion: gpuprep/v1
kind: Inventory
defaults:
  user: %s
  mode: container
hosts:
  - {name: hgx-1, address: %s, port: %d, vars: {gpuprep_root: %s}}
  - {name: amd-1, address: %s, port: %d, mode: vm-passthrough, vars: {gpuprep_root: %s}}
`, r.env.User, a.Host, a.Port, r.hgx, b.Host, b.Port, r.amd))
	code, out, stderr := runCLI(append([]string{"fleet", "check", "-i", inv, "-o", "json"}, r.args()...)...)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "FleetReport", fr.Kind)
	assert.Equal(t, "gpuprep/v1", fr.APIVersion)
	require.Len(t, fr.Hosts, 2)
	for _, h := range fr.Hosts {
		assert.Equal(t, "evaluated", h.Status, h.Error)
		assert.Equal(t, "ready", h.Verdict)
		require.NotNil(t, h.Report)
		assert.Equal(t, "ReadinessReport", h.Report.Kind)
	}
	assert.Equal(t, "container", fr.Hosts[0].Report.Mode)
	assert.Equal(t, "vm-passthrough", fr.Hosts[1].Report.Mode)
	assert.Equal(t, 2, fr.Summary.Ready)
	assert.Contains(t, stderr, "gpuprep fleet: [2/2]", "one progress line per host when stderr is not a terminal")
}

// ~/.ssh/config alone says how to reach a host (HostName, Port, User,
// IdentityFile, and ProxyJump through a bastion also named there, or the
// older ProxyCommand ssh -W %h:%p bastion, read as that ProxyJump): a real
// fleet run against real sshds, with no address, key or jump in the
// Ansible inventory or on the command line, and a mixed-case alias.
func TestFleetCheckThroughSSHConfig(t *testing.T) {
	r := newCLIRig(t)
	bastion := r.env.Start(t, "127.0.1.30")
	target := r.env.Start(t, "127.0.1.31")
	sshdtest.Trust(t, r.kh, false, bastion, target)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	defer func(old string) { fleet.SystemSSHConfig = old }(fleet.SystemSSHConfig)
	fleet.SystemSSHConfig = filepath.Join(home, "no-system-config")
	require.NoError(t, os.Mkdir(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(fmt.Sprintf(`Host bastion
  HostName %s
  Port %d
Host GPU-*
  HostName %s
  Port %d
  ProxyJump bastion
Host OLD-*
  HostName %s
  Port %d
  ProxyCommand ssh -q -W %%h:%%p bastion
Host *
  User %s
  IdentityFile %s
`, bastion.Host, bastion.Port, target.Host, target.Port, target.Host, target.Port, r.env.User, r.env.ClientKey)), 0o600))
	inv := writeFile(t, "hosts.ini", "[gpus]\nGPU-Node1 gpuprep_mode=container gpuprep_root="+r.hgx+
		"\nOLD-Node2 gpuprep_mode=container gpuprep_root="+r.hgx+"\n")

	code, out, stderr := runCLI("fleet", "check", "-i", inv, "-o", "json", "--agent-binary", r.bin, "--known-hosts", r.kh,
		"--timeout", "5s", "--retries", "0")
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	require.Len(t, fr.Hosts, 2)
	for i, name := range []string{"GPU-Node1", "OLD-Node2"} { // ProxyJump; the ProxyCommand ssh -W idiom
		h := fr.Hosts[i]
		assert.Equal(t, name, h.Name)
		assert.Equal(t, target.Addr, h.Address, "HostName and Port from ~/.ssh/config")
		assert.Equal(t, "evaluated", h.Status, h.Error)
	}
	assert.Equal(t, 0, code, stderr)

	// Without the config the same inventory reaches nothing: the config
	// was what connected it.
	code, out, _ = runCLI("fleet", "check", "-i", inv, "-o", "json", "--agent-binary", r.bin, "--known-hosts", r.kh,
		"--timeout", "2s", "--retries", "0", "--ssh-config", "none")
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out)
	for _, h := range fr.Hosts {
		assert.NotEqual(t, "evaluated", h.Status)
	}
	assert.Equal(t, exitUnknown, code)
}

func TestFleetCheckMixedFleetAndFormats(t *testing.T) {
	r := newCLIRig(t)
	a := r.env.Start(t, "127.0.1.3")
	b := r.env.Start(t, "127.0.1.4")
	stranger := r.env.Start(t, "127.0.1.5") // not in known_hosts
	sshdtest.Trust(t, r.kh, false, a, b)
	closedPort := sshdtest.FreePort(t, "127.0.1.6")
	// An Ansible INI inventory as it is.
	inv := writeFile(t, "hosts.ini", fmt.Sprintf(`[ready]
ok ansible_host=%s ansible_port=%d gpuprep_mode=container

[notready]
np ansible_host=%s ansible_port=%d

[broken]
stranger ansible_host=%s ansible_port=%d
down ansible_host=127.0.1.6 ansible_port=%d

[all:vars]
ansible_user=%s
gpuprep_root=%s
gpuprep_mode=vm-passthrough
`, a.Host, a.Port, b.Host, b.Port, stranger.Host, stranger.Port, closedPort, r.env.User, r.hgx))
	code, out, stderr := runCLI(append([]string{"fleet", "check", "-i", inv, "-o", "json"}, r.args()...)...)
	assert.Equal(t, exitNotReady, code, stderr)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out)
	st := map[string]string{}
	for _, h := range fr.Hosts {
		st[h.Name] = h.Status + "/" + h.Verdict
	}
	assert.Equal(t, map[string]string{"ok": "evaluated/ready", "np": "evaluated/not-ready",
		"stranger": "host-key-unknown/", "down": "unreachable/"}, st)
	assert.Contains(t, fr.Hosts[2].Error, "SHA256:")
	require.NotEmpty(t, fr.Summary.Checks)
	assert.Equal(t, "vfio.binding fails on 1 of 2 hosts: np", fr.Summary.Checks[0].Sentence(5))

	code, out, _ = runCLI(append([]string{"fleet", "check", "-i", inv, "-o", "text", "--limit", "np"}, r.args()...)...)
	assert.Equal(t, exitNotReady, code)
	assert.Contains(t, out, "vfio.binding fails on 1 of 1 host: np")

	code, out, _ = runCLI(append([]string{"fleet", "check", "-i", inv, "-o", "junit", "--limit", "ok,stranger"}, r.args()...)...)
	assert.Equal(t, exitUnknown, code)
	var suites struct {
		Suites []struct {
			Name   string `xml:"name,attr"`
			Errors int    `xml:"errors,attr"`
			Cases  []struct {
				Name  string `xml:"name,attr"`
				Error *struct {
					Type string `xml:"type,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal([]byte(out), &suites), out)
	require.Len(t, suites.Suites, 2)
	assert.Greater(t, len(suites.Suites[0].Cases), 5)
	assert.Equal(t, "host-key-unknown", suites.Suites[1].Cases[0].Error.Type)

	code, out, _ = runCLI(append([]string{"fleet", "check", "-i", inv, "-o", "markdown", "--group", "notready"}, r.args()...)...)
	assert.Equal(t, exitNotReady, code)
	assert.Contains(t, out, "| np | "+b.Addr+" | evaluated | ❌ not ready |")
	assert.Contains(t, out, "<details><summary>np: not-ready</summary>")
}

func TestFleetAnsibleYAMLAndRun(t *testing.T) {
	r := newCLIRig(t)
	a := r.env.Start(t, "127.0.1.7")
	sshdtest.Trust(t, r.kh, true, a)
	inv := writeFile(t, "hosts.yml", fmt.Sprintf(`all:
  children:
    gpu:
      vars: {ansible_user: %s}
      hosts:
        node-1: {ansible_host: %s, ansible_port: %d}
`, r.env.User, a.Host, a.Port))
	code, out, stderr := runCLI(append([]string{"fleet", "run", "-i", inv, "-o", "json"}, r.args("--remote-root", r.hgx, "--", "checks", "-o", "json")...)...)
	require.Equal(t, 0, code, stderr+out)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr))
	require.Len(t, fr.Hosts, 1)
	assert.Equal(t, []string{"checks", "-o", "json"}, fr.Command)
	assert.Equal(t, 0, *fr.Hosts[0].ExitCode)
	assert.Contains(t, string(fr.Hosts[0].Output), "iommu.kernel")

	code, out, _ = runCLI(append([]string{"fleet", "check", "-i", inv, "--mode", "container"}, r.args("--remote-root", r.hgx)...)...)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "1 host, 1 ready, 0 not ready")
}

// fleet run knows gpuprep's exit codes: a host whose apply stops at the
// reboot step (exit 4) needs a reboot, it did not fail; a failed apply
// (exit 1) is a failure. The hosts run testdata/fakeagent (see applyRig).
func TestFleetRunExitCodes(t *testing.T) {
	r := newApplyRig(t)
	hosts := []*simHost{{name: "ok", behaviour: "ready"}, {name: "rb", behaviour: "reboot"}, {name: "bad", behaviour: "fail"}}
	inv := r.inventory(t, 120, hosts)
	run := func(limit string) (int, report.FleetReport, string) {
		code, out, stderr := runCLI(append([]string{"fleet", "run", "-i", inv, "-o", "json", "--limit", limit}, r.args("--", "apply", "--mode", "container", "--yes", "-o", "json")...)...)
		var fr report.FleetReport
		require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
		return code, fr, stderr
	}
	code, fr, stderr := run("ok,rb")
	assert.Equal(t, exitNeedReboot, code, stderr)
	assert.Equal(t, map[string]int{"ok": 1, "reboot-needed": 1}, fr.Summary.Outcomes)
	assert.Equal(t, "reboot-needed", byName(fr)["rb"].Outcome)

	code, out, _ := runCLI(append([]string{"fleet", "run", "-i", inv, "--limit", "rb"}, r.args("--", "apply", "--mode", "container", "--yes")...)...)
	assert.Equal(t, exitNeedReboot, code)
	assert.Contains(t, out, "1 host, 0 ok, 1 reboot-needed")

	code, fr, _ = run("all")
	assert.Equal(t, exitNotReady, code)
	assert.Equal(t, map[string]int{"ok": 1, "reboot-needed": 1, "failed": 1}, fr.Summary.Outcomes)
}

// Ctrl-C on the real binary: no new hosts, the running one cancelled, the
// report printed for the finished one.
func TestFleetInterrupt(t *testing.T) {
	r := newCLIRig(t)
	a := r.env.Start(t, "127.0.1.8")
	sshdtest.Trust(t, r.kh, false, a)
	silent := sshdtest.SilentServer(t, "127.0.1.9")
	sh, sp, _ := net.SplitHostPort(silent)
	var lines []string
	lines = append(lines, fmt.Sprintf("hung ansible_host=%s ansible_port=%s", sh, sp))
	lines = append(lines, fmt.Sprintf("ok ansible_host=%s ansible_port=%d", a.Host, a.Port))
	for i := 0; i < 4; i++ {
		lines = append(lines, fmt.Sprintf("later%d ansible_host=%s ansible_port=%d", i, a.Host, a.Port))
	}
	inv := writeFile(t, "hosts.ini", strings.Join(lines, "\n")+fmt.Sprintf("\n[all:vars]\nansible_user=%s\ngpuprep_root=%s\n", r.env.User, r.hgx))
	args := append([]string{"fleet", "check", "-i", inv, "-o", "json", "--parallel", "2", "--mode", "container"}, r.args()...)
	saved := filepath.Join(t.TempDir(), "fleet.json")
	args = append(args, "--timeout", "5m", "--report", saved)
	cmd := exec.Command(r.bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(errPipe)
	start := time.Now()
	for sc.Scan() {
		if strings.Contains(sc.Text(), " ok evaluated") {
			// the report file has the finished host while hung hangs
			b, err := os.ReadFile(saved)
			require.NoError(t, err)
			var inFile []string
			for _, h := range hostsSoFar(t, b) {
				inFile = append(inFile, h.Name+"/"+h.Status)
			}
			assert.Contains(t, inFile, "ok/evaluated")
			assert.NotContains(t, strings.Join(inFile, " "), "hung/")
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "its exit code is asserted below")
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill() // the test fails either way
		t.Fatal("gpuprep fleet did not stop after SIGINT")
	}
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, exitUnknown, cmd.ProcessState.ExitCode())
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &fr), out.String())
	assert.True(t, fr.Interrupted)
	st := map[string]string{}
	for _, h := range fr.Hosts {
		st[h.Name] = h.Status
	}
	assert.Equal(t, "cancelled", st["hung"])
	assert.Equal(t, "evaluated", st["ok"])
	assert.Equal(t, 6, fr.Summary.Hosts)
	assert.GreaterOrEqual(t, fr.Summary.Statuses["cancelled"], 4, "no new hosts after the interrupt: %v", st)
	b, err := os.ReadFile(saved)
	require.NoError(t, err)
	assert.Equal(t, out.String(), string(b), "the report file ends as the report printed")
}

// kubevirt config -i gathers the reports over SSH, as fleet check does.
func TestKubeVirtConfigFromAFleet(t *testing.T) {
	r := newCLIRig(t)
	a := r.env.Start(t, "127.0.1.21")
	sshdtest.Trust(t, r.kh, false, a)
	inv := writeFile(t, "fleet.yaml", fmt.Sprintf(`apiVersion: gpuprep/v1
kind: Inventory
defaults: {user: %s}
hosts:
  - {name: hgx-1, address: %s, port: %d, vars: {gpuprep_root: %s}}
  - {name: gone, address: 127.0.1.22, port: %d}
`, r.env.User, a.Host, a.Port, r.hgx, sshdtest.FreePort(t, "127.0.1.22")))
	// a host not evaluated: no patch (it would drop its GPU models from the CR) ...
	code, out, stderr := runCLI(append([]string{"kubevirt", "config", "-i", inv, "-o", "json", "--retries", "0"}, r.args()...)...)
	require.Equal(t, exitUnknown, code, stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, "1 host could not be evaluated: gone (unreachable")
	// ... unless the partial view is accepted
	code, out, stderr = runCLI(append([]string{"kubevirt", "config", "-i", inv, "-o", "json", "--retries", "0", "--allow-partial"}, r.args()...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"pciVendorSelector": "10DE:2335"`)
	require.Contains(t, out, `"resourceName": "nvidia.com/GH100_H200_SXM_141GB"`)
	require.Contains(t, stderr, "--allow-partial: 1 host not evaluated, their GPUs are not in the patch: gone (unreachable")
	code, _, stderr = runCLI("kubevirt", "config", "-i", inv, "--from-report", inv)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "not both")
}
