package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// enabledTimer answers systemctl is-enabled as a node where the commands
// recorded by the kernel simulator ran: enabled once enabled.
type enabledTimer struct{ k host.Runner }

func (r enabledTimer) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 3 && argv[1] == "is-enabled" && argv[2] == provision.NFDTimerName {
		return []byte("enabled\n"), nil
	}
	return r.k.Run(ctx, argv...)
}

// apply --nfd-timer: planned (plan shows the units' diffs and
// changes nothing), installed with the root-owned gpuprep it runs,
// journalled, idempotent, and taken away whole by rollback (the timer
// disabled and stopped first).
func TestApplyNFDTimerInstallsAndRollsBack(t *testing.T) {
	d := realDeps()
	kern := simulatedKernel(t, d)
	root := fixtureRoot(t, "vfio-bound")
	orig := tree(t, root)
	self := fakeGpuprep(t)
	d.gpuprepBinary = func() string { return self }

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "--nfd-timer")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "+++ b"+provision.NFDTimer)
	require.Contains(t, out, "+ExecStart="+vgpu.InstalledBinary+" agent --once --feature-file default --interval 5m")
	require.Contains(t, out, "systemctl enable --now "+provision.NFDTimerName)
	require.Equal(t, orig, tree(t, root), "plan changes nothing")

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--nfd-timer", "--yes")
	require.Equal(t, 0, code, out+errs)
	timer, err := os.ReadFile(filepath.Join(root, provision.NFDTimer))
	require.NoError(t, err)
	require.Equal(t, string(provision.NFDTimerContent()), string(timer))
	svc, err := os.ReadFile(filepath.Join(root, provision.NFDService))
	require.NoError(t, err)
	require.NotContains(t, string(svc), self, "the service runs the root-owned copy, never the file gpuprep ran from")
	require.Equal(t, sha256Hex(t, self), sha256Hex(t, filepath.Join(root, vgpu.InstalledBinary)))
	require.DirExists(t, filepath.Join(root, provision.NFDFeatureDir))
	var ran []string
	for _, c := range (*kern).Commands {
		ran = append(ran, strings.Join(c, " "))
	}
	require.Contains(t, ran, "systemctl enable --now "+provision.NFDTimerName)
	n := journalLen(t, root)

	// in place: nothing to do, nothing journalled
	oldK := d.provisionKernel
	d.provisionKernel = func(r *host.Root) (vfio.Sysfs, host.Runner, error) {
		s, run, err := oldK(r)
		return s, enabledTimer{run}, err
	}
	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--nfd-timer", "--yes")
	require.Equal(t, 0, code, out+errs)
	require.NotContains(t, out, provision.NFDTimerName)
	require.Equal(t, n, journalLen(t, root))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, orig, tree(t, root), "units, binary and the directories made for them are gone")
	ran = nil
	for _, c := range (*kern).Commands {
		ran = append(ran, strings.Join(c, " "))
	}
	require.Contains(t, ran, "systemctl disable --now "+provision.NFDTimerName)
	require.Equal(t, "systemctl daemon-reload", ran[len(ran)-1])
}

// The units: the service is the agent's --once run of the root-owned
// gpuprep, writing only the features.d directory; the timer repeats it.
func TestNFDUnits(t *testing.T) {
	svc := string(provision.NFDServiceContent())
	require.Contains(t, svc, "\nType=oneshot\n")
	require.Contains(t, svc, "\nProtectSystem=strict\nReadWritePaths="+provision.NFDFeatureDir+"\n")
	require.Equal(t, NFDFeatureFile, provision.NFDFeatureDir+"/gpuprep")
	timer := string(provision.NFDTimerContent())
	require.Contains(t, timer, "\nOnUnitActiveSec=5min\n")
	require.Contains(t, timer, "\nWantedBy=timers.target\n")
}

// unitsOracle is systemd-analyze, or a skip (a failure under
// GPUPREP_REQUIRE_ORACLES=1).
func unitsOracle(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		ansibleOracleMissing(t, "systemd-analyze is not installed (apt-get install systemd)")
	}
	return p
}

