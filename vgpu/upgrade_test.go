package vgpu_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
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
	r.env.Sysfs = r.h
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
	require.Regexp(t, `^keep the vGPU manager 550\.90\.05 for rollback \(/var/lib/gpuprep/vgpu-manager/550\.90\.05/[0-9a-f]{64}/NVIDIA-Linux-x86_64-550\.90\.05-vgpu-kvm\.run\) and record the change to 550\.127\.06 in /var/lib/gpuprep/vgpu-manager/upgrade-550\.90\.05-to-550\.127\.06-[0-9]+\.json$`, titles(p)[0])
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

// A VM holding a vGPU (its QEMU has the mdev's VFIO group open) stops the
// change before anything is planned, naming the vGPU and the process.
func TestUpgradeRefusedWhileVMHoldsVGPU(t *testing.T) {
	r, uuids, runB := upgradeRig(t)
	group := r.h.Root.LinkBase("/sys/bus/mdev/devices/" + uuids[1] + "/iommu_group")
	require.NotEmpty(t, group)
	b := fixture.New(r.h.Dir).File("/proc/999/comm", "qemu-system-x86\n").Mkdir("/proc/999/fd")
	require.NoError(t, b.Err())
	require.NoError(t, os.Symlink("/dev/vfio/"+group, filepath.Join(r.h.Dir, "proc/999/fd/3")))
	before := len(r.h.Commands())

	r.opts.Driver = runB
	_, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	var held *vgpu.HeldError
	require.ErrorAs(t, err, &held)
	require.ErrorContains(t, err, "vGPU "+uuids[1]+" (GRID T4-4Q) on 0000:21:00.0 is held by 999 (qemu-system-x86: /dev/vfio/"+group+")")
	require.NotContains(t, err.Error(), uuids[0])
	require.Len(t, r.h.Commands(), before, "nothing ran")
	require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
	require.Equal(t, uuids, liveUUIDs(r))
}

// killAt is a runner that ends the run (as a kill would: the step does not
// happen, the run goes no further) at the first command starting with
// prefix.
type killAt struct {
	*vgputest.Host
	prefix string
	killed bool
}

func (k *killAt) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if !k.killed && strings.HasPrefix(strings.Join(argv, " "), k.prefix) {
		k.killed = true
		return nil, context.Canceled
	}
	return k.Host.Run(ctx, argv...)
}

// A change stopped between the old manager's uninstall and the new one's
// install: the vGPUs are gone and no manager is installed. The next run
// resumes from the record: no second copy or record, no uninstall, the new
// version installed and the vGPUs of before made again with their UUIDs.
func TestUpgradeResumesAfterStopMidway(t *testing.T) {
	r, uuids, runB := upgradeRig(t)
	r.opts.Driver = runB
	k := &killAt{Host: r.h, prefix: "sh "}
	r.env.Runner = k
	_, err := r.install(t)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, k.killed)
	require.Empty(t, liveUUIDs(r), "the vGPUs were removed before the stop")
	require.False(t, r.h.Root.Exists("/usr/bin/nvidia-vgpu-mgr"), "A was uninstalled")

	r.env.Runner = r.h
	p, err := r.install(t)
	require.NoError(t, err)
	for _, s := range titles(p) {
		require.NotContains(t, s, "keep the vGPU manager")
		require.NotContains(t, s, "uninstall")
	}
	require.Contains(t, titles(p), "run the NVIDIA installer NVIDIA-Linux-x86_64-550.127.06-vgpu-kvm")
	require.Contains(t, p.Notes[len(p.Notes)-1], "resume the change: the vGPU manager 550.90.05 (.run) → 550.127.06 (.run)")
	require.Equal(t, verB, vgpu.InstalledVersion(r.h.Root))
	require.Equal(t, uuids, liveUUIDs(r))
	j, err := journal.Read(r.h.Root)
	require.NoError(t, err)
	n := 0
	for _, en := range j {
		if en.Kind == vgpu.KindUpgradeIntent {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Equal(t, vgpu.KindUpgrade, j[len(j)-1].Kind)
}

// The same change with the vGPU manager's .deb: dpkg's records say which
// package holds nvidia-vgpu-mgr, apt-get removes it, the new .deb goes in,
// and the revert puts the kept .deb back.
func TestUpgradeDebAToBThenRevert(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed: the .deb tests build a real package with it")
	}
	r := newRig(t, "vgpu-fresh-mdev", t4)
	b := fixture.New(r.h.Dir).File("/usr/bin/dpkg", "#!/bin/sh\n").File("/usr/bin/apt-get", "#!/bin/sh\n")
	require.NoError(t, b.Err())
	debA, err := vgputest.WriteDeb(t.TempDir(), ver, "vgpu-kvm")
	require.NoError(t, err)
	debB, err := vgputest.WriteDeb(t.TempDir(), verB, "vgpu-kvm")
	require.NoError(t, err)
	r.opts.Driver = debA
	_, err = r.install(t)
	require.NoError(t, err)
	ctx := context.Background()
	in, err := vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, vgpu.Installed{Version: ver, Loaded: ver, Format: vgpu.FormatDeb, Package: "nvidia-vgpu-ubuntu-550", Record: vgpu.DpkgInfo + "/nvidia-vgpu-ubuntu-550.list"}, in)
	vp, err := vgpu.MakePlan(r.h.Root, []vgpu.Want{{GPU: t4.Address, Type: "T4-4Q", Count: 1}})
	require.NoError(t, err)
	_, err = vgpu.Apply(r.h.Root, r.h, vp)
	require.NoError(t, err)
	uuids := liveUUIDs(r)
	require.Len(t, uuids, 1)
	r.env.Sysfs = r.h

	r.opts.Driver = debB
	p, err := r.install(t)
	require.NoError(t, err)
	require.Contains(t, titles(p), "uninstall the vGPU manager 550.90.05 (the package manager)")
	require.Contains(t, r.h.Commands(), "env DEBIAN_FRONTEND=noninteractive apt-get remove -y nvidia-vgpu-ubuntu-550")
	in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, verB, in.Version)
	require.Equal(t, verB, vgpu.InstalledVersion(r.h.Root))
	require.Equal(t, uuids, liveUUIDs(r))

	p, err = vgpu.PlanRevert(ctx, r.env, openIntent(t, r).Path)
	require.NoError(t, err)
	require.NoError(t, p.Execute(ctx, r.env, nil))
	in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, ver, in.Version)
	require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
	require.Equal(t, uuids, liveUUIDs(r))
}

