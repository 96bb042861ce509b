package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
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
	}
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
	never, err := os.ReadFile(filepath.Join(dst, rel, "never_read"))
	require.NoError(t, err, "listed entries are there")
	require.Empty(t, never, "as empty stand-ins")
	devLink, err := os.Readlink(filepath.Join(dst, rel))
	require.NoError(t, err, "/sys/bus/pci/devices/ADDR is a symlink in the snapshot as on the host")
	require.Contains(t, devLink, "devices/pci")
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
	require.Equal(t, 3, code)
	require.Contains(t, errs, full+": not empty")
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
	require.Contains(t, out, "2 open files of processes other than device nodes left out")
	for p, want := range map[string]string{"proc/4242/fd/3": "/dev/nvidia0", "proc/77/fd/0": "/dev/null"} {
		got, err := os.Readlink(filepath.Join(dst, p))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, p := range []string{"proc/4242/fd/4", "proc/77/fd/1"} {
		_, err := os.Lstat(filepath.Join(dst, p))
		require.ErrorIs(t, err, os.ErrNotExist, p)
	}
	sameOutputs(t, "holders", src, dst)
}
