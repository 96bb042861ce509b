package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// sameOutputs runs gpuprep's read-only commands against both roots and requires the same output.
func sameOutputs(t *testing.T, name, a, b string) {
	t.Helper()
	for _, args := range snapshotRuns {
		outA, errA, codeA := gpuprep(t, append([]string{"--root", a}, args...)...)
		outB, errB, codeB := gpuprep(t, append([]string{"--root", b}, args...)...)
		require.Equal(t, codeA, codeB, "%s: %v", name, args)
		require.Equal(t, outA, outB, "%s: %v", name, args)
		require.Equal(t, errA, errB, "%s: %v", name, args)
	}
	outA, _, _ := gpuprep(t, "check", "--root", a)
	outB, _, _ := gpuprep(t, "check", "--root", b)
	require.Equal(t, outA, outB, "%s: check (text)", name)
}

// A snapshot of every fixture scenario, and of the real H200 node's capture, gives the same output for every
// read-only command as the root it was taken from: what gpuprep reads is all there.
func TestSnapshotReproducesEveryRoot(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	roots := map[string]string{"real-h200-vm": realRoot(t, realH200Root)}
	for _, sc := range fixture.Names() {
		roots[sc] = fixtureRoot(t, sc)
	}
	for name, src := range roots {
		dst := filepath.Join(t.TempDir(), "snap")
		out, errs, code := gpuprep(t, "--root", src, "snapshot", dst)
		require.Equal(t, 0, code, "%s: %s%s", name, out, errs)
		require.Contains(t, out, "Reproduced: gpuprep --root "+dst, name)
		sameOutputs(t, name, src, dst)
		switch name {
		case "amd-ready":
			// VM_CR (0xC0010114) as bytes at its offset would make a 3 GiB sparse file per CPU: text instead.
			b, err := os.ReadFile(filepath.Join(dst, "dev/cpu/0/msr"))
			require.NoError(t, err)
			require.Less(t, len(b), 200)
			require.Equal(t, host.SparseMagic+"0xc0010114 0800000000000000\n", string(b))
		case "sriov-vgpu":
			b, err := os.ReadFile(filepath.Join(dst, "proc/3120/comm"))
			require.NoError(t, err)
			require.Equal(t, "nvidia-vgpu-mgr\n", string(b), "the vGPU daemon keeps its name")
			b, err = os.ReadFile(filepath.Join(dst, "proc/1/comm"))
			require.NoError(t, err)
			require.Empty(t, b, "other processes' names are left out")
		}
	}
}

// A snapshot that does not give the node's output says so and fails; a --select that selects nothing is a usage
// error, not an empty snapshot that "reproduces" an error.
func TestSnapshotSaysWhatItDoesNotReproduce(t *testing.T) {
	src := fixtureRoot(t, "hgx-h200")
	d := realDeps()
	orig := d.snapshotRun
	d.snapshotRun = func(args []string, g *globals) string {
		out := orig(args, g)
		if g.rec == nil && args[0] == "vfio" { // the replay against the snapshot
			out += "a difference"
		}
		return out
	}
	out, errs, code := gpuprepWith(t, d, "--root", src, "snapshot", filepath.Join(t.TempDir(), "s"))
	require.Equal(t, 1, code, errs)
	require.Contains(t, out, "NOT reproduced from the snapshot (its output differs from this node's): vfio status -o json\n")
	require.NotContains(t, out, "Reproduced:")
	d.snapshotRun = orig

	_, errs, code = gpuprepWith(t, d, "--root", src, "snapshot", "--select", "0000:99:00.0", filepath.Join(t.TempDir(), "s"))
	require.Equal(t, 2, code)
	require.Contains(t, errs, "gpuprep check -o json --select 0000:99:00.0: ")
}

