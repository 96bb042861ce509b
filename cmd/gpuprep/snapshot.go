package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/host"
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
	abs, err := filepath.Abs(dir)
	if err != nil {
		return usageErr("%v", err)
	}
	if src.IsLive() && (abs == "/" || strings.HasPrefix(abs+"/", "/sys/") || strings.HasPrefix(abs+"/", "/proc/") || strings.HasPrefix(abs+"/", "/dev/")) {
		return usageErr("snapshot directory %s: not under /, /sys, /proc or /dev", abs)
	}
	packed := isTarball(abs)
	tree := abs
	if packed {
		// Taken into a temporary tree, packed next to FILE, checked from
		// the packed file, then renamed into place: FILE is whole or absent.
		if _, err := os.Lstat(abs); err == nil {
			return usageErr("%s exists: a snapshot does not overwrite a file", abs)
		}
		tmp, err := os.MkdirTemp("", "gpuprep-snapshot-")
		if err != nil {
			return &exitError{code: exitUnknown, err: err}
		}
		defer os.RemoveAll(tmp)
		tree = filepath.Join(tmp, "root")
	}
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

	rec := host.NewRecorder()
	live := make([]string, len(runs))
	for i, args := range runs {
		live[i] = runOnce(args, &globals{root: src.Dir(), rec: rec})
	}
	for i, args := range runs {
		if strings.HasPrefix(live[i], fmt.Sprintf("exit %d\n", exitUsage)) {
			_, stderr, _ := strings.Cut(live[i], "--- stderr\n")
			return usageErr("gpuprep %s: %s", strings.Join(args, " "), strings.TrimSpace(strings.TrimPrefix(stderr, "gpuprep: ")))
		}
	}
	st, err := snapshot.Take(src, rec, tree, snapshot.Options{KeepComm: func(c string) bool { return vgpu.DaemonOf(c) != "" }})
	if err != nil {
		return &exitError{code: exitUnknown, err: fmt.Errorf("snapshot into %s: %w", abs, err)}
	}
	replay, where := tree, abs
	if packed {
		tmpFile, n, err := pack(tree, abs)
		if err != nil {
			return &exitError{code: exitUnknown, err: fmt.Errorf("snapshot into %s: %w", abs, err)}
		}
		defer os.Remove(tmpFile) // gone once renamed
		replay, where = tmpFile, fmt.Sprintf("%s (%s packed)", abs, size(n))
	}

	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Snapshot in %s: %d files (%s), %d symlinks, %d directories, %d stand-ins for entries gpuprep listed but did not read.\n",
		where, st.Files, size(st.Bytes), st.Links, st.Dirs, st.Stubs)
	if len(st.Other) > 0 {
		fmt.Fprintf(out, "Configuration files copied (read them before you share the snapshot): %s\n", strings.Join(st.Other, ", "))
	}
	if st.Private > 0 {
		fmt.Fprintf(out, "Left out: %d of the processes' open files and names (/proc/PID/fd, /proc/PID/comm) other than NVIDIA and VFIO devices and the vGPU daemons.\n", st.Private)
	}
	if src.IsLive() && os.Geteuid() != 0 {
		fmt.Fprintln(out, "Not run as root: files only root may read (MSRs, ACPI tables, PCI configuration space past 64 bytes) are in the snapshot as this user saw them.")
	}
	if len(st.Unreadable) > 0 {
		fmt.Fprintf(out, "Read by gpuprep but not readable now (copied empty): %s\n", strings.Join(st.Unreadable, ", "))
	}
	var differ []string
	for i, args := range runs {
		if got := runOnce(args, &globals{root: replay}); got != live[i] {
			differ = append(differ, strings.Join(args, " "))
		}
	}
	if packed {
		if err := os.Rename(replay, abs); err != nil {
			return &exitError{code: exitUnknown, err: err}
		}
	}
	if len(differ) > 0 {
		fmt.Fprintf(out, "NOT reproduced from the snapshot (its output differs from this node's): %s\n", strings.Join(differ, "; "))
		return &exitError{code: exitNotReady}
	}
	fmt.Fprintf(out, "Reproduced: gpuprep --root %s gives this node's output for check, vfio status, vgpu types, grub show and plan.\n", abs)
	return nil
}

// pack packs tree into a new temporary file next to target (so that a
// rename puts it in place), synced; it returns the file and its size.
func pack(tree, target string) (string, int64, error) {
	f, err := os.CreateTemp(filepath.Dir(target), ".gpuprep-snapshot-*.tar.gz")
	if err != nil {
		return "", 0, err
	}
	err = snapshot.Pack(tree, f)
	if err == nil {
		err = f.Sync()
	}
	fi, serr := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), fi.Size(), nil
}

// runOnce runs one gpuprep command in this process and returns what it
// printed and its exit code, as one string to compare. (A variable: a test
// makes a replay differ.)
var runOnce = func(args []string, g *globals) string {
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
