package main

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// upgradeNode is a T4 (mdev) fixture root whose commands and vGPU
// attributes the simulated host answers, for vgpu install and rollback.
func upgradeNode(t *testing.T) (string, *vgputest.Host, *deps) {
	t.Helper()
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	h, err := vgputest.New(root)
	require.NoError(t, err)
	d := realDeps()
	d.vgpuInstallRunner = func(*host.Root, bool) (host.Runner, error) { return h, nil }
	d.vgpuSysfs = func(*host.Root) vgpu.AttrWriter { return h }
	d.provisionKernel = func(*host.Root) (vfio.Sysfs, host.Runner, error) { return h, h, nil }
	return root, h, d
}

func t4UUIDs(h *vgputest.Host) []string {
	var out []string
	for _, v := range vgpu.Existing(h.Root, "0000:21:00.0") {
		out = append(out, v.Device)
	}
	sort.Strings(out)
	return out
}

// The upgrade: vgpu install --driver B on a host gpuprep installed A
// on, with two vGPUs: --dry-run shows each step and changes nothing; the
// install changes the version and makes the vGPUs again; rollback puts A
// back with the same vGPUs, and a second rollback has nothing to do.
func TestVGPUInstallUpgradeDryRunThenRollback(t *testing.T) {
	root, h, d := upgradeNode(t)
	runA, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	runB, err := vgputest.WriteInstaller(t.TempDir(), "550.127.06", "vgpu-kvm")
	require.NoError(t, err)
	_, stderr, code := gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", runA)
	require.Equal(t, 0, code, stderr)
	p, err := vgpu.MakePlan(h.Root, []vgpu.Want{{GPU: "0000:21:00.0", Type: "T4-4Q", Count: 2}})
	require.NoError(t, err)
	_, err = vgpu.Apply(h.Root, h, p)
	require.NoError(t, err)
	uuids := t4UUIDs(h)
	require.Len(t, uuids, 2)

	calls := len(h.Commands())
	out, stderr, code := gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", runB, "--dry-run")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"note: upgrade: the vGPU manager 550.90.05 (.run) → 550.127.06 (.run); record /var/lib/gpuprep/vgpu-manager/upgrade-550.90.05-to-550.127.06-",
		"  1. keep the vGPU manager 550.90.05 for rollback (/var/lib/gpuprep/vgpu-manager/550.90.05/" + sha256Hex(t, runA) + "/NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm.run) and record the change to 550.127.06 in /var/lib/gpuprep/vgpu-manager/upgrade-550.90.05-to-550.127.06-",
		"  2. remove the vGPUs (made again after the change): " + uuids[0] + ", " + uuids[1] + "\n",
		"  3. stop the running vGPU manager daemons\n",
		"  6. uninstall the vGPU manager 550.90.05 (its installer's --uninstall)\n       $ /usr/bin/nvidia-installer --uninstall --silent\n",
		"  7. run the NVIDIA installer NVIDIA-Linux-x86_64-550.127.06-vgpu-kvm\n",
		"recreate the vGPUs that existed: " + uuids[0] + " (GRID T4-4Q on 0000:21:00.0), " + uuids[1] + " (GRID T4-4Q on 0000:21:00.0)\n",
		"verify: the vGPU manager 550.127.06 is loaded, nvidia-vgpu-mgr runs, the vGPUs are back\n",
	} {
		require.Contains(t, out, want)
	}
	require.Len(t, h.Commands(), calls, "--dry-run ran nothing")
	require.Equal(t, "550.90.05", vgpu.InstalledVersion(h.Root))
	require.Empty(t, h.Root.Names(vgpu.UpgradeDir+"/550.90.05/"+sha256Hex(t, runA)+"/x"))

	out, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", runB)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "done 13/13: verify: the vGPU manager 550.127.06 is loaded")
	require.Equal(t, "550.127.06", vgpu.InstalledVersion(h.Root))
	require.Equal(t, uuids, t4UUIDs(h))

	out, stderr, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Contains(t, []int{exitOK, exitNeedReboot}, code, out+stderr)
	require.Contains(t, out, "note: the vGPU manager is back at 550.90.05 (NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm), with the vGPUs it had")
	require.Equal(t, "550.90.05", vgpu.InstalledVersion(h.Root))
	in, err := vgpu.ReadInstalled(t.Context(), h.Root, h)
	require.NoError(t, err)
	require.Equal(t, "550.90.05", in.Version)
	require.Equal(t, uuids, t4UUIDs(h))

	out, stderr, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+stderr)
	require.Contains(t, out, "Nothing to roll back.")
}
