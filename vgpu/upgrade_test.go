package vgpu_test

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

const verB = "550.127.06"

var t4 = vgpu.GPUInfo{Address: "0000:21:00.0", DeviceID: "1eb8"}

// upgradeRig is a T4 (mdev) host with the vGPU manager ver installed by
// gpuprep from a .run and two T4-4Q vGPUs on it, and the .run of verB.
func upgradeRig(t *testing.T) (*rig, []string, string) {
	t.Helper()
	r := newRig(t, "vgpu-fresh-mdev", t4)
	_, err := r.install(t)
	require.NoError(t, err)
	p, err := vgpu.MakePlan(r.h.Root, []vgpu.Want{{GPU: t4.Address, Type: "T4-4Q", Count: 2}})
	require.NoError(t, err)
	done, err := vgpu.Apply(r.h.Root, r.h, p)
	require.NoError(t, err)
	var uuids []string
	for _, a := range done {
		uuids = append(uuids, a.Value)
	}
	sort.Strings(uuids)
	runB, err := vgputest.WriteInstaller(t.TempDir(), verB, "vgpu-kvm")
	require.NoError(t, err)
	r.env.Attrs = r.h
	return r, uuids, runB
}

func liveUUIDs(r *rig) []string {
	var out []string
	for _, v := range vgpu.Existing(r.h.Root, t4.Address) {
		out = append(out, v.Device)
	}
	sort.Strings(out)
	return out
}

func openIntent(t *testing.T, r *rig) journal.Entry {
	t.Helper()
	j, err := journal.Read(r.h.Root)
	require.NoError(t, err)
	for _, en := range j {
		if en.Kind == vgpu.KindUpgradeIntent {
			return en
		}
	}
	t.Fatal("no upgrade intent in the journal")
	return journal.Entry{}
}

func TestUpgradeRunAToBThenRevert(t *testing.T) {
	r, uuids, runB := upgradeRig(t)
	ctx := context.Background()
	in, err := vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, vgpu.Installed{Version: ver, Loaded: ver, Format: vgpu.FormatRun, Record: vgpu.RunRecord}, in)

	r.opts.Driver = runB
	before := len(r.h.Commands())
	p, err := r.install(t)
	require.NoError(t, err)
	require.Equal(t, []string{
		titles(p)[0],
		"remove the vGPUs (made again after the change): " + uuids[0] + ", " + uuids[1],
		"stop the running vGPU manager daemons",
		"unload nvidia_vgpu_vfio",
		"unload nvidia",
		"uninstall the vGPU manager 550.90.05 (its installer's --uninstall)",
		"run the NVIDIA installer NVIDIA-Linux-x86_64-550.127.06-vgpu-kvm",
		"load nvidia",
		"load nvidia_vgpu_vfio (where this build has it: the mdev interface)",
		"enable and start nvidia-vgpud.service",
		"enable and start nvidia-vgpu-mgr.service",
		"recreate the vGPUs that existed: " + uuids[0] + " (GRID T4-4Q on 0000:21:00.0), " + uuids[1] + " (GRID T4-4Q on 0000:21:00.0)",
		"verify: the vGPU manager 550.127.06 is loaded, nvidia-vgpu-mgr runs, the vGPUs are back",
	}, titles(p))
	require.Regexp(t, `^keep the vGPU manager 550\.90\.05 for rollback \(/var/lib/gpuprep/vgpu-manager/550\.90\.05/[0-9a-f]{64}/NVIDIA-Linux-x86_64-550\.90\.05-vgpu-kvm\.run\) and record the change to 550\.127\.06$`, titles(p)[0])
	require.Contains(t, r.h.Commands()[before:], "/usr/bin/nvidia-installer --uninstall --silent")
	require.Equal(t, verB, vgpu.InstalledVersion(r.h.Root))
	in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, verB, in.Version)
	require.Equal(t, uuids, liveUUIDs(r), "the same mdevs, by UUID")
	intent := openIntent(t, r)
	require.Equal(t, ver, intent.Before)
	require.Equal(t, verB, intent.After)
	j, err := journal.Read(r.h.Root)
	require.NoError(t, err)
	require.Equal(t, vgpu.KindUpgrade, j[len(j)-1].Kind)

	// done: a re-run plans nothing
	p, err = r.install(t)
	require.NoError(t, err)
	require.Empty(t, titles(p))

	// back to A, as rollback does it
	p, err = vgpu.PlanRevert(ctx, r.env, intent.Path)
	require.NoError(t, err)
	require.Contains(t, titles(p), "uninstall the vGPU manager 550.127.06 (its installer's --uninstall)")
	require.Contains(t, titles(p), "run the NVIDIA installer NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm")
	require.NoError(t, p.Execute(ctx, r.env, nil))
	require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
	in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, ver, in.Version)
	require.Equal(t, uuids, liveUUIDs(r))
}
