package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/internal/snapshot"
	"github.com/gpuprep/gpuprep/vgpu"
)

func init() { register(newSnapshotCmd) }

// snapshotRuns are the read-only commands whose reads a snapshot holds, and
// which it must reproduce.
var snapshotRuns = [][]string{
	{"check", "-o", "json"},
	{"vfio", "status", "-o", "json"},
	{"vgpu", "types", "-o", "json"},
	{"grub", "show", "-o", "json"},
	{"grub", "show", "--mode", "vm-vgpu", "-o", "json"},
	{"plan", "--mode", "container", "-o", "json"},
	{"plan", "--mode", "vm-passthrough", "-o", "json"},
}

func newSnapshotCmd(g *globals) *cobra.Command {
	var sel []string
	cmd := &cobra.Command{
		Use:   "snapshot DIR|FILE.tar.gz",
		Short: "Copy what gpuprep reads on this node into DIR, laid out as a root: gpuprep check --root DIR then gives this node's verdicts anywhere",
		Long: `snapshot runs gpuprep's read-only commands (check, vfio status, vgpu types,
grub show, plan for container and vm-passthrough) on this node, notes every
file, directory and symlink they read, and copies exactly those, as each read
returned them, into DIR (new or empty) laid out like the node's root: sysfs
attributes and links, /proc files, the bootloader and kubelet configuration
files gpuprep reads, MSR values. Given FILE.tar.gz (which must not exist) it
writes that packed instead, whole or not at all. Nothing else is read, and
nothing on the node is changed.

Then it runs the same commands against the snapshot and compares: one that
does not reproduce the node's output is reported (exit 1). Attach it to a bug
report, keep it as a fixture, or compare a node before and after a change:
gpuprep check --root DIR, or --root FILE.tar.gz.

Run it as root, as check: without root some files (MSRs, ACPI tables) cannot
be read, and the snapshot holds what this user saw. The configuration files
copied are listed; read them before you share a snapshot. Of the processes,
only those holding NVIDIA or VFIO devices and the vGPU daemons keep their
names and open device files.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSnapshot(cmd, g, args[0], sel)
		},
	}
	cmd.Flags().StringArrayVar(&sel, "select", nil, "devices treated as GPUs, as check --select (default: every NVIDIA GPU)")
	return cmd
}

func runSnapshot(cmd *cobra.Command, g *globals, dir string, sel []string) error {
	src, err := g.hostRoot()
	if err != nil {
		return err
	}
	abs, err := snapshotDir(src, dir)
	if err != nil {
		return err
	}
	// Everything is made under temporary names beside the target (checked
	// here, before any command runs) and put in place at the end: the
	// target is whole or absent, also after an interrupt or a failure.
	t, err := newSnapshotTarget(abs, g.dep().exitOnSignal)
	if err != nil {
		return err
	}
	defer t.discard()
	runs := snapshotArgs(sel)
	rec := host.NewRecorder()
	live := make([]string, len(runs))
	for i, args := range runs {
		live[i] = g.dep().snapshotRun(args, &globals{root: src.Dir(), rec: rec, deps: g.deps})
	}
	if err := refusedRun(runs, live); err != nil {
		return err
	}
	done := tempsBusy()
	defer done()
	st, err := snapshot.Take(src, rec, t.tree, snapshot.Options{KeepComm: func(c string) bool { return vgpu.DaemonOf(c) != "" }, Stop: tempsStopped})
	if errors.Is(err, snapshot.ErrStopped) {
		return interrupted()
	}
	if err != nil {
		return &exitError{code: exitUnknown, err: fmt.Errorf("snapshot into %s: %w", abs, err)}
	}
	replay, where, err := t.replayable()
	if err != nil {
		return &exitError{code: exitUnknown, err: fmt.Errorf("snapshot into %s: %w", abs, err)}
	}
	differ, stopped := replayDiffers(g, runs, live, replay)
	if stopped {
		return interrupted()
	}
	if err := t.commit(); err != nil {
		if err == errInterrupted {
			return interrupted()
		}
		return &exitError{code: exitUnknown, err: fmt.Errorf("snapshot into %s: %w", abs, err)}
	}
	done()
	out := sanitize.NewWriter(cmd.OutOrStdout())
	printSnapshotTaken(out, st, where, abs, src.IsLive(), t.packed)
	if len(differ) > 0 {
		fmt.Fprintf(out, "NOT reproduced from the snapshot (its output differs from this node's): %s\n", strings.Join(differ, "; "))
		return &exitError{code: exitNotReady}
	}
	fmt.Fprintf(out, "Reproduced: gpuprep --root %s gives this node's output for check, vfio status, vgpu types, grub show and plan.\n", abs)
	return nil
}

// snapshotDir is dir made absolute; for a snapshot of this machine, not
// / nor under /sys, /proc or /dev.
func snapshotDir(src *host.Root, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", usageErr("%v", err)
	}
	if src.IsLive() && (abs == "/" || strings.HasPrefix(abs+"/", "/sys/") || strings.HasPrefix(abs+"/", "/proc/") || strings.HasPrefix(abs+"/", "/dev/")) {
		return "", usageErr("snapshot directory %s: not under /, /sys, /proc or /dev", abs)
	}
	return abs, nil
}

// snapshotArgs are the commands a snapshot is taken with (snapshotRuns),
// each but grub show (which takes none) with the --select given.
func snapshotArgs(sel []string) [][]string {
	var selArgs []string
	for _, s := range sel {
		selArgs = append(selArgs, "--select", s)
	}
	runs := make([][]string, len(snapshotRuns))
	for i, r := range snapshotRuns {
		runs[i] = r
		if r[0] != "grub" { // grub show takes no --select
			runs[i] = append(append([]string(nil), r...), selArgs...)
		}
	}
	return runs
}

// refusedRun is the usage error of the first of the runs that refused its
// command line (live: each one's output), nil when none did.
func refusedRun(runs [][]string, live []string) error {
	for i, args := range runs {
		if strings.HasPrefix(live[i], fmt.Sprintf("exit %d\n", exitUsage)) {
			_, stderr, _ := strings.Cut(live[i], "--- stderr\n")
			return usageErr("gpuprep %s: %s", strings.Join(args, " "), strings.TrimSpace(strings.TrimPrefix(stderr, "gpuprep: ")))
		}
	}
	return nil
}

// replayDiffers runs each of runs again against the snapshot (replay) and
// lists those whose output differs from the node's (live); stopped when an
// interrupt came first.
func replayDiffers(g *globals, runs [][]string, live []string, replay string) (differ []string, stopped bool) {
	for i, args := range runs {
		if tempsStopped() {
			return nil, true
		}
		if got := g.dep().snapshotRun(args, &globals{root: replay, deps: g.deps}); got != live[i] {
			differ = append(differ, strings.Join(args, " "))
		}
	}
	return differ, false
}

// printSnapshotTaken says what the snapshot in where holds, what it left
// out, and what to know before sharing it.
func printSnapshotTaken(out io.Writer, st snapshot.Stats, where, abs string, live, packed bool) {
	fmt.Fprintf(out, "Snapshot in %s: %s (%s), %s, %s, %s for entries gpuprep listed but did not read.\n",
		where, plural.N(st.Files, "file"), size(st.Bytes), plural.N(st.Links, "symlink"), plural.N(st.Dirs, "directory"), plural.N(st.Stubs, "stand-in"))
	if len(st.Other) > 0 {
		fmt.Fprintf(out, "Configuration files copied (read them before you share the snapshot): %s\n", sanitize.Terminal(strings.Join(st.Other, ", ")))
	}
	if st.Private > 0 {
		fmt.Fprintf(out, "Left out: %d of the processes' open files and names (/proc/PID/fd, /proc/PID/comm) other than NVIDIA and VFIO devices and the vGPU daemons.\n", st.Private)
	}
	if live && os.Geteuid() != 0 {
		fmt.Fprintln(out, "Not run as root: files only root may read (MSRs, ACPI tables, PCI configuration space past 64 bytes) are in the snapshot as this user saw them.")
	}
	if len(st.Unreadable) > 0 {
		fmt.Fprintf(out, "Read by gpuprep but not readable now (copied empty): %s\n", sanitize.Terminal(strings.Join(st.Unreadable, ", ")))
	}
	if packed {
		fmt.Fprintf(out, "%s is readable by its owner only: it holds this node's configuration files (chmod or chown it to share it).\n", abs)
	}
}

// snapshotTarget is where a snapshot is made: a temporary directory beside
// DIR renamed to it at the end (inside DIR, its entries moved up, when DIR
// is there already, empty: a mount point, say, which no rename replaces),
// or for FILE.tar.gz a tree in a temporary directory packed into a
// temporary file beside FILE, linked to it at the end. Each is removed when
// the command ends or is interrupted.
type snapshotTarget struct {
	abs     string
	packed  bool
	inside  bool     // tree is a temporary directory inside the existing, empty abs
	tree    string   // where the snapshot is taken
	tmpDir  string   // the temporary directory holding tree (packed) or tree itself
	file    *os.File // packed: the temporary file beside abs
	release []func()
}

func newSnapshotTarget(abs string, exit func(code int)) (*snapshotTarget, error) {
	t := &snapshotTarget{abs: abs, packed: isTarball(abs)}
	fi, err := os.Lstat(abs)
	switch {
	case err == nil && t.packed:
		return nil, usageErr("%s exists: a snapshot does not overwrite a file", abs)
	case err == nil && !fi.IsDir():
		return nil, usageErr("%s exists and is not a directory: a snapshot goes into a new or empty directory", abs)
	case err == nil:
		ents, err := os.ReadDir(abs)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		if len(ents) > 0 {
			return nil, usageErr("%s: not empty (a snapshot goes into a new or empty directory)", abs)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, usageErr("%v", err)
	}
	parent := filepath.Dir(abs)
	if t.packed {
		t.file, err = os.CreateTemp(parent, ".gpuprep-snapshot-*.tar.gz")
		if err != nil {
			return nil, usageErr("cannot write %s: %v", abs, unwrapPath(err))
		}
		t.release = append(t.release, removeOnSignal(t.file.Name(), exit))
		if t.tmpDir, err = os.MkdirTemp("", "gpuprep-snapshot-"); err != nil {
			t.discard()
			return nil, &exitError{code: exitUnknown, err: err}
		}
		t.tree = filepath.Join(t.tmpDir, "root")
	} else {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, usageErr("cannot write %s: %v", abs, err)
		}
		in := parent
		if t.inside = fi != nil; t.inside {
			in = abs
		}
		if t.tmpDir, err = os.MkdirTemp(in, "."+filepath.Base(abs)+".gpuprep-*"); err != nil {
			return nil, usageErr("cannot write %s: %v", abs, unwrapPath(err))
		}
		t.tree = t.tmpDir
	}
	t.release = append(t.release, removeOnSignal(t.tmpDir, exit))
	return t, nil
}

// unwrapPath drops a PathError's operation and temporary name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// replayable is the snapshot taken, ready to replay gpuprep against: the
// tree, or the file it is packed into (FILE.tar.gz); where says where it
// goes, and for a packed one its size.
func (t *snapshotTarget) replayable() (replay, where string, _ error) {
	if !t.packed {
		return t.tree, t.abs, nil
	}
	n, err := t.pack()
	if err != nil {
		return "", "", err
	}
	return t.file.Name(), fmt.Sprintf("%s (%s packed)", t.abs, size(n)), nil
}

// pack packs the tree into the temporary file, synced, and returns its size.
func (t *snapshotTarget) pack() (int64, error) {
	if err := snapshot.Pack(t.tree, t.file); err != nil {
		return 0, err
	}
	if err := t.file.Sync(); err != nil {
		return 0, err
	}
	fi, err := t.file.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), t.file.Close()
}

// commit puts the snapshot in place without replacing anything that
// appeared at the target meanwhile (a directory only where it is still
// empty), and syncs the directory holding it.
func (t *snapshotTarget) commit() error {
	// an interrupt's removal of the temporary files waits for this, and
	// after one nothing is put in place
	temps.Lock()
	defer temps.Unlock()
	if tempsStopped() {
		return errInterrupted
	}
	switch {
	case t.packed:
		if err := renameNoReplace(t.file.Name(), t.abs); err != nil {
			return t.appeared(err)
		}
	case t.inside:
		if err := t.moveIn(); err != nil {
			return err
		}
	default:
		if err := os.Chmod(t.tree, 0o755); err != nil { // MkdirTemp made it 0700
			return err
		}
		// rename(2) replaces only an empty directory (os.Rename none)
		if err := unix.Rename(t.tree, t.abs); err != nil {
			return t.appeared(&os.LinkError{Op: "rename", Old: t.tree, New: t.abs, Err: err})
		}
	}
	return host.FsyncDir(filepath.Dir(t.abs))
}

// appeared is err, or where err says the target exists, that it appeared
// meanwhile.
func (t *snapshotTarget) appeared(err error) error {
	if errors.Is(err, fs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
		return fmt.Errorf("%s appeared while the snapshot was taken, and is left as it is", t.abs)
	}
	return err
}

// moveIn moves the tree's entries into the target directory, still empty
// but for the tree (the entries moved taken back out on a failure), and
// removes the tree.
func (t *snapshotTarget) moveIn() error {
	ents, err := os.ReadDir(t.abs)
	if err != nil {
		return err
	}
	if len(ents) != 1 {
		return t.appeared(fs.ErrExist)
	}
	moved, err := os.ReadDir(t.tree)
	if err != nil {
		return err
	}
	for i, e := range moved {
		if err := renameNoReplace(filepath.Join(t.tree, e.Name()), filepath.Join(t.abs, e.Name())); err != nil {
			errs := []error{t.appeared(err)}
			for _, m := range moved[:i] { // ours: the directory goes back to empty
				errs = append(errs, os.RemoveAll(filepath.Join(t.abs, m.Name())))
			}
			return errors.Join(errs...)
		}
	}
	return os.Remove(t.tree)
}

// discard removes what is left of the temporary files and directories
// (the command's outcome is decided: what fails here is a temporary name
// left behind, nothing of the snapshot).
func (t *snapshotTarget) discard() {
	if t.file != nil {
		_ = t.file.Close()           // closed already once packed
		_ = os.Remove(t.file.Name()) // gone once committed
	}
	if t.tmpDir != "" {
		_ = os.RemoveAll(t.tmpDir)
	}
	for _, r := range t.release {
		r()
	}
}

// renameNoReplace renames from to to, failing if to exists; where the file
// system cannot rename so, it links and removes instead.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		if err = os.Link(from, to); err == nil {
			return os.Remove(from)
		}
		return err
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// runOnce runs one gpuprep command in this process and returns what it
// printed and its exit code, as one string to compare (deps.snapshotRun).
func runOnce(args []string, g *globals) string {
	var o, e bytes.Buffer
	code := executeWith(args, &o, &e, g)
	return fmt.Sprintf("exit %d\n%s\n--- stderr\n%s", code, o.String(), e.String())
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