// Without a copy of the installed version (installed by hand, not by
// gpuprep) the change is refused unless --previous-driver gives one, which
// must be that version.
func TestUpgradeNeedsThePreviousInstaller(t *testing.T) {
	r, _, runB := upgradeRig(t)
	require.NoError(t, os.RemoveAll(filepath.Join(r.h.Dir, vgpu.UpgradeDir)))
	r.opts.Driver = runB
	_, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.ErrorContains(t, err, "the vGPU manager 550.90.05 is installed (/var/lib/nvidia/log); installing 550.127.06 removes it, and gpuprep has no copy of it to put back on rollback: give its installer or package with --previous-driver FILE")
	r.opts.Previous = runB
	_, err = vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.ErrorContains(t, err, "--previous-driver "+runB+" is the vGPU manager 550.127.06 (.run), but 550.90.05 (.run) is installed")
	runA, err := vgputest.WriteInstaller(t.TempDir(), ver, "vgpu-kvm")
	require.NoError(t, err)
	r.opts.Previous = runA
	p, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.NoError(t, err)
	require.Contains(t, titles(p)[0], "keep the vGPU manager 550.90.05 for rollback")
}

// On the vendor-specific VFIO interface (L40S, kernel 6.8) the vGPUs are VF
// types: the change removes them (current_vgpu_type 0), enables the VFs
// again after the reload (sriov-manage -e: a reload loses them), and gives
// each VF its type back.
func TestUpgradeSRIOVKeepsVFTypes(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	_, err := r.install(t)
	require.NoError(t, err)
	vp, err := vgpu.MakePlan(r.h.Root, []vgpu.Want{{GPU: l40s[0].Address, Type: "L40S-24Q", Count: 2}})
	require.NoError(t, err)
	_, err = vgpu.Apply(r.h.Root, r.h, vp)
	require.NoError(t, err)
	vfs := func() map[string]string {
		out := map[string]string{}
		for _, v := range vgpu.Existing(r.h.Root, l40s[0].Address) {
			out[v.Device] = v.Type
		}
		return out
	}
	before := vfs()
	require.Len(t, before, 2)
	runB, err := vgputest.WriteInstaller(t.TempDir(), verB, "vgpu-kvm")
	require.NoError(t, err)
	r.env.Sysfs = r.h
	r.opts.Driver = runB
	p, err := r.install(t)
	require.NoError(t, err)
	require.Contains(t, titles(p), "enable the SR-IOV VFs of 0000:41:00.0")
	require.Contains(t, titles(p), "enable the SR-IOV VFs of 0000:61:00.0")
	require.Equal(t, verB, vgpu.InstalledVersion(r.h.Root))
	require.Equal(t, before, vfs(), "the same VFs, the same types")

	p, err = vgpu.PlanRevert(context.Background(), r.env, openIntent(t, r).Path)
	require.NoError(t, err)
	require.NoError(t, p.Execute(context.Background(), r.env, nil))
	require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
	require.Equal(t, before, vfs())
}
