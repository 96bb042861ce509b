package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vgpu"
)

// A VF given a vGPU type offers no more types: an SR-IOV GPU whose every VF
// holds a vGPU is set up, not "no vGPU types offered"; with no VF holding
// one and none offered, it still fails.
func TestVGPUTypesEveryVFTaken(t *testing.T) {
	check := func(t *testing.T, taken bool) preflight.Finding {
		dir := t.TempDir()
		require.NoError(t, fixture.Build("sriov-vgpu", dir))
		root, err := host.NewRoot(dir)
		require.NoError(t, err)
		g := vgpu.Read(root, "0000:41:00.0")
		require.NotEmpty(t, g.VFs)
		require.NotEmpty(t, g.Types)
		b := fixture.New(dir)
		for _, vf := range g.VFs {
			real, err := root.Realpath("/sys/bus/pci/devices/" + vf)
			require.NoError(t, err)
			b.File(real+"/nvidia/creatable_vgpu_types", "ID    : vGPU Name\n")
			if taken {
				b.File(real+"/nvidia/current_vgpu_type", g.Types[0].ID+"\n")
			}
		}
		require.NoError(t, b.Err())
		env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
		require.NoError(t, err)
		res, err := preflight.Run(env, preflight.All(), preflight.Options{})
		require.NoError(t, err)
		fs := find(res, want{"vgpu.types", "0000:41:00.0", "", ""})
		require.Len(t, fs, 1)
		return fs[0]
	}
	f := check(t, true)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Regexp(t, `^\d+ vGPUs? exists? \(\d+× .+\); no type is free to create more$`, f.Message)
	f = check(t, false)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "no vGPU types offered")
}

// An Env reads each GPU's vGPU state once, for the checks and the report
// alike; a new Env (the next check) reads it again.
func TestEnvReadsVGPUStateOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("sriov-vgpu", dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
	require.NoError(t, err)
	first := env.VGPU("0000:41:00.0")
	require.Equal(t, vgpu.Read(root, "0000:41:00.0"), first)
	require.Equal(t, 4, first.NumVFs)

	b := fixture.New(dir)
	b.File("/sys/bus/pci/devices/0000:41:00.0/sriov_numvfs", "0\n")
	require.NoError(t, b.Err())
	require.Equal(t, first, env.VGPU("0000:41:00.0"), "the same Env: read once")
	again, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
	require.NoError(t, err)
	require.Equal(t, 0, again.VGPU("0000:41:00.0").NumVFs, "a new Env reads the host again")
}
