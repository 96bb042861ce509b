//go:build linux && amd64

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/crashtest"
	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// The helper marks the moments around each vGPU-creating write with a
// system call that changes nothing (getpgid of a pid no process has), so
// that the tracer can kill it at the first file-changing system call after
// one: markBefore just before the write, markAfter once it has returned.
const (
	markBefore = 0x7ab1_0001
	markAfter  = 0x7ab1_0002
)

// markedSysfs is the vGPU simulator with the writes that create a vGPU
// (mdev create, a VF's current_vgpu_type other than 0) marked.
type markedSysfs struct{ h *vgputest.Host }

func (m markedSysfs) WriteAttr(p, v string) error {
	creates := strings.HasSuffix(p, "/create") || strings.HasSuffix(p, "/nvidia/current_vgpu_type") && v != "0"
	if creates {
		_, _ = syscall.Getpgid(markBefore)
	}
	err := m.h.WriteAttr(p, v)
	if creates && err == nil {
		_, _ = syscall.Getpgid(markAfter)
	}
	return err
}

// TestVGPUApplyCrashHelper is the process the tests below kill: with
// GPUPREP_VGPU_CRASH_ROOT set it runs `gpuprep vgpu apply` (the arguments in
// GPUPREP_VGPU_CRASH_ARGS) on that fixture root, its vGPU attributes
// written through the simulator (markedSysfs).
func TestVGPUApplyCrashHelper(t *testing.T) {
	dir := os.Getenv("GPUPREP_VGPU_CRASH_ROOT")
	if dir == "" {
		t.Skip("helper process for the vgpu apply crash tests")
	}
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	d := realDeps()
	d.vgpuSysfs = func(*host.Root) vgpu.AttrWriter { return markedSysfs{h} }
	args := append([]string{"vgpu", "apply", "--root", dir}, strings.Fields(os.Getenv("GPUPREP_VGPU_CRASH_ARGS"))...)
	out, errs, code := gpuprepWith(t, d, args...)
	fmt.Fprintf(os.Stderr, "helper: exit %d\n%s%s", code, out, errs)
}

// runVGPUApplyTraced runs the helper on dir with args under ptrace and
// SIGKILLs it at the entry of the first file-changing system call for
// which kill, given how many came before it, returns true. It returns how
// many there were and whether it killed the helper.
func runVGPUApplyTraced(t *testing.T, dir, args string, kill func(n int, marks []uint64) bool) (int, bool, string) {
	t.Helper()
	n := 0
	var marks []uint64
	killed, out := crashtest.Run(t, "TestVGPUApplyCrashHelper",
		[]string{"GPUPREP_VGPU_CRASH_ROOT=" + dir, "GPUPREP_VGPU_CRASH_ARGS=" + args},
		func(regs *syscall.PtraceRegs) bool {
			if regs.Orig_rax == syscall.SYS_GETPGID && (regs.Rdi == markBefore || regs.Rdi == markAfter) {
				marks = append(marks, regs.Rdi)
				return false
			}
			if !crashtest.Mutating(regs) {
				return false
			}
			n++
			return kill(n, marks)
		})
	return n, killed, out
}

// A T4 node (mdev-vgpu) whose first T4 has an mdev gpuprep did not create,
// and a config that wants two T4-4Q there: vgpu apply keeps that one and
// creates one.
const foreignT4UUID = "0c2f7a41-9d8e-4b6a-8f3e-51a2b7c9d0e4"

func mdevNodeWithForeign(t *testing.T) (dir, cfg string, foreign map[string]string) {
	t.Helper()
	dir = fixtureRoot(t, "mdev-vgpu")
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	require.NoError(t, h.WriteAttr("/sys/bus/pci/devices/0000:21:00.0/mdev_supported_types/nvidia-224/create", foreignT4UUID))
	cfg = filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  t4:\n    - devices: [0]\n      vgpu-devices:\n        \"T4-4Q\": 2\n"), 0o644))
	foreign = map[string]string{foreignT4UUID: "0000:21:00.0 nvidia-224"}
	require.Equal(t, foreign, mdevsOf(t, dir))
	return dir, cfg, foreign
}

