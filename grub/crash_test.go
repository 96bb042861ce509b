//go:build linux && amd64

package grub

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// TestCrashHelper is the process TestCrashBeforeRename kills: with
// GPUPREP_CRASH_ROOT set it runs a real grub ensure (files only) on that root.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv("GPUPREP_CRASH_ROOT")
	if dir == "" {
		t.Skip("helper process for TestCrashBeforeRename")
	}
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	b, err := Detect(root)
	require.NoError(t, err)
	p, err := b.PlanEdit(intelMode, false)
	require.NoError(t, err)
	require.NoError(t, p.Apply(context.Background(), root, host.NoRunner{}, "grub ensure", time.Now()))
}

// Syscall numbers on amd64.
const (
	sysRename    = 82
	sysRenameat  = 264
	sysRenameat2 = 316
)

// TestCrashBeforeRename runs gpuprep's write path in a child process under
// ptrace, stops it at its first rename(2) — after the new content was
// written and fsynced to the temporary file, before it replaces the
// original — and SIGKILLs it there. The original file must be intact.
func TestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "debian", "etc", "default", "grub"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc", "default"), 0o755))
	target := filepath.Join(dir, "etc", "default", "grub")
	require.NoError(t, os.WriteFile(target, src, 0o644))

	runtime.LockOSThread() // every ptrace call must come from the tracing thread
	defer runtime.UnlockOSThread()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GPUPREP_CRASH_ROOT="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a traced process here: %v", err)
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	_, err = syscall.Wait4(pid, &ws, syscall.WALL, nil) // stopped at exec
	require.NoError(t, err)
	const opts = syscall.PTRACE_O_TRACESYSGOOD | syscall.PTRACE_O_TRACECLONE | 0x100000 /* EXITKILL */
	if err := syscall.PtraceSetOptions(pid, opts); err != nil {
		_ = cmd.Process.Kill()
		t.Skipf("ptrace not permitted here: %v", err)
	}
	require.NoError(t, syscall.PtraceSyscall(pid, 0))
	killed := false
	for {
		wpid, err := syscall.Wait4(-1, &ws, syscall.WALL, nil)
		if err == syscall.ECHILD {
			break
		}
		require.NoError(t, err)
		if ws.Exited() || ws.Signaled() {
			if wpid == pid {
				break
			}
			continue
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == syscall.SIGTRAP|0x80: // a syscall stop
			var regs syscall.PtraceRegs
			require.NoError(t, syscall.PtraceGetRegs(wpid, &regs))
			switch regs.Orig_rax {
			case sysRename, sysRenameat, sysRenameat2:
				require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
				killed = true
				continue
			}
			_ = syscall.PtraceSyscall(wpid, 0)
		case sig == syscall.SIGTRAP || sig == syscall.SIGSTOP:
			_ = syscall.PtraceSyscall(wpid, 0) // clone events, new threads
		default:
			_ = syscall.PtraceSyscall(wpid, int(sig)) // deliver the signal
		}
	}
	_ = cmd.Wait()
	require.True(t, killed, "the helper never reached rename(2):\n%s", out.String())

	// The original is intact; the new content sits complete in the
	// temporary file that was about to replace it; the backup was written
	// first; the journal has no entry for a change that did not happen.
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, string(src), string(got))
	tmps, _ := filepath.Glob(filepath.Join(dir, "etc", "default", ".grub.gpuprep-tmp-*"))
	require.Len(t, tmps, 1)
	tmp, err := os.ReadFile(tmps[0])
	require.NoError(t, err)
	require.Contains(t, string(tmp), `GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"`)
	baks, _ := filepath.Glob(filepath.Join(dir, "etc", "default", "grub.gpuprep-*.bak"))
	require.Len(t, baks, 1)
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	ents, err := journal.Read(root)
	require.NoError(t, err)
	require.Empty(t, ents)

	// and a rerun completes the change
	b, err := Detect(root)
	require.NoError(t, err)
	p, err := b.PlanEdit(intelMode, false)
	require.NoError(t, err)
	require.NoError(t, p.Apply(context.Background(), root, host.NoRunner{}, "grub ensure", time.Now()))
	got, err = os.ReadFile(target)
	require.NoError(t, err)
	require.Contains(t, string(got), `GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"`)
}
