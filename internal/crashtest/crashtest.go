//go:build linux && amd64

// Package crashtest kills a process at a chosen system call, for crash-safety
// tests: the test binary re-runs itself as a helper (one of its own tests,
// doing the real work) under ptrace, and the tracer SIGKILLs it on entry to
// the system call a predicate picks. What the helper left behind is then the
// state a power cut or an OOM kill at that instant would leave.
package crashtest

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// System call numbers (linux/amd64) the tests name.
const (
	SysRename    = 82
	SysRenameat  = 264
	SysRenameat2 = 316
)

// Mutating reports whether the system call entered with regs changes files:
// writes, renames, unlinks, links, mkdirs, syncs, truncates, mode and owner
// changes, and openat with O_CREAT or O_TRUNC.
func Mutating(regs *syscall.PtraceRegs) bool {
	switch regs.Orig_rax {
	case 1, 18, 20, // write, pwrite64, writev
		SysRename, SysRenameat, SysRenameat2,
		87, 263, // unlink, unlinkat
		88, 266, // symlink, symlinkat
		83, 258, // mkdir, mkdirat
		74, 75, 77, // fsync, fdatasync, ftruncate
		90, 91, 92, 93, 260, 268: // chmod, fchmod, chown, fchown, fchownat, fchmodat
		return true
	case 257: // openat
		return regs.Rdx&(syscall.O_CREAT|syscall.O_TRUNC) != 0
	}
	return false
}

// Run runs this test binary's test helperTest (with env added) under ptrace
// and calls kill on entry to every system call of every thread; the first
// time it returns true the helper is SIGKILLed there. It returns whether it
// was killed and the helper's output. It skips the test where ptrace is not
// permitted. The helper's TMPDIR is a t.TempDir, so that what a killed
// helper's t.TempDir and os.MkdirTemp made goes with the test.
func Run(t *testing.T, helperTest string, env []string, kill func(regs *syscall.PtraceRegs) bool) (bool, string) {
	t.Helper()
	runtime.LockOSThread() // every ptrace call must come from the tracing thread
	defer runtime.UnlockOSThread()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helperTest+"$", "-test.count=1")
	// The helper is killed: its own cleanups (t.TempDir's removal) never
	// run. Its temporary files go under a directory of this test's, which
	// this test removes.
	cmd.Env = append(append(os.Environ(), env...), "TMPDIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a traced process here: %v", err)
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil) // stopped at exec
	require.NoError(t, err)
	const opts = syscall.PTRACE_O_TRACESYSGOOD | syscall.PTRACE_O_TRACECLONE | 0x100000 /* EXITKILL */
	if err := syscall.PtraceSetOptions(pid, opts); err != nil {
		_ = cmd.Process.Kill()
		t.Skipf("ptrace not permitted here: %v", err)
	}
	require.NoError(t, syscall.PtraceSyscall(pid, 0))
	inSyscall := map[int]bool{}
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
		if !ws.Stopped() || killed {
			continue
		}
		if killAt(wpid, ws.StopSignal(), inSyscall, kill) {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			killed = true
		}
	}
	_ = cmd.Wait()
	return killed, out.String()
}

// killAt handles the stop of thread wpid by signal sig: it reports whether
// the thread is entering a system call kill picks (the process is then to
// be killed, the thread left stopped); otherwise it lets the thread go on,
// delivering a signal that is not ptrace's own. inSyscall tracks, per
// thread, whether the next syscall stop is an exit.
func killAt(wpid int, sig syscall.Signal, inSyscall map[int]bool, kill func(regs *syscall.PtraceRegs) bool) bool {
	switch {
	case sig == syscall.SIGTRAP|0x80: // a syscall stop: entry and exit alternate per thread
		entry := !inSyscall[wpid]
		inSyscall[wpid] = entry
		if entry {
			var regs syscall.PtraceRegs
			if syscall.PtraceGetRegs(wpid, &regs) == nil && kill(&regs) {
				return true
			}
		}
		_ = syscall.PtraceSyscall(wpid, 0)
	case sig == syscall.SIGTRAP || sig == syscall.SIGSTOP:
		_ = syscall.PtraceSyscall(wpid, 0) // clone events, new threads
	default:
		_ = syscall.PtraceSyscall(wpid, int(sig)) // deliver the signal
	}
	return false
}
