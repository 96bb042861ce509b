package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
	"github.com/gpuprep/gpuprep/report"
)

// The fleet apply tests run against real OpenSSH servers on loopback
// addresses of THIS machine. A real `gpuprep apply` on those hosts would
// change this machine (bootloader, drivers, kubelet configuration), so the
// gpuprep the hosts run (--agent-binary) is testdata/fakeagent: it behaves
// like apply and rollback — exit codes, `-o json` ApplyResult with a real
// check report embedded — as each simulated host's directory
// (gpuprep_root) says, and logs its calls. SSH, upload, sudo, the canary and
// batch logic, rollback-on-failure and the report are the real ones. The
// real per-host apply is tested on fixture roots (apply_test.go) and on a
// real kernel in the QEMU guest (e2e/apply_e2e_test.go).
type applyRig struct {
	*cliRig
	agent string
	ready string // a real gpuprep check -o json report: ready
	nope  string // and one not ready
}

func newApplyRig(t *testing.T) *applyRig {
	r := &applyRig{cliRig: newCLIRig(t)}
	r.agent = filepath.Join(t.TempDir(), "gpuprep")
	build := exec.Command("go", "build", "-trimpath", "-o", r.agent, "./testdata/fakeagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	code, rep, stderr := runCLI("--root", r.hgx, "check", "-o", "json", "--mode", "container")
	require.Equal(t, 0, code, stderr)
	r.ready = rep
	code, rep, stderr = runCLI("--root", r.hgx, "check", "-o", "json", "--mode", "vm-passthrough")
	require.Equal(t, exitNotReady, code, stderr)
	r.nope = rep
	return r
}

// host makes a simulated host's directory with its behaviour.
func (r *applyRig) host(t *testing.T, behaviour string) string {
	dir, err := os.MkdirTemp(r.env.Dir, "apply-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(dir)) })
	require.NoError(t, os.Chmod(dir, 0o777)) // written by the login user when there is no sudo
	rep := r.ready
	if behaviour == "not-ready" {
		rep = r.nope
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "behaviour"), []byte(behaviour+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.json"), []byte(rep), 0o644))
	return dir
}

func calls(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (r *applyRig) args(extra ...string) []string {
	a := r.cliRig.args(extra...)
	a[1] = r.agent // --agent-binary
	return a
}

type simHost struct {
	name, behaviour, dir string
}

// inventory puts the simulated hosts on real sshd servers, one per host.
func (r *applyRig) inventory(t *testing.T, firstIP int, hosts []*simHost) string {
	var lines []string
	for i, h := range hosts {
		s := r.env.Start(t, fmt.Sprintf("127.0.1.%d", firstIP+i))
		sshdtest.Trust(t, r.kh, false, s)
		h.dir = r.host(t, h.behaviour)
		lines = append(lines, fmt.Sprintf("  - {name: %s, address: %s, port: %d, vars: {gpuprep_root: %s}}", h.name, s.Host, s.Port, h.dir))
	}
	return writeFile(t, "fleet.yaml", fmt.Sprintf("apiVersion: gpuprep/v1\nkind: Inventory\ndefaults: {user: %s, mode: container}\nhosts:\n%s\n",
		r.env.User, strings.Join(lines, "\n")))
}

func byName(fr report.FleetReport) map[string]report.FleetHost {
	m := map[string]report.FleetHost{}
	for _, h := range fr.Hosts {
		m[h.Name] = h
	}
	return m
}

// The test: one host made to fail — the canary — stops the rollout;
// no other host is touched, and the failed canary is rolled back.
func TestFleetApplyCanaryStopsRollout(t *testing.T) {
	r := newApplyRig(t)
	hosts := []*simHost{{name: "gpu-01", behaviour: "fail"}, {name: "gpu-02", behaviour: "ready"},
		{name: "gpu-03", behaviour: "ready"}, {name: "gpu-04", behaviour: "ready"}}
	inv := r.inventory(t, 40, hosts)
	code, out, stderr := runCLI(append([]string{"fleet", "apply", "-i", inv, "--mode", "container", "--canary", "1", "--batch", "2",
		"--max-failures", "5", "--rollback-on-failure", "--yes", "-o", "json"}, r.args()...)...)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	assert.Equal(t, exitNotReady, code, stderr)
	require.Len(t, fr.Hosts, 4)
	h := byName(fr)
	c := h["gpu-01"]
	assert.Equal(t, "canary", c.Phase)
	assert.Equal(t, "rolled-back", c.Outcome)
	assert.Equal(t, "evaluated", c.Status)
	require.NotNil(t, c.ExitCode, "the canary's apply exit code is missing: %s\n%s", c.Error, stderr)
	assert.Equal(t, 1, *c.ExitCode)
	assert.Contains(t, c.Error, "vfio-bind: 0000:3b:00.0")
	assert.Contains(t, string(c.Output), `"kind": "ApplyResult"`)
	require.NotNil(t, c.Rollback)
	require.NotNil(t, c.Rollback.ExitCode, "the canary's rollback exit code is missing: %s", c.Rollback.Error)
	assert.Equal(t, 0, *c.Rollback.ExitCode)
	assert.Contains(t, string(c.Rollback.Output), "simulated rollback")
	// The real SSH path ran apply, then rollback, with gpuprep's arguments.
	assert.Equal(t, []string{"apply --mode container --yes -o json", "rollback -o json"}, calls(t, hosts[0].dir))
	for _, sh := range hosts[1:] {
		e := h[sh.name]
		assert.Equal(t, "skipped", e.Phase, sh.name)
		assert.Equal(t, "skipped", e.Outcome, sh.name)
		assert.Contains(t, e.Error, "canary gpu-01 failed")
		assert.Nil(t, calls(t, sh.dir), "%s was contacted although the canary failed", sh.name)
	}
	require.NotNil(t, fr.Rollout)
	assert.Equal(t, 1, fr.Rollout.Failures)
	assert.Contains(t, fr.Rollout.Stopped, "canary gpu-01 failed: no other host was started")
	assert.Contains(t, stderr, "gpuprep fleet apply: rollout stopped: canary gpu-01 failed")

	// The text report of the saved JSON shows the phases.
	saved := writeFile(t, "fleet-apply.json", out)
	t.Setenv("COLUMNS", "400") // no line of the table wrapped
	code, text, stderr := runCLI("report", "render", saved, "-o", "text")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, text, "gpuprep fleet apply  4 hosts, 0 ready, 1 rolled-back, 3 skipped")
	assert.Regexp(t, `gpu-01 +\S+ +canary +rolled-back +1 +- +vfio-bind: 0000:3b:00.0: .*; rolled back`, text)
	assert.Regexp(t, `gpu-02 +\S+ +skipped +skipped +- +-`, text)
	assert.Contains(t, text, "Stopped: canary gpu-01 failed")
}

// After a good canary: batches, the failure budget, reboots (not failures),
// a not-ready host (verified by the check apply embeds), no rollback
// without --rollback-on-failure.
func TestFleetApplyBatchesAndMaxFailures(t *testing.T) {
	t.Setenv("COLUMNS", "400") // no line of the text report wrapped
	r := newApplyRig(t)
	hosts := []*simHost{{name: "c1", behaviour: "ready"}, {name: "a", behaviour: "ready"}, {name: "b", behaviour: "fail"},
		{name: "c", behaviour: "reboot"}, {name: "d", behaviour: "not-ready"}, {name: "e", behaviour: "ready"}}
	inv := r.inventory(t, 50, hosts)
	base := append([]string{"fleet", "apply", "-i", inv, "--yes", "-o", "json"}, r.args()...)
	code, out, stderr := runCLI(append(base, "--canary", "1", "--batch", "2", "--max-failures", "1")...)
	assert.Equal(t, exitNotReady, code, stderr)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	got := map[string]string{}
	for _, h := range fr.Hosts {
		got[h.Name] = h.Phase + "/" + h.Outcome
	}
	assert.Equal(t, map[string]string{"c1": "canary/ready", "a": "batch 1/ready", "b": "batch 1/failed",
		"c": "batch 2/reboot-needed", "d": "batch 2/failed", "e": "skipped/skipped"}, got)
	h := byName(fr)
	assert.Equal(t, "ready", h["a"].Verdict)
	assert.Equal(t, "not-ready", h["d"].Verdict, "the check report apply embeds is the verification")
	assert.Contains(t, h["d"].Error, "not ready after apply")
	assert.Nil(t, h["b"].Rollback)
	assert.Equal(t, []string{"apply --mode container --yes -o json"}, calls(t, hosts[2].dir), "no rollback without --rollback-on-failure")
	assert.Nil(t, calls(t, hosts[5].dir))
	assert.Equal(t, 2, fr.Rollout.Failures)
	assert.Contains(t, fr.Rollout.Stopped, "2 hosts failed, more than --max-failures 1: stopped after batch 2")
	assert.Equal(t, 2, fr.Summary.Ready)
	assert.Equal(t, 3, fr.Summary.NotReady, "by outcome: b failed (no report), c needs a reboot, d failed its check")
	assert.Equal(t, 0, fr.Summary.Unknown)

	// Every host ready: exit 0; a host that needs a reboot: exit 4.
	code, out, stderr = runCLI(append(base, "--limit", "c1,a,e", "--batch", "1")...)
	assert.Equal(t, 0, code, out+stderr)
	code, _, stderr = runCLI(append(base, "--limit", "c1,c")...)
	assert.Equal(t, exitNeedReboot, code, stderr)
	// A canary that needs a reboot is not verified: the rollout stops (exit 4).
	code, out, stderr = runCLI(append(base, "--limit", "c,e", "-o", "text")...)
	assert.Equal(t, exitNeedReboot, code, stderr)
	assert.Contains(t, out, "canary c not verified ready (reboot needed)")
	assert.Regexp(t, `e +\S+ +skipped +skipped`, out)
	assert.Len(t, calls(t, hosts[5].dir), 1, "e ran only in the all-ready run")
}

func TestFleetApplyUsageAndDryRun(t *testing.T) {
	inv := writeFile(t, "fleet.yaml", `apiVersion: gpuprep/v1
kind: Inventory
hosts:
  - {name: a, address: 10.0.0.1, mode: container}
  - {name: b, address: 10.0.0.2, vars: {gpuprep_select: "1234:1111"}}
  - {name: c, address: 10.0.0.3}
  - {name: d, address: 10.0.0.4, vars: {gpuprep_root: /}}
`)
	base := []string{"fleet", "apply", "-i", inv, "--ssh-config", "none"}
	code, _, stderr := runCLI(base...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no mode for b, c, d: give --mode")
	code, _, stderr = runCLI(append(base, "--mode", "vm-passthrough")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "run it on a terminal to confirm, or pass --yes")
	code, _, stderr = runCLI(append(base, "--mode", "container", "--batch", "0", "--yes")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--batch 0: want at least 1")

	code, out, _ := runCLI(append(base, "--mode", "vm-passthrough", "--batch", "2", "--dry-run")...)
	require.Equal(t, 0, code)
	assert.Regexp(t, `canary +a +`, out)
	assert.Regexp(t, `batch 1 +b +.*'apply' '--mode' 'vm-passthrough' '--yes' '-o' 'json' '--select' '1234:1111'`, out)
	assert.Regexp(t, `batch 2 +d +.*'--root=/' 'apply'`, out)
	assert.Contains(t, out, "4 hosts in 3 phases")

	code, out, _ = runCLI(append(base, "--mode", "container", "--canary", "0", "--batch", "3", "--dry-run", "-o", "json")...)
	require.Equal(t, 0, code)
	var plan struct {
		Kind  string
		Hosts []struct{ Name, Phase string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	assert.Equal(t, "FleetPlan", plan.Kind)
	var phases []string
	for _, h := range plan.Hosts {
		phases = append(phases, h.Phase)
	}
	assert.Equal(t, []string{"batch 1", "batch 1", "batch 1", "batch 2"}, phases)

	// --nvswitch goes to the vm-passthrough hosts' apply only
	code, _, stderr = runCLI(append(base, "--mode", "container", "--nvswitch", "--yes")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--nvswitch applies to vm-passthrough hosts")
	mixed := writeFile(t, "mixed.yaml", `apiVersion: gpuprep/v1
kind: Inventory
hosts:
  - {name: p, address: 10.0.0.1, mode: vm-passthrough}
  - {name: q, address: 10.0.0.2, mode: container}
`)
	code, out, _ = runCLI("fleet", "apply", "-i", mixed, "--ssh-config", "none", "--nvswitch", "--canary", "0", "--dry-run")
	require.Equal(t, 0, code)
	assert.Regexp(t, `p +.*'apply' '--mode' 'vm-passthrough' '--yes' '-o' 'json' '--nvswitch'`, out)
	assert.Regexp(t, `q +.*'apply' '--mode' 'container' '--yes' '-o' 'json'\n`, out)
}

// fleet apply --mode vm-vgpu uploads the local vGPU config and driver to
// the vm-vgpu hosts (by hash, into the login user's cache) and passes their
// paths there, with the config name (a host variable may replace it);
// other hosts get none of it.
func TestFleetApplyVGPUFiles(t *testing.T) {
	r := newApplyRig(t)
	cfg := writeFile(t, "vgpu.yaml", "version: v1\nvgpu-configs:\n  l40s-24q:\n    - devices: all\n      vgpu-devices:\n        \"L40S-24Q\": 2\n  l40s-48q:\n    - devices: all\n      vgpu-devices:\n        \"L40S-48Q\": 1\n")
	drv := writeFile(t, "NVIDIA-Linux-x86_64-580.95-vgpu-kvm.run", "#!/bin/sh\n# stand-in: fleet apply does not inspect it, the host's apply does\n")
	hosts := []*simHost{{name: "v1", behaviour: "ready"}, {name: "v2", behaviour: "ready"}, {name: "c1", behaviour: "ready"}}
	var lines []string
	for i, h := range hosts {
		s := r.env.Start(t, fmt.Sprintf("127.0.1.%d", 70+i))
		sshdtest.Trust(t, r.kh, false, s)
		h.dir = r.host(t, h.behaviour)
		extra := map[string]string{"v1": ", mode: vm-vgpu", "v2": ", mode: vm-vgpu", "c1": ", mode: container"}[h.name]
		vars := ""
		if h.name == "v2" {
			vars = ", gpuprep_vgpu_config: l40s-48q"
		}
		lines = append(lines, fmt.Sprintf("  - {name: %s, address: %s, port: %d%s, vars: {gpuprep_root: %s%s}}", h.name, s.Host, s.Port, extra, h.dir, vars))
	}
	inv := writeFile(t, "fleet.yaml", fmt.Sprintf("apiVersion: gpuprep/v1\nkind: Inventory\ndefaults: {user: %s}\nhosts:\n%s\n", r.env.User, strings.Join(lines, "\n")))
	base := append([]string{"fleet", "apply", "-i", inv, "--yes", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q", "--driver", drv}, r.args()...)

	// The dry run names the local files to upload.
	code, out, stderr := runCLI(append(base, "--dry-run")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "'--vgpu-config-file' 'upload:"+cfg+"' '--vgpu-config' 'l40s-24q' '--driver' 'upload:"+drv+"'")
	assert.Contains(t, out, "'--vgpu-config' 'l40s-48q'")
	prev := writeFile(t, "NVIDIA-Linux-x86_64-570.124.03-vgpu-kvm.run", "#!/bin/sh\n# stand-in\n")
	code, out, stderr = runCLI(append(base, "--previous-driver", prev, "--dry-run")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "'--driver' 'upload:"+drv+"' '--previous-driver' 'upload:"+prev+"'")

	code, out, stderr = runCLI(append(base, "-o", "json")...)
	require.Equal(t, 0, code, out+stderr)
	sum := func(p string) string {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return fmt.Sprintf("%x", sha256.Sum256(b))
	}
	cache := filepath.Join(r.env.Home[r.env.User], ".cache", "gpuprep", "files")
	remoteCfg := filepath.Join(cache, sum(cfg), "vgpu.yaml")
	remoteDrv := filepath.Join(cache, sum(drv), "NVIDIA-Linux-x86_64-580.95-vgpu-kvm.run")
	for _, h := range hosts[:2] {
		name := map[string]string{"v1": "l40s-24q", "v2": "l40s-48q"}[h.name]
		assert.Equal(t, []string{
			"apply --mode vm-vgpu --yes -o json --vgpu-config-file " + remoteCfg + " --vgpu-config " + name + " --driver " + remoteDrv,
			"file --vgpu-config-file sha256=" + sum(cfg),
			"file --driver sha256=" + sum(drv),
		}, calls(t, h.dir), h.name)
	}
	assert.Equal(t, []string{"apply --mode container --yes -o json"}, calls(t, hosts[2].dir))

	// An upgrade over the fleet is this run with a new --driver: the canary
	// (v1) applies it first, and a canary that fails (a version change it
	// refused or could not verify) stops the rollout: no other host is
	// contacted.
	require.NoError(t, os.WriteFile(filepath.Join(hosts[0].dir, "behaviour"), []byte("fail\n"), 0o644))
	code, out, stderr = runCLI(append(base, "--canary", "1", "-o", "json")...)
	assert.Equal(t, exitNotReady, code, out+stderr)
	v1 := calls(t, hosts[0].dir)
	require.Len(t, v1, 6)
	assert.Equal(t, "apply --mode vm-vgpu --yes -o json --vgpu-config-file "+remoteCfg+" --vgpu-config l40s-24q --driver "+remoteDrv, v1[3])
	assert.Len(t, calls(t, hosts[1].dir), 3, "v2 was contacted although the canary failed")
	assert.Len(t, calls(t, hosts[2].dir), 1, "c1 was contacted although the canary failed")
	assert.Contains(t, stderr, "rollout stopped: canary v1 failed")
	require.NoError(t, os.WriteFile(filepath.Join(hosts[0].dir, "behaviour"), []byte("ready\n"), 0o644))

	// Refused before any host is contacted: a vm-vgpu host without a config
	// name, a name the file lacks, vGPU flags without a vm-vgpu host.
	noName := []string{"fleet", "apply", "-i", inv, "--yes", "--vgpu-config-file", cfg, "--limit", "v1"}
	code, _, stderr = runCLI(append(noName, r.args()...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "v1: the config to create (--vgpu-config, or the variable gpuprep_vgpu_config)")
	code, _, stderr = runCLI(append([]string{"fleet", "apply", "-i", inv, "--yes", "--vgpu-config-file", cfg, "--vgpu-config", "a100-4c"}, r.args()...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `v1: `+cfg+`: no vgpu-config "a100-4c" (have l40s-24q, l40s-48q)`)
	code, _, stderr = runCLI(append([]string{"fleet", "apply", "-i", inv, "--yes", "--vgpu-config", "x", "--limit", "c1"}, r.args()...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no selected host has mode vm-vgpu")
	bad := writeFile(t, "bad.yaml", "version: v1\nvgpu-configs:\n  x:\n    - devices: all\n      vgpu-devics: {}\n")
	code, _, stderr = runCLI(append([]string{"fleet", "apply", "-i", inv, "--yes", "--vgpu-config-file", bad, "--vgpu-config", "x"}, r.args()...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, bad+":5")
	for _, h := range hosts {
		assert.Len(t, calls(t, h.dir), map[string]int{"v1": 6, "v2": 3, "c1": 1}[h.name], "%s contacted by a refused run", h.name)
	}
}

// fleet apply --reboot: apply reboots the hosts that need it; fleet apply
// waits for each (a cut connection included) by running apply again,
// without --reboot, until it goes past the reboot — ready, or a reboot that
// did not make the arguments effective — or the time is up. The canary's
// reboot is waited for before any other host starts.
func TestFleetApplyRebootAndWait(t *testing.T) {
	r := newApplyRig(t)
	hosts := []*simHost{{name: "c", behaviour: "reboot-ok"}, {name: "d", behaviour: "reboot-drop"}, {name: "s", behaviour: "reboot-stuck"},
		{name: "n", behaviour: "reboot-not-effective"}, {name: "r", behaviour: "ready"}}
	inv := r.inventory(t, 80, hosts)
	start := time.Now()
	code, out, stderr := runCLI(append([]string{"fleet", "apply", "-i", inv, "--yes", "-o", "json", "--reboot", "--reboot-timeout", "4s",
		"--reboot-poll", "300ms", "--canary", "1", "--batch", "4", "--max-failures", "5", "--rollback-on-failure"}, r.args()...)...)
	assert.Equal(t, exitNotReady, code, stderr)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	h := byName(fr)
	assert.True(t, fr.Rollout.Reboot)

	for _, name := range []string{"c", "d"} {
		e := h[name]
		assert.Equal(t, "ready", e.Outcome, "%s: %s", name, e.Error)
		require.NotNil(t, e.Reboot, name)
		assert.True(t, e.Reboot.Completed, name)
		assert.GreaterOrEqual(t, e.Reboot.Attempts, 1, name)
		assert.GreaterOrEqual(t, e.Reboot.WaitedMs, int64(900), "%s: back after a second", name)
		assert.Equal(t, "ready", e.Verdict, "%s: verified by the check apply embeds after the reboot", name)
	}
	assert.Equal(t, "canary", h["c"].Phase)
	assert.Equal(t, "batch 1", h["d"].Phase)
	assert.Equal(t, "failed", h["s"].Outcome)
	assert.Contains(t, h["s"].Error, "reboot: not back from the reboot within 4s (apply still asks for the reboot)")
	assert.False(t, h["s"].Reboot.Completed)
	assert.Nil(t, h["s"].Rollback, "a host whose reboot was not seen through is not rolled back")
	assert.Equal(t, "rolled-back", h["n"].Outcome, "came back and failed: rolled back")
	require.NotNil(t, h["n"].Rollback)
	assert.True(t, h["n"].Rollback.RebootRequired, "its rollback exited 4")
	assert.Contains(t, h["n"].Error, "still lacks intel_iommu=on iommu=pt")
	assert.True(t, h["n"].Reboot.Completed, "the host came back; apply then failed")
	assert.Equal(t, "ready", h["r"].Outcome)
	assert.Nil(t, h["r"].Reboot)

	// Only the first apply on a host may reboot it; the ones after wait.
	nc := calls(t, hosts[3].dir)
	assert.Equal(t, "rollback -o json", nc[len(nc)-1])
	hosts[3].dir = writeCalls(t, nc[:len(nc)-1])
	for _, sh := range hosts[:4] {
		c := calls(t, sh.dir)
		require.GreaterOrEqual(t, len(c), 2, sh.name)
		assert.Equal(t, "apply --mode container --yes -o json --reboot", c[0], sh.name)
		for _, x := range c[1:] {
			assert.Equal(t, "apply --mode container --yes -o json", x, sh.name)
		}
	}
	assert.Equal(t, []string{"apply --mode container --yes -o json --reboot"}, calls(t, hosts[4].dir))
	// The canary's wait ended before the batch started.
	assert.Less(t, strings.Index(stderr, "c ready after its reboot"), strings.Index(stderr, "batch 1:"), stderr)
	assert.Less(t, time.Since(start), 30*time.Second)
	assert.Contains(t, stderr, "d error: wait: remote command exited without exit status", "d's connection was cut by its reboot")

	saved := writeFile(t, "fleet-reboot.json", out)
	t.Setenv("COLUMNS", "400") // no line of the table wrapped
	code, text, _ := runCLI("report", "render", saved, "-o", "text")
	require.Equal(t, 0, code)
	assert.Regexp(t, `c +\S+ +canary +ready +0 +ready +rebooted \(\ds\)`, text)
	assert.Contains(t, text, "hosts rebooted where needed")
	assert.Regexp(t, `n +\S+ +batch 1 +rolled-back .*rolled back \(reboot needed to complete\)`, text)
}

// writeCalls puts calls into a calls.log of a new directory (for calls).
func writeCalls(t *testing.T, c []string) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calls.log"), []byte(strings.Join(c, "\n")+"\n"), 0o644))
	return dir
}

// rebootsOf are the simulated systemctl reboots a host's apply ran.
func rebootsOf(t *testing.T, dir string) []string {
	var out []string
	for _, c := range calls(t, dir) {
		if strings.HasPrefix(c, "reboot ") {
			out = append(out, c)
		}
	}
	return out
}

// fleet apply --reboot on hosts whose apply asks for a reboot in more than
// one boot (as apply -o json reports it: the boot ID, why, and the asks the
// node rebooted since). A host back in a new boot whose apply asks for
// another reboot, for another reason, is rebooted again (its connection cut
// by each reboot or not) and finishes ready; never more than 3 reboots
// (then reboot-needed); asked again for the reason just served, the reboot
// did not help (failed, not rebooted again); a host still answering from the
// boot that asked is not back yet and is waited for, not rebooted again.
// Never two reboots in one boot.
func TestFleetApplyRebootsAgain(t *testing.T) {
	r := newApplyRig(t)
	hosts := []*simHost{{name: "two", behaviour: "asks=vfio-unbind,nouveau"}, {name: "drop", behaviour: "asks=vfio-unbind,nouveau;drop"},
		{name: "four", behaviour: "asks=vfio-unbind,nouveau,kernel-args,nouveau"}, {name: "same", behaviour: "asks=kernel-args,kernel-args"},
		{name: "slow", behaviour: "asks=kernel-args;boot=2s"}}
	inv := r.inventory(t, 90, hosts)
	start := time.Now()
	code, out, stderr := runCLI(append([]string{"fleet", "apply", "-i", inv, "--yes", "-o", "json", "--reboot", "--reboot-timeout", "4s",
		"--reboot-poll", "300ms", "--canary", "0", "--batch", "5", "--max-failures", "5"}, r.args()...)...)
	assert.Equal(t, exitNotReady, code, stderr)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	h := byName(fr)
	assert.Less(t, time.Since(start), 30*time.Second)
	assert.Equal(t, 3, fr.Rollout.MaxReboots)

	// two reboots, for two reasons: ready
	for _, name := range []string{"two", "drop"} {
		e := h[name]
		assert.Equal(t, "ready", e.Outcome, "%s: %s", name, e.Error)
		assert.Equal(t, "ready", e.Verdict, name)
		require.NotNil(t, e.Reboot, name)
		assert.True(t, e.Reboot.Completed, name)
		assert.Equal(t, 2, e.Reboot.Reboots, name)
		assert.Equal(t, []string{"vfio-unbind", "nouveau"}, e.Reboot.Reasons, name)
	}
	for _, sh := range hosts[:2] {
		assert.Equal(t, []string{"reboot boot-0 for vfio-unbind", "reboot boot-1 for nouveau"}, rebootsOf(t, sh.dir), sh.name)
		var withReboot int
		for _, c := range calls(t, sh.dir) {
			if strings.HasSuffix(c, " --reboot") {
				withReboot++
			}
		}
		assert.Equal(t, 2, withReboot, "%s: apply --reboot once per ask", sh.name)
	}
	assert.Contains(t, stderr, "gpuprep fleet: two is back after its reboot for vfio-unbind, and apply asks for another, for nouveau: apply --reboot reboots it again (reboot 2 of at most 3)")
	assert.Contains(t, stderr, "gpuprep fleet: drop is back after its reboot for vfio-unbind", "the first ask, lost with the connection, as the apply after the reboot says")
	assert.Contains(t, stderr, "two ready after 2 reboots")

	// the bound: a fourth ask is not served
	e := h["four"]
	assert.Equal(t, "reboot-needed", e.Outcome, e.Error)
	assert.Equal(t, 3, e.Reboot.Reboots)
	assert.Equal(t, []string{"vfio-unbind", "nouveau", "kernel-args"}, e.Reboot.Reasons)
	assert.Contains(t, e.Error, "apply asks for reboot 4, for nouveau, after 3 (vfio-unbind, nouveau, kernel-args): fleet apply reboots a host at most 3 times")
	assert.Len(t, rebootsOf(t, hosts[2].dir), 3)

	// the same reason again: the reboot did not help
	e = h["same"]
	assert.Equal(t, "failed", e.Outcome)
	assert.Equal(t, 1, e.Reboot.Reboots)
	assert.True(t, e.Reboot.Completed, "it came back")
	assert.Contains(t, e.Error, "apply asks again for a reboot for kernel-args after its reboot for kernel-args: the reboot did not make the change effective; not rebooted again (apply: simulated: kernel-args needs a reboot)")
	assert.Equal(t, []string{"reboot boot-0 for kernel-args"}, rebootsOf(t, hosts[3].dir))

	// not back yet: apply answers from the boot that asked, and is waited for
	e = h["slow"]
	assert.Equal(t, "ready", e.Outcome, e.Error)
	assert.Equal(t, 1, e.Reboot.Reboots)
	assert.Equal(t, []string{"kernel-args"}, e.Reboot.Reasons)
	assert.GreaterOrEqual(t, e.Reboot.WaitedMs, int64(1900))
	// the first try starts one poll (300 ms) into the 2 s boot, so it is
	// answered by the boot that asked; a loaded machine fits no third try
	// into the boot (each apply over sshd then takes longer than a second)
	assert.GreaterOrEqual(t, e.Reboot.Attempts, 2, "apply ran in the old boot, asking again")
	assert.Equal(t, []string{"reboot boot-0 for kernel-args"}, rebootsOf(t, hosts[4].dir))
	assert.Equal(t, 1, fr.Rollout.Failures)

	saved := writeFile(t, "fleet-reboots.json", out)
	t.Setenv("COLUMNS", "400") // no line of the table wrapped
	code, text, _ := runCLI("report", "render", saved, "-o", "text")
	require.Equal(t, 0, code)
	assert.Regexp(t, `two +\S+ +batch 1 +ready +0 +ready +rebooted 2 times: vfio-unbind, nouveau \(\ds\)`, text)
	assert.Regexp(t, `slow +\S+ +batch 1 +ready +0 +ready +rebooted for kernel-args \(\ds\)`, text)
	assert.Regexp(t, `four +\S+ +batch 1 +reboot-needed +4 +- +rebooted 3 times: vfio-unbind, nouveau, kernel-args \(\ds\); apply asks for reboot 4, for nouveau`, text)
	assert.Regexp(t, `same +\S+ +batch 1 +failed +4 +- +rebooted for kernel-args \(\ds\); apply asks again for a reboot for kernel-args`, text)
	assert.Contains(t, text, "hosts rebooted where needed (at most 3 times each): 9 reboots on 5 hosts: 1 failed.")
	// (the canary's reboots are waited for before the batches: TestFleetApplyRebootAndWait)
}
