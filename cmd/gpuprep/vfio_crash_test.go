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

// TestVFIOCrashHelper is the process TestVFIOCrash kills: with
// GPUPREP_VFIO_CRASH_ROOT set it runs the gpuprep command in
// GPUPREP_VFIO_CRASH_ARGS (vfio bind, vfio unbind) on that fixture root
// through the kernel simulator.
func TestVFIOCrashHelper(t *testing.T) {
	dir := os.Getenv("GPUPREP_VFIO_CRASH_ROOT")
	if dir == "" {
		t.Skip("helper process for TestVFIOCrash")
	}
	d := realDeps()
	simulated(t, d)
	args := append(strings.Fields(os.Getenv("GPUPREP_VFIO_CRASH_ARGS")), "--root", dir)
	out, errs, code := gpuprepWith(t, d, args...)
	fmt.Fprintf(os.Stderr, "helper: exit %d\n%s%s", code, out, errs)
}

// runVFIOTraced runs the helper with args on dir under ptrace and SIGKILLs
// it at the entry of its killAt-th file-changing system call (0: never). It
// returns how many there were and whether it killed the helper.
func runVFIOTraced(t *testing.T, dir, args string, killAt int) (int, bool, string) {
	t.Helper()
	n := 0
	killed, out := crashtest.Run(t, "TestVFIOCrashHelper",
		[]string{"GPUPREP_VFIO_CRASH_ROOT=" + dir, "GPUPREP_VFIO_CRASH_ARGS=" + args},
		func(regs *syscall.PtraceRegs) bool {
			if !crashtest.Mutating(regs) {
				return false
			}
			n++
			return n == killAt
		})
	return n, killed, out
}

// vfioState is what a root holds for vfio bind and unbind: its files (tree),
// and each PCI function's driver and driver_override ("" for none).
type vfioState struct {
	files, drivers, overrides map[string]string
}

func vfioSnap(t *testing.T, dir string) vfioState {
	t.Helper()
	s := crashSnap(t, dir)
	st := vfioState{files: s.files, drivers: s.drivers, overrides: map[string]string{}}
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	for a := range s.drivers {
		ov, _ := r.ReadString("/sys/bus/pci/devices/" + a + "/driver_override")
		if ov == "(null)" {
			ov = ""
		}
		st.overrides[a] = ov
	}
	return st
}

// checkDriversJournalled: every device whose driver or driver_override
// differs from before the command has an entry of that command that names
// it (an intent at least), so that rollback finds the driver to restore.
func checkDriversJournalled(t *testing.T, dir, command string, before, now vfioState, msg string) {
	t.Helper()
	named := map[string]bool{}
	for _, e := range journalEntries(t, dir) {
		if e.Command == command && (e.Kind == journal.KindDriver || e.Kind == journal.KindDriverIntent) {
			named[e.Device] = true
		}
	}
	for a, d := range now.drivers {
		if d != before.drivers[a] || now.overrides[a] != before.overrides[a] {
			require.True(t, named[a], "%s: %s went from %q (override %q) to %q (override %q) and the journal has no %s entry for it",
				msg, a, before.drivers[a], before.overrides[a], d, now.overrides[a], command)
		}
	}
}

// TestVFIOCrash kills vfio bind, vfio bind --persist and vfio unbind (of a
// bind with and without --persist) at random file-changing system calls (every one with
// GPUPREP_CRASH_ALL=1) on a Turing card with four functions. After each
// kill the journal names every device whose driver changed; then, in turn,
// rollback puts back exactly the drivers, overrides and files there were
// before gpuprep, or the same command run again ends where an uninterrupted
// run does.
func TestVFIOCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills vfio bind and unbind at 32 points")
	}
	d := realDeps()
	simulated(t, d)
	simulatedKernel(t, d) // rollback's
	bind := func(args ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			_, errs, code := gpuprepWith(t, d, append([]string{"vfio", "bind", "--root", dir}, args...)...)
			require.Equal(t, exitOK, code, errs)
		}
	}
	scenarios := []struct {
		name, args string
		setup      func(t *testing.T, dir string)
	}{
		{name: "bind", args: "vfio bind"},
		{name: "bind-persist", args: "vfio bind --persist"},
		{name: "unbind", args: "vfio unbind", setup: bind("--persist")},
		// no persistent file to tell which devices were bound: only the
		// journal does, for one left unbound with its override cleared
		{name: "unbind-live", args: "vfio unbind", setup: bind()},
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			start := fixtureRoot(t, "turing-multifunction")
			withTools(t, start)
			pristine := vfioSnap(t, start)
			if sc.setup != nil {
				sc.setup(t, start)
			}
			before := vfioSnap(t, start)
			command := strings.Join(strings.Fields(sc.args)[:2], " ")

			dir := t.TempDir()
			require.NoError(t, copyTree(start, dir))
			total, killed, out := runVFIOTraced(t, dir, sc.args, 0)
			require.False(t, killed)
			require.Contains(t, out, "helper: exit 0", out)
			after := vfioSnap(t, dir)
			require.NotEqual(t, before.drivers, after.drivers, "the command moves devices")

			points := rng.Perm(total)[:min(total, 8)]
			if os.Getenv("GPUPREP_CRASH_ALL") != "" {
				points = rng.Perm(total)
			}
			t.Logf("%s: %d file-changing system calls; killed at %d of them", sc.name, total, len(points))
			for i, p := range points {
				at := p + 1
				dir := t.TempDir()
				require.NoError(t, copyTree(start, dir))
				_, killed, out := runVFIOTraced(t, dir, sc.args, at)
				require.True(t, killed, "at %d: %s", at, out)
				msg := fmt.Sprintf("%s killed at %d", sc.name, at)
				checkDriversJournalled(t, dir, command, before, vfioSnap(t, dir), msg)

				if i%2 == 1 {
					out, errs, code := gpuprepWith(t, d, append(strings.Fields(sc.args), "--root", dir)...)
					require.Equal(t, exitOK, code, "%s: run again: %s", msg, out+errs)
					got := vfioSnap(t, dir)
					require.Equal(t, after.drivers, got.drivers, "%s, then run again: %s", msg, out)
					require.Equal(t, after.overrides, got.overrides, "%s, then run again", msg)
					require.Equal(t, after.files, got.files, "%s, then run again", msg)
					continue
				}
				out, errs, code := gpuprepWith(t, d, "rollback", "--root", dir)
				require.Contains(t, []int{exitOK, exitNeedReboot}, code, "%s: rollback: %s", msg, out+errs)
				got := vfioSnap(t, dir)
				require.Equal(t, pristine.drivers, got.drivers, "%s, then rolled back: %s", msg, out)
				require.Equal(t, pristine.overrides, got.overrides, "%s, then rolled back", msg)
				require.Equal(t, pristine.files, got.files, "%s, then rolled back", msg)
			}
		})
	}
}