// The snapshot holds what gpuprep read and nothing else: an attribute it never reads is an empty stand-in, a file
// it never opens is not there, links are copied as links (absolute ones too) and resolve inside the snapshot, and
// file times are kept (a GRUB file newer than the boot means a reboot is pending).
func TestSnapshotCopiesOnlyWhatWasRead(t *testing.T) {
	src := fixtureRoot(t, "reboot-pending")
	b := fixture.New(src)
	b.File("/etc/shadow", "root:secret:1:0:99999:7:::\n")
	b.File("/etc/grub-real", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt\"\n")
	require.NoError(t, b.Err())
	grub := filepath.Join(src, "etc/default/grub")
	fi, err := os.Stat(grub)
	require.NoError(t, err)
	require.NoError(t, os.Remove(grub))
	require.NoError(t, os.Symlink("/etc/grub-real", grub)) // absolute: resolves inside the root
	require.NoError(t, os.Chtimes(filepath.Join(src, "etc/grub-real"), fi.ModTime(), fi.ModTime()))
	// A link whose target goes through another link and then "..": taken as the kernel takes it
	// (/etc/default/x → /boot/deep/dir, .. → /boot/deep), not as the text of the path would suggest.
	require.NoError(t, os.MkdirAll(filepath.Join(src, "boot/deep/dir"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "boot/deep/kubelet"), []byte("KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "etc/default/kubelet-decoy"), []byte("KUBELET_EXTRA_ARGS=\n"), 0o644))
	require.NoError(t, os.Symlink("/boot/deep/dir", filepath.Join(src, "etc/default/x")))
	require.NoError(t, os.Symlink("x/../kubelet", filepath.Join(src, "etc/default/kubelet")))
	gpu := ""
	for _, d := range mustGlob(t, filepath.Join(src, "sys/bus/pci/devices/*")) {
		if v, _ := os.ReadFile(filepath.Join(d, "vendor")); strings.TrimSpace(string(v)) == "0x10de" {
			gpu = d
		}
	}
	require.NotEmpty(t, gpu)
	require.NoError(t, os.WriteFile(filepath.Join(gpu, "never_read"), []byte("data\n"), 0o444))

	dst := filepath.Join(t.TempDir(), "snap")
	out, errs, code := gpuprep(t, "--root", src, "snapshot", dst)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Configuration files copied (read them before you share the snapshot): ")
	require.Contains(t, out, "/etc/grub-real")
	require.NotContains(t, out, "/etc/shadow")
	require.NoFileExists(t, filepath.Join(dst, "etc/shadow"))

	link, err := os.Readlink(filepath.Join(dst, "etc/default/grub"))
	require.NoError(t, err)
	require.Equal(t, "/etc/grub-real", link, "links are copied as written")
	got, err := os.ReadFile(filepath.Join(dst, "etc/grub-real"))
	require.NoError(t, err)
	require.Contains(t, string(got), "intel_iommu=on")
	st, err := os.Stat(filepath.Join(dst, "etc/grub-real"))
	require.NoError(t, err)
	require.True(t, st.ModTime().Equal(fi.ModTime()), "times kept")

	rel, err := filepath.Rel(src, gpu)
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(dst, rel, "never_read"), "a device directory is opened, not listed: an attribute never read is not there")
	devLink, err := os.Readlink(filepath.Join(dst, rel))
	require.NoError(t, err, "/sys/bus/pci/devices/ADDR is a symlink in the snapshot as on the host")
	require.Contains(t, devLink, "devices/pci")
	kubelet, err := os.ReadFile(filepath.Join(dst, "boot/deep/kubelet"))
	require.NoError(t, err, "the file the kernel would reach through x/../kubelet")
	require.Contains(t, string(kubelet), "vm-passthrough")
	out, _, _ = gpuprep(t, "check", "--root", src, "--mode", "vm-passthrough")
	require.Contains(t, out, "nvidia.com/gpu.workload.config=vm-passthrough", "the fixture's label is read through the links")
	sameOutputs(t, "reboot-pending+links", src, dst)
	out, _, _ = gpuprep(t, "check", "--root", dst)
	require.Contains(t, out, "reboot", "the reboot-pending verdict comes through the kept times")
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	require.NoError(t, err)
	return m
}

func TestSnapshotRefusals(t *testing.T) {
	src := fixtureRoot(t, "hgx-h200")
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	_, errs, code := gpuprep(t, "--root", src, "snapshot", full)
	require.Equal(t, 2, code)
	require.Contains(t, errs, full+": not empty")
	// Found before any command runs, with nothing made: a target that cannot be written.
	file := filepath.Join(full, "x")
	for _, target := range []string{filepath.Join(file, "node.tar.gz"), filepath.Join(file, "snap"), file} {
		out, errs, code := gpuprep(t, "--root", src, "snapshot", target)
		require.Equal(t, 2, code, target)
		require.Empty(t, out, target)
		require.Contains(t, errs, target, target)
		if target == file {
			require.Contains(t, errs, "exists and is not a directory")
		}
	}
	ents, err := os.ReadDir(full)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	_, errs, code = gpuprep(t, "snapshot", "/sys/snap")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "not under /, /sys, /proc or /dev")
	_, _, code = gpuprep(t, "snapshot")
	require.Equal(t, 2, code)
}

// This machine's own root: a snapshot of the live host reproduces the live output. A real kernel's /sys and
// /proc, not a fixture.
func TestSnapshotOfThisHost(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci"); err != nil {
		t.Skip("no /sys/bus/pci here")
	}
	dst := filepath.Join(t.TempDir(), "snap")
	out, errs, code := gpuprep(t, "--root", "/", "snapshot", dst)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Reproduced:")
}

