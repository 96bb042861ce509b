package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuprep/gpuprep/internal/host"
)

// changesHost are the commands that change the host they run on (files,
// sysfs, installed software), by path below gpuprep. One runs at a time on a
// host: two at once would each read a file, change it and write it back, and
// one change would be lost (see hostLock).
var changesHost = map[string]bool{
	"apply": true, "rollback": true,
	"grub ensure": true, "grub remove": true,
	"vfio bind": true, "vfio unbind": true,
	"vgpu install": true, "vgpu apply": true,
	"label": true,
}

// lockFile is where the lock is held, in the host root: in gpuprep's own
// state directory beside the journal (root's, mode 0700), where no other
// user can make the file, hold it, or put a symlink in its place (as in the
// world-writable /run/lock).
const lockFile = "/var/lib/gpuprep/lock"

// hostLock takes the host's gpuprep lock for cmd when cmd changes the host
// (not for a --dry-run, nor for a packed --root, which refuses every write),
// once rootRule has accepted the command for its --root.
// A lock another gpuprep holds is an error naming that process: waiting could
// mean acting on what it has just changed. The lock is an flock(2) on the
// file, released when the command ends or the process dies; the file holds
// the holder's process ID and command for the message.
func hostLock(cmd *cobra.Command, g *globals) error {
	name := strings.TrimPrefix(cmd.CommandPath(), "gpuprep ")
	if changesHost[name] && g.systemDisk && !offlineWrites[name] {
		// also a dry run: what it would show, an image cannot take
		root, err := g.hostRoot()
		if err != nil {
			return err
		}
		return errOfflineImage(name, root)
	}
	if !locks(cmd, name) {
		return nil
	}
	root, err := g.hostRoot()
	if err != nil {
		return err
	}
	// accepted before the lock: a refused run leaves no lock file behind
	if err := rootRule(name, root, g.dep()); err != nil {
		return err
	}
	if root.Writable(lockFile) != nil {
		return nil
	}
	f, err := takeLock(root)
	if err != nil {
		return err
	}
	// Who holds it, for the message above (written after taking the lock:
	// the file is only ever written by its holder).
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d: %s, since %s\n", os.Getpid(), cmd.CommandPath(), time.Now().Format(time.TimeOnly))), 0)
	g.lock = f
	g.deferInterrupts(cmd.ErrOrStderr())
	// apply first asks; until it is answered an interrupt ends it at once
	g.changing.Store(name != "apply")
	g.stopsBetweenSteps = name == "apply"
	return nil
}

// locks says whether command name (cmd) takes the host's lock: one that
// changes the host, not for a --dry-run, and label only --before-join.
func locks(cmd *cobra.Command, name string) bool {
	if !changesHost[name] {
		return false
	}
	if f := cmd.Flags().Lookup("dry-run"); f != nil && f.Value.String() == "true" {
		return false
	}
	if f := cmd.Flags().Lookup("before-join"); name == "label" && f != nil && f.Value.String() != "true" {
		return false // through the API: the cluster changes, not this host (often an admin's workstation)
	}
	return true
}

// takeLock opens the lock file under root and takes its flock; an error
// naming the holder when another gpuprep holds it.
func takeLock(root *host.Root) (*os.File, error) {
	if err := root.MkdirAll(path.Dir(lockFile), 0o700); err != nil {
		return nil, &exitError{code: exitUnknown, err: fmt.Errorf("lock %s: %w", lockFile, err)}
	}
	p, err := root.PathNoFollow(lockFile)
	if err != nil {
		return nil, &exitError{code: exitUnknown, err: fmt.Errorf("lock %s: %w", lockFile, err)}
	}
	// never through a symlink, and only a plain file: it is truncated
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, &exitError{code: exitUnknown, err: fmt.Errorf("lock %s: %w", lockFile, err)}
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close() // nothing written to it
		return nil, &exitError{code: exitUnknown, err: fmt.Errorf("lock %s: not a regular file", lockFile)}
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		_ = f.Close() // not ours: nothing written to it
		if errors.Is(err, unix.EWOULDBLOCK) {
			h := strings.TrimSpace(string(holder))
			if h == "" {
				h = "another process"
			}
			return nil, &exitError{code: exitUnknown, err: fmt.Errorf("another gpuprep is changing this host (%s, holding %s): nothing was done; run this again when it has finished", h, lockFile)}
		}
		return nil, &exitError{code: exitUnknown, err: fmt.Errorf("lock %s: %w", lockFile, err)}
	}
	return f, nil
}

