package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/snapshot"
)

// A root's own programs run as root; chroot does not hold a root process
// in. grub ensure --root DIR runs DIR's update-grub only where
// --system-disk names DIR a system disk, never for a snapshot, and without
// it refuses before any file changes; --dry-run still shows the diff.
func TestGrubRunsARootsProgramsOnlyForASystemDisk(t *testing.T) {
	root := bootRoot(t, intelNode)
	marker := filepath.Join(t.TempDir(), "update-grub-ran")
	tool := filepath.Join(root, "usr/sbin/update-grub")
	require.NoError(t, os.WriteFile(tool, []byte("#!/bin/sh\n: > "+marker+"\n"), 0o755))
	grubFile := filepath.Join(root, "etc/default/grub")
	before, err := os.ReadFile(grubFile)
	require.NoError(t, err)

	out, errs, code := gpuprep(t, "grub", "ensure", "--root", root, "iommu=pt")
	require.Equal(t, exitUsage, code, out+errs)
	require.Contains(t, errs, "would run update-grub: --root "+root+": gpuprep runs a root's own programs (inside it, with chroot) only for a system disk named with --system-disk, never for a snapshot")
	require.NoFileExists(t, marker, "the root's update-grub ran")
	after, err := os.ReadFile(grubFile)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "a file changed before the refusal")

	out, errs, code = gpuprep(t, "grub", "ensure", "--root", root, "iommu=pt", "--dry-run")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "+++ b/etc/default/grub")
	require.Contains(t, out, "would run: update-grub\n")
	require.Contains(t, out, "note: without --dry-run this is refused: --root "+root)
	require.NoFileExists(t, marker)

	// --no-regenerate runs nothing: allowed
	out, errs, code = gpuprep(t, "grub", "ensure", "--root", root, "iommu=pt", "--no-regenerate")
	require.NotEqual(t, exitUsage, code, out+errs)
	require.NoFileExists(t, marker)
	require.NoError(t, os.WriteFile(grubFile, before, 0o644))

	// a snapshot is never a system disk
	require.NoError(t, os.WriteFile(filepath.Join(root, snapshot.Marker), []byte("x"), 0o644))
	_, errs, code = gpuprep(t, "grub", "ensure", "--root", root, "--system-disk", "iommu=pt")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "is a gpuprep snapshot (/GPUPREP-SNAPSHOT), not a system disk")
	require.NoFileExists(t, marker)
	_, errs, code = gpuprep(t, "grub", "show", "--system-disk")
	require.Equal(t, exitUsage, code)
	require.True(t, strings.Contains(errs, "--system-disk names a --root DIR other than /"), errs)
}

// gpuprep snapshot marks what it makes as a snapshot.
func TestSnapshotsAreMarked(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "snap")
	_, errs, code := gpuprep(t, "snapshot", "--root", fixtureRoot(t, "amd-ready"), dst)
	require.Equal(t, 0, code, errs)
	require.FileExists(t, filepath.Join(dst, snapshot.Marker))
}