// Of the processes' open files, only device nodes go into a snapshot: gpuprep looks for holders of /dev/nvidia*
// (vfio bind refuses while one is open), and the rest (sockets, a user's files) is none of a snapshot's business.
func TestSnapshotKeepsOnlyDeviceNodesOfProcesses(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	src := fixtureRoot(t, "hgx-h200")
	for p, target := range map[string]string{
		"proc/4242/fd/3": "/dev/nvidia0", "proc/4242/fd/4": "/home/alice/secret-plans.txt",
		"proc/77/fd/0": "/dev/null", "proc/77/fd/1": "socket:[12345]",
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(src, p)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "proc/4242/comm"), []byte("python3\n"), 0o444))
	require.NoError(t, os.WriteFile(filepath.Join(src, "proc/77/comm"), []byte("sshd\n"), 0o444))
	_, errs, _ := gpuprep(t, "--root", src, "plan", "--mode", "vm-passthrough")
	require.Contains(t, errs, "held open by 4242 (python3: /dev/nvidia0)", "the plan names the holder")

	dst := filepath.Join(t.TempDir(), "snap")
	out, errs, code := gpuprep(t, "--root", src, "snapshot", dst)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Reproduced:")
	require.Contains(t, out, "Left out: 3 of the processes' open files and names")
	got, err := os.Readlink(filepath.Join(dst, "proc/4242/fd/3"))
	require.NoError(t, err)
	require.Equal(t, "/dev/nvidia0", got)
	comm, err := os.ReadFile(filepath.Join(dst, "proc/4242/comm"))
	require.NoError(t, err)
	require.Equal(t, "python3\n", string(comm), "a holder keeps its name")
	for _, p := range []string{"proc/4242/fd/4", "proc/77/fd/1", "proc/77/fd/0", "proc/77/comm"} {
		_, err := os.Lstat(filepath.Join(dst, p))
		require.ErrorIs(t, err, os.ErrNotExist, p)
	}
	sameOutputs(t, "holders", src, dst)
}

