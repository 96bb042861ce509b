package vgpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// The installer that fails (or is killed) has run, or started: its step's
// intent is in the journal before it, with no record of the step done.
func TestInstallJournalsACommandStepBeforeItRuns(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	r.h.InstallerEnv = []string{vgputest.FailEnv + "=1"}
	_, err := r.install(t)
	require.Error(t, err)
	j, err := journal.Read(r.h.Root)
	require.NoError(t, err)
	const installer = "run the NVIDIA installer NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm"
	var kinds []string
	for _, e := range j {
		if e.After == installer {
			kinds = append(kinds, e.Kind)
		}
	}
	require.Equal(t, []string{journal.KindCommandIntent}, kinds, "%+v", j)
}