// offlineWrites are the writing commands that may change a system disk
// (--root DIR --system-disk, an offline system image): their changes are
// files only (kernel arguments, labels in the kubelet's arguments), and
// rollback undoes them there. The others change the running kernel (sysfs,
// drivers, daemons) of the machine gpuprep runs on.
var offlineWrites = map[string]bool{
	"grub ensure": true, "grub remove": true,
	"label":    true, // --before-join: through the API, hostLock never asks
	"rollback": true,
}

// rootRule is the one rule for a command that writes (changesHost) and
// --root (docs/root.md): it changes / — the machine gpuprep runs on — or,
// for the file-only commands (offlineWrites), a root named a system disk
// with --system-disk. Against any other root it only shows its changes
// (--dry-run; gpuprep plan for apply) and is refused, with this one
// message, before the lock and before anything is read or written.
func rootRule(name string, root *host.Root, d *deps) error {
	switch {
	case root.IsLive():
		return nil
	case root.IsSystemDisk() && offlineWrites[name]:
		return nil
	case root.IsSystemDisk():
		return errOfflineImage(name, root)
	case d.fixtureRootsWritable && !root.IsSystemDisk():
		return nil // the tests' fixture roots (deps.fixtureRootsWritable)
	}
	how := "here --dry-run shows its changes"
	switch name {
	case "apply":
		how = "here gpuprep plan shows its changes"
	case "rollback", "vfio unbind":
		how = "here nothing is changed"
	}
	return usageErr("--root %s: gpuprep %s changes only / (or, for grub ensure, grub remove, label --before-join and rollback, a system disk named with --system-disk); %s; see docs/root.md", root.Name(), name, how)
}

// interruptNoted, when set, is called once an interrupt is noted (tests
// wait for it).
var interruptNoted atomic.Pointer[func()]

// deferInterrupts keeps an interrupt (SIGINT, SIGTERM, SIGHUP) from ending
// a command that changes the host in the middle of a change: the first one
// is noted (g.interrupted) and said; the command finishes the change in
// progress (apply stops before its next step) and ends; a second one ends
// the process at once. Commands run by gpuprep are in process groups of
// their own (host.ExecRunner), so a Ctrl-C on the terminal does not cut
// them short either.
func (g *globals) deferInterrupts(stderr io.Writer) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, interruptSignals...)
	// A Ctrl-C also ends what gpuprep's output is piped to (| tee log):
	// the next write would then kill it with SIGPIPE in the middle of the
	// change. Ignored, such a write fails (EPIPE) and the change goes on.
	signal.Ignore(syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case s := <-sig:
				if n == 0 && !g.changing.Load() {
					fmt.Fprintf(stderr, "\ngpuprep: %v: nothing was changed\n", s)
					g.dep().exitOnSignal(128 + signalNumber(s))
					return
				}
				if n == 0 {
					g.interrupted.Store(true)
					what := "finishing this command's changes, then stopping"
					if g.stopsBetweenSteps {
						what = "finishing the step in progress, then stopping"
					}
					fmt.Fprintf(stderr, "gpuprep: %v: %s (once more to stop at once, which may leave a change half done)\n", s, what)
					if f := interruptNoted.Load(); f != nil {
						(*f)()
					}
					continue
				}
				fmt.Fprintf(stderr, "gpuprep: %v again: stopping at once; commands gpuprep started go on; run the same command again, or gpuprep rollback\n", s)
				g.dep().exitOnSignal(128 + signalNumber(s))
				return
			}
		}
	}()
	g.stopInterrupts = func() {
		signal.Stop(sig)
		close(done)
	}
}

// unlock releases the lock hostLock took, if any.
func (g *globals) unlock() {
	if g.stopInterrupts != nil {
		g.stopInterrupts()
		g.stopInterrupts = nil
	}
	if g.lock != nil {
		_ = g.lock.Truncate(0)
		_ = g.lock.Close() // what it holds says who holds the lock, for a message only
		g.lock = nil
	}
}

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}