// snapshot FILE.tar.gz writes the snapshot packed, whole or not at all, and --root takes the file as it is: times
// (reboot pending), MSRs and a real node's capture come through.
func TestSnapshotPacked(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	for name, src := range map[string]string{
		"reboot-pending": fixtureRoot(t, "reboot-pending"), "amd-ready": fixtureRoot(t, "amd-ready"),
		"real-h200-vm": realRoot(t, realH200Root),
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "node.tar.gz")
		out, errs, code := gpuprep(t, "--root", src, "snapshot", file)
		require.Equal(t, 0, code, "%s: %s%s", name, out, errs)
		require.Contains(t, out, "Snapshot in "+file+" (", name)
		require.Contains(t, out, "Reproduced: gpuprep --root "+file, name)
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, ents, 1, "%s: no temporary file left beside it", name)
		sameOutputs(t, name, src, file)

		_, errs, code = gpuprep(t, "--root", src, "snapshot", file)
		require.Equal(t, 2, code, name)
		require.Contains(t, errs, "exists: a snapshot does not overwrite a file")
	}
	out, _, _ := gpuprep(t, "--root", filepath.Join(t.TempDir(), "missing.tar.gz"), "check")
	require.Empty(t, out)
	_, errs, code := gpuprep(t, "--root", filepath.Join(t.TempDir(), "missing.tar.gz"), "check")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--root: ")
}

// A packed snapshot given to --root is unpacked for one command: a command that would change files fails, naming
// why, instead of changing a copy that is then thrown away.
func TestPackedRootIsReadOnly(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where --root unpacks
	file := filepath.Join(t.TempDir(), "node.tar.gz")
	_, errs, code := gpuprep(t, "--root", fixtureRoot(t, "hgx-h200"), "snapshot", file)
	require.Equal(t, 0, code, errs)
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	_, errs, code = gpuprep(t, "--root", file, "label", "--mode", "container", "--before-join")
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, "is a packed snapshot, unpacked for this command only: it is read, never changed")
	out, errs, code := gpuprep(t, "--root", file, "label", "--mode", "container", "--before-join", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "KUBELET_EXTRA_ARGS", "a dry run still shows the change")
	// Commands that would change the running kernel name the file given, not where it was unpacked.
	for _, args := range [][]string{{"vfio", "bind"}, {"rollback"}, {"apply", "--mode", "container", "--yes"}} {
		_, errs, code = gpuprep(t, append([]string{"--root", file}, args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errs)
		require.Contains(t, errs, "--root "+file+": ", args)
		require.NotContains(t, errs, tmp, args)
	}
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
	ents, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, ents, "every unpacked copy is removed")
}

// Nothing runs from a packed snapshot: its programs (a kernelstub in it, say) would run as root on a copy.
func TestPackedRootRunsNothing(t *testing.T) {
	r, err := host.NewRoot(t.TempDir())
	require.NoError(t, err)
	_, err = realDeps().grubRunner(r.Frozen("packed")).Run(context.Background(), "kernelstub", "--add-options", "iommu=pt")
	require.ErrorContains(t, err, "kernelstub --add-options iommu=pt: write /: packed")
}

// What appears at the target while a snapshot is taken is never replaced: the snapshot fails (exit 3), the
// newcomer stays as it is, and no temporary file or directory is left beside it.
func TestSnapshotNeverReplacesWhatAppeared(t *testing.T) {
	src := fixtureRoot(t, "amd-ready")
	d := realDeps()
	orig := d.snapshotRun
	for _, name := range []string{"node.tar.gz", "snap"} {
		dir := t.TempDir()
		target := filepath.Join(dir, name)
		d.snapshotRun = func(args []string, g *globals) string {
			if g.rec == nil && args[0] == "check" { // the first replay
				if name == "snap" {
					require.NoError(t, os.MkdirAll(filepath.Join(target, "mine"), 0o755))
				} else {
					require.NoError(t, os.WriteFile(target, []byte("mine"), 0o644))
				}
			}
			return orig(args, g)
		}
		out, errs, code := gpuprepWith(t, d, "--root", src, "snapshot", target)
		require.Equal(t, exitUnknown, code, out+errs)
		require.Contains(t, errs, "snapshot into "+target+": "+target+" appeared while the snapshot was taken, and is left as it is")
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, ents, 1, "%s: %v", name, ents)
		if name == "snap" {
			ents, err := os.ReadDir(target)
			require.NoError(t, err)
			require.Len(t, ents, 1)
			require.Equal(t, "mine", ents[0].Name())
		} else {
			b, err := os.ReadFile(target)
			require.NoError(t, err)
			require.Equal(t, "mine", string(b))
		}
	}
	// An empty directory that was there is filled in place (the same directory, its mode kept: a mount point,
	// which no rename may replace, works), keeping no temporary name.
	d.snapshotRun = orig
	dir := t.TempDir()
	target := filepath.Join(dir, "snap")
	require.NoError(t, os.Mkdir(target, 0o700))
	before, err := os.Stat(target)
	require.NoError(t, err)
	_, errs, code := gpuprepWith(t, d, "--root", src, "snapshot", target)
	require.Equal(t, 0, code, errs)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	after, err := os.Stat(target)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after), "the directory itself was replaced")
	require.Equal(t, os.FileMode(0o700), after.Mode().Perm())
	inside, err := os.ReadDir(target)
	require.NoError(t, err)
	for _, e := range inside {
		require.NotContains(t, e.Name(), ".gpuprep-")
	}
	fi, err := os.Stat(filepath.Join(target, "sys"))
	require.NoError(t, err)
	require.True(t, fi.IsDir())
}