// verifyUnits runs systemd-analyze verify --root on a root holding the
// units and the binary the service runs, with this machine's own
// *.target units (sysinit.target, timers.target, ...: what every unit
// depends on by default); it returns what systemd said and its exit code.
func verifyUnits(t *testing.T, analyze string, service, timer []byte, binary bool) (string, int) {
	t.Helper()
	root := t.TempDir()
	targets, err := filepath.Glob("/lib/systemd/system/*.target")
	require.NoError(t, err)
	require.NotEmpty(t, targets)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib/systemd/system"), 0o755))
	for _, tg := range targets {
		out, err := exec.Command("cp", "-a", tg, filepath.Join(root, "lib/systemd/system")).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	for p, data := range map[string][]byte{provision.NFDService: service, provision.NFDTimer: timer} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), data, 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, provision.NFDFeatureDir), 0o755))
	if binary {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(vgpu.InstalledBinary)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, vgpu.InstalledBinary), []byte("#!/bin/sh\n"), 0o755))
	}
	cmd := exec.Command(analyze, "verify", "--root="+root, provision.NFDService, provision.NFDTimer)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=info")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// The units apply --nfd-timer writes are ones systemd loads without a
// word: systemd-analyze verify (systemd 252 here) on a root with them and
// the root-owned gpuprep they run says nothing and exits 0. It is a live
// oracle: it exits 1 when that binary is missing and names an unknown key
// or a bad value (which it ignores, exiting 0: hence the output must be
// empty).
func TestNFDUnitsVerify(t *testing.T) {
	analyze := unitsOracle(t)
	svc, timer := provision.NFDServiceContent(), provision.NFDTimerContent()
	out, code := verifyUnits(t, analyze, svc, timer, true)
	require.Equal(t, 0, code, out)
	require.Empty(t, out)

	out, code = verifyUnits(t, analyze, svc, timer, false)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, vgpu.InstalledBinary+" is not executable")
	out, _ = verifyUnits(t, analyze, svc, bytes.Replace(timer, []byte("OnUnitActiveSec"), []byte("OnUnitActivSec"), 1), true)
	require.Contains(t, out, "Unknown key 'OnUnitActivSec' in section [Timer]")
	out, _ = verifyUnits(t, analyze, bytes.Replace(svc, []byte("ProtectHome=yes"), []byte("ProtectHome=maybe"), 1), timer, true)
	require.Contains(t, out, "protect home value")
}

// What the timer's service runs (agent --once --feature-file default) needs
// nothing its sandbox takes away (ProtectSystem=strict with
// ReadWritePaths=the feature directory, ProtectHome, PrivateTmp,
// PrivateNetwork): on a fixture root it writes the feature file and
// nothing else in the root, and nothing in $HOME, the XDG directories or
// $TMPDIR.
func TestNFDServiceWritesOnlyTheFeatureFile(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	home, tmp := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, ".local/state"))
	t.Setenv("TMPDIR", tmp)
	// apply made it: the unit's ReadWritePaths= must exist for the service to start
	require.NoError(t, os.MkdirAll(filepath.Join(root, provision.NFDFeatureDir), 0o755))
	before := fileSet(t, root)
	args := strings.Fields(strings.TrimPrefix(execStart(t), vgpu.InstalledBinary+" "))
	out, errs, code := gpuprep(t, append(args, "--root", root)...)
	require.Equal(t, 0, code, out+errs)
	after := fileSet(t, root)
	var changed []string
	for p, h := range after {
		if before[p] != h {
			changed = append(changed, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			changed = append(changed, p+" (removed)")
		}
	}
	sort.Strings(changed)
	require.Equal(t, []string{NFDFeatureFile}, changed)
	for _, d := range []string{home, tmp} {
		es, err := os.ReadDir(d)
		require.NoError(t, err)
		require.Empty(t, es, "%s: written by the service", d)
	}
}

// execStart is the service's ExecStart= command line.
func execStart(t *testing.T) string {
	t.Helper()
	for _, l := range strings.Split(string(provision.NFDServiceContent()), "\n") {
		if c, ok := strings.CutPrefix(l, "ExecStart="); ok {
			return c
		}
	}
	t.Fatal("no ExecStart=")
	return ""
}

// fileSet: every path below root ("/"-rooted) with its type and content.
func fileSet(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		v := d.Type().String()
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + sha256Sum(b)
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " " + l
		}
		m["/"+filepath.ToSlash(rel)] = v
		return nil
	}))
	return m
}

func sha256Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
