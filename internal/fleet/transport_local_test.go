package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// ansible_connection local, read as real ansible-inventory reads it (the
// ansible engine) and as gpuprep's reader does: set on a host, through an
// INI group's vars, in YAML, or by its FQCN, the host runs on this machine;
// a host named localhost without it is an SSH host, as it is to Ansible
// (an explicit localhost is not Ansible's implicit one), and another
// connection plugin (docker) stays that host's problem.
func TestLocalConnectionAsAnsibleReadsIt(t *testing.T) {
	ansibleEnv(t)
	dir := writeTree(t, map[string]string{
		"hosts.ini": "[ctl]\nhere ansible_connection=local ansible_host=192.0.2.7 ansible_user=nobody\n" +
			"[viagroup]\ng1\n[viagroup:vars]\nansible_connection=ansible.builtin.local\n" +
			"[gpu]\nlocalhost\nn1 ansible_host=192.0.2.1\nbox ansible_connection=docker\n",
		"hosts.yml": "all:\n  hosts:\n    here:\n      ansible_connection: local\n    localhost: {}\n    n1:\n      ansible_host: 192.0.2.1\n",
	})
	for _, file := range []string{"hosts.ini", "hosts.yml"} {
		for _, engine := range []string{EngineAnsible, EngineGpuprep} {
			t.Run(file+"/"+engine, func(t *testing.T) {
				inv, err := LoadWith(filepath.Join(dir, file), LoadOptions{Engine: engine})
				require.NoError(t, err)
				h := byName(t, inv)
				require.True(t, h["here"].Local)
				require.Empty(t, h["here"].Problem)
				require.Equal(t, LocalTarget, h["here"].Target())
				require.False(t, h["localhost"].Local, "an explicit localhost is reached over SSH, as Ansible does")
				require.Equal(t, "localhost:22", h["localhost"].Target())
				require.False(t, h["n1"].Local)
				if file == "hosts.ini" {
					require.True(t, h["g1"].Local, "local from [viagroup:vars]")
					require.Contains(t, h["box"].Problem, `"docker": gpuprep fleet reaches hosts over SSH, or runs here for local, only`)
					require.False(t, h["box"].Local)
				}
			})
		}
	}
}

// A local host in a fleet with SSH hosts (real sshd on loopback): its
// report is the real gpuprep check of the fixture root, run on this
// machine without SSH, beside the SSH hosts' reports.
func TestLocalHostBesideSSHHosts(t *testing.T) {
	r := newRig(t)
	s1 := r.env.Start(t, "127.0.0.1")
	sshdtest.Trust(t, r.kh, false, s1)
	local := &Host{Name: "here", Address: "192.0.2.99", Port: 1, User: "nobody", Local: true,
		Vars: map[string]string{"gpuprep_root": r.root}}
	hosts := []*Host{r.host("a", s1, r.env.User), local}
	run := r.runner(r.transport())
	var ran [][]string
	run.Local = &Local{Runner: recordingRunner{calls: &ran}}
	res := run.Run(context.Background(), hosts)
	for _, x := range res {
		require.Equal(t, StatusEvaluated, x.Status, "%s: %s", x.Host.Name, x.Err)
		var rep struct{ Kind, Mode string }
		require.NoError(t, json.Unmarshal(x.Output.Stdout, &rep), "%s", x.Output.Stdout)
		require.Equal(t, "ReadinessReport", rep.Kind)
		require.Equal(t, "container", rep.Mode)
	}
	require.Equal(t, 1, res[1].Attempts)
	// the two reports are of the same fixture root: the same checks
	require.Equal(t, checkIDs(t, res[0].Output.Stdout), checkIDs(t, res[1].Output.Stdout))
	require.Len(t, ran, 1, "the local host ran through the runner, the SSH host did not")
	bin, _ := filepath.Abs(r.bin.Path)
	require.Equal(t, []string{bin, "--root=" + r.root, "check", "-o", "json", "--mode", "container"}, ran[0])

	// a binary changed since it was loaded is not run
	cp := filepath.Join(t.TempDir(), "gpuprep")
	data, err := os.ReadFile(r.bin.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cp, data, 0o700))
	b2, err := LoadBinary(cp)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cp, []byte("#!/bin/sh\necho pwned\n"), 0o700))
	run.Exec = &Exec{Binary: b2}
	ran = nil
	res = run.Run(context.Background(), []*Host{local})
	require.Equal(t, StatusError, res[0].Status)
	require.Contains(t, res[0].Err, "changed since gpuprep fleet read it")
	require.Empty(t, ran)
}