// An interrupt (a real signal to this process: SIGHUP, which no other test's code listens for, where a SIGINT
// would also stop fleet runs of tests running meanwhile) while a snapshot's temporary files exist removes them and
// ends the process with 128 + the signal, as a shell reports a process a signal ended.
func TestInterruptRemovesTemporaryFiles(t *testing.T) {
	codes := make(chan int, 1)
	exit := func(code int) { codes <- code }
	dir := filepath.Join(t.TempDir(), "gpuprep-root-x")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys", "bus"), 0o755))
	kept := filepath.Join(t.TempDir(), "kept")
	require.NoError(t, os.Mkdir(kept, 0o755))
	release := removeOnSignal(dir, exit)
	removeOnSignal(kept, exit)() // released: an interrupt leaves it
	defer release()
	require.Equal(t, 129, hangUp(t, codes))
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(kept)
	require.NoError(t, err)
	// After the last release, the signals are no longer taken: a later registration takes it again.
	release2 := removeOnSignal(dir, exit)
	release2()
	temps.Lock()
	require.Nil(t, temps.sig)
	temps.Unlock()
}

// hangUp sends this process a real SIGHUP and returns the code a stubbed exitOnSignal got (on exits).
func hangUp(t *testing.T, exits <-chan int) int {
	t.Helper()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	select {
	case code := <-exits:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGHUP")
		return 0
	}
}

// An interrupt while a snapshot is being made (here: during its replay, the tree written) stops it at a safe point:
// nothing is put in place, a directory that was there stays empty, and no temporary file or directory is left.
func TestSnapshotInterruptedLeavesNothing(t *testing.T) {
	exits := make(chan int, 1)
	src := fixtureRoot(t, "amd-ready")
	d := realDeps()
	d.exitOnSignal = func(code int) { exits <- code }
	orig := d.snapshotRun
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		target := filepath.Join(dir, "snap")
		if existing {
			require.NoError(t, os.Mkdir(target, 0o755))
		}
		sent := false
		d.snapshotRun = func(args []string, g *globals) string {
			if g.rec == nil && !sent { // the first replay: the tree is written
				sent = true
				require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
				// until the handler has it (no fixed sleep: a loaded machine may take longer)
				for deadline := time.Now().Add(10 * time.Second); !tempsStopped() && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			return orig(args, g)
		}
		out, errs, code := gpuprepWith(t, d, "--root", src, "snapshot", target)
		require.Equal(t, 129, code, out+errs)
		require.Contains(t, errs, "interrupted: nothing was written")
		require.Equal(t, 129, <-exits)
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		if existing {
			require.Len(t, ents, 1)
			inside, err := os.ReadDir(target)
			require.NoError(t, err)
			require.Empty(t, inside, "the directory that was there is empty again")
		} else {
			require.Empty(t, ents, "nothing beside it, and no snapshot")
		}
	}
}
