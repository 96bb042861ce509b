//go:build linux && amd64

package vgpu_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/crashtest"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// The helper marks each command it runs with system calls that change
// nothing (getpgid of pids no process has): the tracer kills it only in
// its own code, between commands, never in a child it is waiting for.
const (
	cmdStart = 0x7ab2_0001
	cmdEnd   = 0x7ab2_0002
)

type markedRunner struct{ *vgputest.Host }

func (m markedRunner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	_, _ = syscall.Getpgid(cmdStart)
	defer func() { _, _ = syscall.Getpgid(cmdEnd) }()
	return m.Host.Run(ctx, argv...)
}

// TestUpgradeCrashHelper is the process TestUpgradeKilled kills: with
// GPUPREP_UPGRADE_ROOT set it installs GPUPREP_UPGRADE_DRIVER there, as
// vgpu install does.
func TestUpgradeCrashHelper(t *testing.T) {
	dir := os.Getenv("GPUPREP_UPGRADE_ROOT")
	if dir == "" {
		t.Skip("helper process for the upgrade crash test")
	}
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	env := effect.Effector{Root: h.Root, Runner: markedRunner{h}, Sysfs: h}
	p, err := vgpu.PlanInstall(context.Background(), env, vgpu.InstallOptions{Driver: os.Getenv("GPUPREP_UPGRADE_DRIVER"), GPUs: []vgpu.GPUInfo{t4}})
	if err == nil {
		err = p.Execute(context.Background(), env, nil)
	}
	fmt.Fprintf(os.Stderr, "helper: done: %v\n", err)
}

// upgradeTraced runs the helper on r's root under ptrace, killing it at the
// kill-th file-changing system call it makes outside the commands it runs
// (0: never); it returns how many there were.
func upgradeTraced(t *testing.T, r *rig, runB string, kill int) (int, bool, string) {
	t.Helper()
	n, inCmd := 0, false
	killed, out := crashtest.Run(t, "TestUpgradeCrashHelper",
		[]string{"GPUPREP_UPGRADE_ROOT=" + r.h.Dir, "GPUPREP_UPGRADE_DRIVER=" + runB},
		func(regs *syscall.PtraceRegs) bool {
			if regs.Orig_rax == syscall.SYS_GETPGID && (regs.Rdi == cmdStart || regs.Rdi == cmdEnd) {
				inCmd = regs.Rdi == cmdStart
				return false
			}
			if inCmd || !crashtest.Mutating(regs) {
				return false
			}
			n++
			return n == kill
		})
	return n, killed, out
}

// The upgrade A → B killed (SIGKILL, as a power cut or the OOM killer) at
// points spread over the whole run — keeping A, recording, removing the
// vGPUs, uninstalling A, installing B, recreating, verifying — and run
// again: it ends with B installed and the same vGPUs, one change recorded
// done; rollback's revert then puts A back with them.
func TestUpgradeKilledAndResumed(t *testing.T) {
	r0, _, runB0 := upgradeRig(t)
	total, killed, out := upgradeTraced(t, r0, runB0, 0)
	require.False(t, killed)
	require.Contains(t, out, "helper: done: <nil>")
	require.Equal(t, verB, vgpu.InstalledVersion(r0.h.Root))
	require.Greater(t, total, 20, out)

	for _, at := range []int{1, total / 6, total / 3, total / 2, 2 * total / 3, 5 * total / 6, total - 1} { // the last: the helper's own line on stderr
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			r, uuids, runB := upgradeRig(t)
			_, killed, out := upgradeTraced(t, r, runB, at)
			require.True(t, killed, out)
			require.NotContains(t, out, "helper: done")

			r.opts.Driver = runB
			p, err := r.install(t)
			require.NoError(t, err, "resumed after a kill at %d of %d", at, total)
			require.Equal(t, verB, vgpu.InstalledVersion(r.h.Root), titles(p))
			require.Equal(t, uuids, liveUUIDs(r))
			j, err := journal.Read(r.h.Root)
			require.NoError(t, err) // no torn line: Append writes a line at once
			var done []journal.Entry
			for _, en := range j {
				if en.Kind == vgpu.KindUpgrade {
					done = append(done, en)
				}
			}
			require.Len(t, done, 1)

			p, err = vgpu.PlanRevert(context.Background(), r.env, done[0].Path)
			require.NoError(t, err)
			require.NoError(t, p.Execute(context.Background(), r.env, nil))
			require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
			require.Equal(t, uuids, liveUUIDs(r))
		})
	}
}
