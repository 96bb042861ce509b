//go:build linux && amd64

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/crashtest"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// TestApplyCrashHelper is the process TestApplyCrash kills: with
// GPUPREP_APPLY_CRASH_ROOT set it runs `gpuprep apply` (the arguments in
// GPUPREP_APPLY_CRASH_ARGS) on that fixture root through the kernel simulator.
func TestApplyCrashHelper(t *testing.T) {
	dir := os.Getenv("GPUPREP_APPLY_CRASH_ROOT")
	if dir == "" {
		t.Skip("helper process for TestApplyCrash")
	}
	simulatedKernel(t)
	args := append(strings.Fields(os.Getenv("GPUPREP_APPLY_CRASH_ARGS")), "--root", dir)
	out, errs, code := gpuprep(t, args...)
	fmt.Fprintf(os.Stderr, "helper: exit %d\n%s%s", code, out, errs)
}

// runTraced runs the helper on dir under ptrace and SIGKILLs it at the entry
// of its killAt-th mutating syscall (0: never). It returns how many
// mutating syscalls it saw and whether it killed the helper.
func runTraced(t *testing.T, dir, args string, killAt int) (int, bool, string) {
	t.Helper()
	n := 0
	killed, out := crashtest.Run(t, "TestApplyCrashHelper",
		[]string{"GPUPREP_APPLY_CRASH_ROOT=" + dir, "GPUPREP_APPLY_CRASH_ARGS=" + args},
		func(regs *syscall.PtraceRegs) bool {
			if !crashtest.Mutating(regs) {
				return false
			}
			n++
			return n == killAt
		})
	return n, killed, out
}

// crashScenario is one apply run that gets killed.
type crashScenario struct {
	name    string
	fixture string
	args    string
	setup   func(t *testing.T, dir string) // brings the root to where this apply starts
	finish  func(t *testing.T, dir string) // a complete apply from there, after a kill
}

func TestApplyCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills apply at 50+ points")
	}
	simulatedKernel(t)
	vmArgs := "apply --mode vm-passthrough --yes"
	applyVM := func(t *testing.T, dir string, want int) {
		_, errs, code := gpuprep(t, append(strings.Fields(vmArgs), "--root", dir)...)
		require.Equal(t, want, code, errs)
	}
	scenarios := []crashScenario{
		{name: "before-reboot", fixture: "iommu-off-kernel", args: vmArgs,
			finish: func(t *testing.T, dir string) {
				applyVM(t, dir, exitNeedReboot)
				simulateReboot(t, dir)
				applyVM(t, dir, exitOK)
			}},
		{name: "after-reboot", fixture: "iommu-off-kernel", args: vmArgs,
			setup: func(t *testing.T, dir string) {
				applyVM(t, dir, exitNeedReboot)
				simulateReboot(t, dir)
			},
			finish: func(t *testing.T, dir string) { applyVM(t, dir, exitOK) }},
		{name: "container", fixture: "vfio-bound", args: "apply --mode container --yes",
			finish: func(t *testing.T, dir string) {
				_, errs, code := gpuprep(t, "apply", "--mode", "container", "--yes", "--root", dir)
				require.Equal(t, exitOK, code, errs)
			}},
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))

	type state struct {
		files   map[string]string
		drivers map[string]string
	}
	snap := func(dir string) state {
		s := state{files: tree(t, dir), drivers: map[string]string{}}
		r, err := host.NewRoot(dir)
		require.NoError(t, err)
		for _, a := range r.Names("/sys/bus/pci/devices") {
			s.drivers[a] = r.LinkBase("/sys/bus/pci/devices/" + a + "/driver")
		}
		return s
	}
	type prepared struct {
		pristine, before, after, done state
		total                         int
	}
	prep := map[string]prepared{}
	newRoot := func(fx string) string {
		dir := fixtureRoot(t, fx)
		withTools(t, dir)
		return dir
	}
	for _, sc := range scenarios {
		// a clean, traced run: the states before and after this apply, and
		// how many mutating syscalls it makes
		dir := newRoot(sc.fixture)
		var p prepared
		p.pristine = snap(dir)
		if sc.setup != nil {
			sc.setup(t, dir)
		}
		p.before = snap(dir)
		n, _, out := runTraced(t, dir, sc.args, 0)
		require.Greater(t, n, 10, out)
		p.after, p.total = snap(dir), n
		sc.finish(t, dir) // from a finished apply, finishing changes nothing more than the steps after it
		p.done = snap(dir)
		prep[sc.name] = p
		t.Logf("%s: %d mutating syscalls", sc.name, n)
	}

	// random points (GPUPREP_CRASH_ALL=1: every point of every scenario)
	type point struct{ sc, at int }
	var points []point
	if os.Getenv("GPUPREP_CRASH_ALL") != "" {
		for i, sc := range scenarios {
			for at := 1; at <= prep[sc.name].total; at++ {
				points = append(points, point{i, at})
			}
		}
	} else {
		for i := 0; i < 200; i++ {
			points = append(points, point{i % len(scenarios), 1 + rng.IntN(prep[scenarios[i%len(scenarios)].name].total)})
		}
	}
	kills := 0
	for _, pt := range points {
		if kills >= 54 && os.Getenv("GPUPREP_CRASH_ALL") == "" {
			break
		}
		sc := scenarios[pt.sc]
		p := prep[sc.name]
		dir := newRoot(sc.fixture)
		if sc.setup != nil {
			sc.setup(t, dir)
		}
		at := pt.at
		_, killed, out := runTraced(t, dir, sc.args, at)
		if !killed {
			continue
		}
		kills++
		// every file is old or new (a temporary file of an interrupted atomic write aside)
		now := snap(dir)
		for path, cur := range now.files {
			if strings.Contains(path, ".gpuprep-tmp-") {
				continue
			}
			old, hadOld := p.before.files[path]
			nw, hasNew := p.after.files[path]
			require.True(t, hadOld && cur == old || hasNew && cur == nw, "%s killed at %d: %s is neither old nor new:\n%s\n%s", sc.name, at, path, cur, out)
		}
		for path := range p.before.files {
			_, inNew := p.after.files[path]
			if _, ok := now.files[path]; !ok && inNew {
				t.Fatalf("%s killed at %d: %s vanished", sc.name, at, path)
			}
		}
		r, err := host.NewRoot(dir)
		require.NoError(t, err)
		_, err = journal.Read(r)
		require.NoError(t, err, "%s killed at %d: the journal", sc.name, at)

		// apply or rollback afterwards finishes the job
		if kills%2 == 0 {
			sc.finish(t, dir)
			got := snap(dir)
			require.Equal(t, p.done.files, got.files, "%s killed at %d, then applied", sc.name, at)
			require.Equal(t, p.done.drivers, got.drivers, "%s killed at %d, then applied", sc.name, at)
		} else {
			_, errs, code := gpuprep(t, "rollback", "--root", dir)
			require.Contains(t, []int{exitOK, exitNeedReboot}, code, "%s killed at %d: rollback: %s", sc.name, at, errs)
			got := snap(dir)
			require.Equal(t, p.pristine.files, got.files, "%s killed at %d, then rolled back", sc.name, at)
			require.Equal(t, p.pristine.drivers, got.drivers, "%s killed at %d, then rolled back", sc.name, at)
		}
	}
	require.GreaterOrEqual(t, kills, 50)
	t.Logf("%d kills", kills)
}