// Not root: gpuprep runs under sudo -n, as on an SSH host, and sudo's
// refusal is the host's error saying what to do; --no-sudo runs it as the
// user. (The runner is the real one, with a sudo of the test's own.)
func TestLocalHostSudoRules(t *testing.T) {
	bin, err := LoadBinary(sshdtest.Gpuprep(t))
	require.NoError(t, err)
	dir := t.TempDir()
	sudo := filepath.Join(dir, "sudo")
	require.NoError(t, os.WriteFile(sudo, []byte("#!/bin/sh\nprintf '%s ' \"$@\" > \"$0.args\"\necho 'sudo: a password is required' >&2\nexit 1\n"), 0o755))
	h := &Host{Name: "here", Local: true, Vars: map[string]string{}}
	args := []string{"version"}
	e := &Exec{Binary: bin}
	l := &Local{Runner: dirsRunner(dir), Euid: func() int { return 1000 }}
	o, err := e.RunLocal(context.Background(), l, h, args)
	require.ErrorContains(t, err, "sudo -n (as ")
	require.ErrorContains(t, err, "a password is required")
	got, rerr := os.ReadFile(sudo + ".args")
	require.NoError(t, rerr)
	abs, _ := filepath.Abs(bin.Path)
	require.Equal(t, "-n -- "+abs+" version", strings.TrimSpace(string(got)))
	require.Equal(t, 1, o.ExitCode)

	e.NoSudo = true
	o, err = e.RunLocal(context.Background(), l, h, args)
	require.NoError(t, err)
	require.Equal(t, 0, o.ExitCode)
	require.Contains(t, string(o.Stdout), "gpuprep")

	// root: no sudo either
	e.NoSudo = false
	l.Euid = func() int { return 0 }
	_, err = e.RunLocal(context.Background(), l, h, args)
	require.NoError(t, err)
}

// Output past the bound stops the command and is that host's error.
func TestLocalHostOutputBound(t *testing.T) {
	bin, err := LoadBinary(sshdtest.Gpuprep(t))
	require.NoError(t, err)
	e := &Exec{Binary: bin, MaxStdout: 100}
	_, err = e.RunLocal(context.Background(), &Local{Euid: func() int { return 0 }}, &Host{Name: "here", Local: true}, []string{"checks"})
	var big *OutputLimitError
	require.True(t, errors.As(err, &big), "%v", err)
	require.Contains(t, err.Error(), "gpuprep on host here (local)")
}

type recordingRunner struct{ calls *[][]string }

func (r recordingRunner) RunStreams(ctx context.Context, stdout, stderr io.Writer, argv ...string) (int, error) {
	*r.calls = append(*r.calls, argv)
	return hostExecRunner().RunStreams(ctx, stdout, stderr, argv...)
}

// checkIDs are the host, GPUs and checks a readiness report names.
func checkIDs(t *testing.T, out []byte) []string {
	var rep struct {
		Host     struct{ Name string }
		GPUs     []struct{ Address string }
		Findings []struct{ Check string }
	}
	require.NoError(t, json.Unmarshal(out, &rep))
	ids := []string{"host " + rep.Host.Name}
	for _, g := range rep.GPUs {
		ids = append(ids, "gpu "+g.Address)
	}
	for _, c := range rep.Findings {
		ids = append(ids, c.Check)
	}
	require.Greater(t, len(ids), 3)
	return ids
}