// vfMdevNodeWithForeign is an A16 GPU whose VFs are its mdev parents
// (vfmdev-vgpu), with an A16-4Q gpuprep did not create on its first VF, and
// a config that wants three: vgpu apply keeps that one and creates two, on
// the next two VFs.
func vfMdevNodeWithForeign(t *testing.T) (dir, args string, foreign map[string]string) {
	t.Helper()
	dir = fixtureRoot(t, "vfmdev-vgpu")
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	require.NoError(t, h.WriteAttr("/sys/bus/pci/devices/"+fixture.A16VFs[0]+"/mdev_supported_types/nvidia-713/create", foreignT4UUID))
	foreign = map[string]string{foreignT4UUID: fixture.A16VFs[0] + " nvidia-713"}
	require.Equal(t, foreign, mdevsOf(t, dir))
	return dir, "-f " + writeConfig(t, "a16", "A16-4Q", 3) + " -c a16", foreign
}

// mdevApplyKilledAt is a T4 node (mdevNodeWithForeign) where vgpu apply of
// its config was killed at the first file-changing system call after the
// helper's mark.
func mdevApplyKilledAt(t *testing.T, mark uint64) (dir, cfg string, foreign map[string]string) {
	t.Helper()
	dir, cfg, foreign = mdevNodeWithForeign(t)
	_, killed, out := runVGPUApplyTraced(t, dir, "-f "+cfg+" -c t4", func(_ int, marks []uint64) bool {
		return len(marks) > 0 && marks[len(marks)-1] == mark
	})
	require.True(t, killed, out)
	require.NotContains(t, out, "helper: exit", "killed before it finished")
	return dir, cfg, foreign
}

// simulatedVGPUApply makes vgpu apply (and apply, rollback, plan) act on
// dir through one vgpuNode.
func simulatedVGPUApply(t *testing.T, dir string) (*vgpuNode, *deps) {
	t.Helper()
	n, d := simulatedVGPUNode(t, dir)
	d.vgpuSysfs = func(*host.Root) vgpu.AttrWriter { return n }
	return n, d
}

// vgpu apply killed right after the write that created an mdev, before it
// did anything else (the write's own record included): the journal names
// the mdev all the same, and rollback removes it and only it.
func TestVGPUApplyKilledAfterCreate(t *testing.T) {
	dir, _, foreign := mdevApplyKilledAt(t, markAfter)
	ms := mdevsOf(t, dir)
	require.Len(t, ms, 2, "the foreign mdev and the one created: %v", ms)
	var created string
	for u := range ms {
		if u != foreignT4UUID {
			created = u
		}
	}
	require.Equal(t, "0000:21:00.0 nvidia-224", ms[created])
	es := journalEntries(t, dir)
	require.Len(t, es, 1, "the intent only: killed before the write's record: %+v", es)
	require.Equal(t, journal.Entry{Time: es[0].Time, Command: "vgpu apply", Kind: provision.KindVGPUIntent,
		Path: "/sys/bus/pci/devices/0000:21:00.0/mdev_supported_types/nvidia-224/create", Device: "0000:21:00.0", After: created}, es[0])

	_, d := simulatedVGPUApply(t, dir)
	out, errs, code := gpuprepWith(t, d, "rollback", "--root", dir)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "Rolled back.")
	require.Equal(t, foreign, mdevsOf(t, dir), "exactly gpuprep's mdev removed")
	require.Equal(t, "3", availableInstances(t, dir, "nvidia-224"))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", dir)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "Nothing to roll back.")
	require.Equal(t, foreign, mdevsOf(t, dir))
}

// The same on an A16 whose VFs are the mdev parents: killed right after the
// first create, on the second VF (the first has the foreign mdev), the
// intent names the mdev and its VF, and rollback removes it and only it.
func TestVGPUApplyKilledAfterCreateOnVF(t *testing.T) {
	dir, args, foreign := vfMdevNodeWithForeign(t)
	_, killed, out := runVGPUApplyTraced(t, dir, args, func(_ int, marks []uint64) bool {
		return len(marks) > 0 && marks[len(marks)-1] == markAfter
	})
	require.True(t, killed, out)
	ms := mdevsOf(t, dir)
	require.Len(t, ms, 2, "%v", ms)
	es := journalEntries(t, dir)
	require.Len(t, es, 1, "the intent only: %+v", es)
	require.Equal(t, "/sys/bus/pci/devices/"+fixture.A16VFs[1]+"/mdev_supported_types/nvidia-713/create", es[0].Path)
	require.Equal(t, fixture.A16VFs[1]+" nvidia-713", ms[es[0].After])

	_, d := simulatedVGPUApply(t, dir)
	out, errs, code := gpuprepWith(t, d, "rollback", "--root", dir)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, foreign, mdevsOf(t, dir), "exactly gpuprep's mdev removed")
	g := vgpu.Read(mustRoot(t, dir), fixture.A16)
	require.Equal(t, 1, g.Parents[1].Free("nvidia-713"), "its VF free again")
	require.Equal(t, 3, g.Types[2].Available, "the GPU takes three more A16-4Q")
}

