//go:build linux && amd64

package grub

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/crashtest"
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

	killed, out := crashtest.Run(t, "TestCrashHelper", []string{"GPUPREP_CRASH_ROOT=" + dir},
		func(regs *syscall.PtraceRegs) bool {
			switch regs.Orig_rax {
			case crashtest.SysRename, crashtest.SysRenameat, crashtest.SysRenameat2:
				return true
			}
			return false
		})
	require.True(t, killed, "the helper never reached rename(2):\n%s", out)

	// The original is intact; the new content sits complete in the
	// temporary file that was about to replace it; the backup was written
	// first; the journal has the intent only (its Before is the original's
	// hash, so rollback sees the file untouched), no change that did not
	// happen.
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
	require.Len(t, ents, 1)
	require.Equal(t, journal.KindFileIntent, ents[0].Kind)
	require.Equal(t, journal.Hash(src), ents[0].Before)
	require.Equal(t, "/etc/default/grub", ents[0].Path)

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