func mustRoot(t *testing.T, dir string) *host.Root {
	t.Helper()
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r
}

// vgpu apply killed at the create write itself, its intent recorded and the
// mdev not made: rollback has nothing to undo, and says so.
func TestVGPUApplyKilledAtCreate(t *testing.T) {
	dir, cfg, foreign := mdevApplyKilledAt(t, markBefore)
	require.Equal(t, foreign, mdevsOf(t, dir), "no mdev made")
	es := journalEntries(t, dir)
	require.Len(t, es, 1, "%+v", es)
	require.Equal(t, provision.KindVGPUIntent, es[0].Kind)
	require.NotContains(t, foreign, es[0].After)

	n, d := simulatedVGPUApply(t, dir)
	out, errs, code := gpuprepWith(t, d, "rollback", "--root", dir)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "Nothing to roll back.")
	require.Equal(t, foreign, mdevsOf(t, dir))
	require.Empty(t, n.k.Commands)
	require.Empty(t, n.h.Commands())
	// and a re-run creates the mdev (another UUID), which rollback removes
	out, errs, code = gpuprepWith(t, d, "vgpu", "apply", "--root", dir, "-f", cfg, "-c", "t4")
	require.Equal(t, exitOK, code, out+errs)
	require.Len(t, mdevsOf(t, dir), 2)
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", dir)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, foreign, mdevsOf(t, dir))
}

// vgpu apply killed at random file-changing system calls (every one with
// GPUPREP_CRASH_ALL=1), on mdev (beside a foreign mdev: a T4's PF, and an
// A16's VFs as mdev parents) and on SR-IOV (an H200's VFs): every vGPU there is that was not there before is named by
// the journal, and rollback leaves exactly the vGPUs there were before.
func TestVGPUApplyCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills vgpu apply at 16 points")
	}
	type scenario struct {
		name    string
		node    func(t *testing.T) (dir, args string, foreign map[string]string)
		created int
	}
	scenarios := []scenario{
		{name: "mdev", created: 1, node: func(t *testing.T) (string, string, map[string]string) {
			dir, cfg, foreign := mdevNodeWithForeign(t)
			return dir, "-f " + cfg + " -c t4", foreign
		}},
		{name: "vf-mdev", created: 2, node: vfMdevNodeWithForeign},
		{name: "sriov", created: 2, node: func(t *testing.T) (string, string, map[string]string) {
			dir := fixtureRoot(t, "sriov-vgpu")
			cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  h200:\n    - devices: all\n      vgpu-devices:\n        \"H200X-70C\": 2\n"), 0o644))
			require.Empty(t, vgpusOf(t, dir))
			return dir, "-f " + cfg + " -c h200", nil
		}},
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			// a clean traced run: how many file-changing system calls
			dir, args, foreign := sc.node(t)
			total, killed, out := runVGPUApplyTraced(t, dir, args, func(int, []uint64) bool { return false })
			require.False(t, killed)
			require.Contains(t, out, "helper: exit 0", out)
			require.Len(t, vgpusOf(t, dir), len(foreign)+sc.created, out)
			points := rng.Perm(total)[:min(total, 8)]
			if os.Getenv("GPUPREP_CRASH_ALL") != "" {
				points = rng.Perm(total)
			}
			t.Logf("%s: %d file-changing system calls; killed at %d of them", sc.name, total, len(points))
			for _, p := range points {
				at := p + 1
				dir, args, foreign := sc.node(t)
				before := crashSnap(t, dir)
				_, killed, out := runVGPUApplyTraced(t, dir, args, func(n int, _ []uint64) bool { return n == at })
				require.True(t, killed, "at %d: %s", at, out)
				msg := fmt.Sprintf("%s killed at %d", sc.name, at)
				checkJournalAfterKill(t, dir, before, crashSnap(t, dir), foreign, msg)

				_, d := simulatedVGPUNode(t, dir)
				out, errs, code := gpuprepWith(t, d, "rollback", "--root", dir)
				require.Equal(t, exitOK, code, "%s: rollback: %s", msg, out+errs)
				require.Equal(t, before.vgpus, vgpusOf(t, dir), "%s, then rolled back", msg)
			}
		})
	}
}
