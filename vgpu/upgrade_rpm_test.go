package vgpu_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// rpmRig is the T4 (mdev) fixture made a RHEL host with rpm and, with dnf,
// dnf, its vGPU manager installed from the .rpm of ver (WriteRPM) and one
// T4-4Q vGPU on it.
func rpmRig(t *testing.T, dnf bool) (*rig, []string) {
	t.Helper()
	r := newRig(t, "vgpu-fresh-mdev", t4)
	b := fixture.New(r.h.Dir).File("/etc/os-release", "NAME=\"Red Hat Enterprise Linux\"\nID=\"rhel\"\nID_LIKE=\"fedora\"\n").File("/usr/bin/rpm", "#!/bin/sh\n")
	if dnf {
		b.File("/usr/bin/dnf", "#!/bin/sh\n")
	}
	require.NoError(t, b.Err())
	rpmA, err := vgputest.WriteRPM(t.TempDir(), ver, "vgpu-kvm")
	require.NoError(t, err)
	r.opts.Driver = rpmA
	_, err = r.install(t)
	require.NoError(t, err)
	vp, err := vgpu.MakePlan(r.h.Root, []vgpu.Want{{GPU: t4.Address, Type: "T4-4Q", Count: 1}})
	require.NoError(t, err)
	_, err = vgpu.Apply(r.h.Root, r.h, vp)
	require.NoError(t, err)
	uuids := liveUUIDs(r)
	require.Len(t, uuids, 1)
	r.env.Sysfs = r.h
	return r, uuids
}

// The change with the vGPU manager's .rpm: rpm -qf says which package holds
// nvidia-vgpu-mgr, dnf remove -y (rpm -e without dnf) removes it, the new
// .rpm goes in, and the revert puts the kept .rpm back.
func TestUpgradeRPMAToBThenRevert(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dnf    bool
		remove string
	}{
		{"dnf", true, "dnf remove -y NVIDIA-vGPU-rhel"},
		{"rpm", false, "rpm -e NVIDIA-vGPU-rhel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, uuids := rpmRig(t, tc.dnf)
			ctx := context.Background()
			in, err := vgpu.ReadInstalled(ctx, r.h.Root, r.h)
			require.NoError(t, err)
			require.Equal(t, vgpu.Installed{Version: ver, Loaded: ver, Format: vgpu.FormatRPM, Package: "NVIDIA-vGPU-rhel", Record: "rpm -qf /usr/bin/nvidia-vgpu-mgr"}, in)

			rpmB, err := vgputest.WriteRPM(t.TempDir(), verB, "vgpu-kvm")
			require.NoError(t, err)
			r.opts.Driver = rpmB
			before := len(r.h.Commands())
			p, err := r.install(t)
			require.NoError(t, err)
			require.Contains(t, titles(p), "uninstall the vGPU manager 550.90.05 (the package manager)")
			require.Regexp(t, `^keep the vGPU manager 550\.90\.05 for rollback \(/var/lib/gpuprep/vgpu-manager/550\.90\.05/[0-9a-f]{64}/NVIDIA-vGPU-rhel-9\.4-550\.90\.05\.x86_64\.rpm\)`, titles(p)[0])
			cmds := r.h.Commands()[before:]
			require.Contains(t, cmds, tc.remove)
			in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
			require.NoError(t, err)
			require.Equal(t, vgpu.Installed{Version: verB, Loaded: verB, Format: vgpu.FormatRPM, Package: "NVIDIA-vGPU-rhel", Record: "rpm -qf /usr/bin/nvidia-vgpu-mgr"}, in)
			require.Equal(t, verB, vgpu.InstalledVersion(r.h.Root))
			require.Equal(t, uuids, liveUUIDs(r), "the same mdev, by UUID")
			out, err := r.h.Run(ctx, "rpm", "-q", "NVIDIA-vGPU-rhel")
			require.NoError(t, err)
			require.Equal(t, "NVIDIA-vGPU-rhel-9.4-550.127.06.x86_64\n", string(out), "B alone is installed")

			// done: a re-run plans nothing
			p, err = r.install(t)
			require.NoError(t, err)
			require.Empty(t, titles(p))

			// back to A, as rollback does it
			before = len(r.h.Commands())
			p, err = vgpu.PlanRevert(ctx, r.env, openIntent(t, r).Path)
			require.NoError(t, err)
			require.Contains(t, titles(p), "uninstall the vGPU manager 550.127.06 (the package manager)")
			require.NoError(t, p.Execute(ctx, r.env, nil))
			require.Contains(t, r.h.Commands()[before:], tc.remove)
			in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
			require.NoError(t, err)
			require.Equal(t, ver, in.Version)
			require.Equal(t, vgpu.FormatRPM, in.Format)
			require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
			require.Equal(t, uuids, liveUUIDs(r))
		})
	}
}

// A host whose vGPU manager came from the .run switches to the .rpm: the
// .run's own uninstaller removes it, then rpm installs the package; the
// revert removes the package and runs the kept .run again.
func TestUpgradeRunToRPMThenRevert(t *testing.T) {
	r, uuids, _ := upgradeRig(t)
	b := fixture.New(r.h.Dir).File("/etc/os-release", "NAME=\"Red Hat Enterprise Linux\"\nID=\"rhel\"\nID_LIKE=\"fedora\"\n").File("/usr/bin/rpm", "#!/bin/sh\n").File("/usr/bin/dnf", "#!/bin/sh\n")
	require.NoError(t, b.Err())
	rpmB, err := vgputest.WriteRPM(t.TempDir(), verB, "vgpu-kvm")
	require.NoError(t, err)
	r.opts.Driver = rpmB
	ctx := context.Background()
	before := len(r.h.Commands())
	p, err := r.install(t)
	require.NoError(t, err)
	require.Contains(t, titles(p), "uninstall the vGPU manager 550.90.05 (its installer's --uninstall)")
	cmds := r.h.Commands()[before:]
	require.Contains(t, cmds, "/usr/bin/nvidia-installer --uninstall --silent")
	in, err := vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, vgpu.Installed{Version: verB, Loaded: verB, Format: vgpu.FormatRPM, Package: "NVIDIA-vGPU-rhel", Record: "rpm -qf /usr/bin/nvidia-vgpu-mgr"}, in)
	require.Equal(t, uuids, liveUUIDs(r))

	before = len(r.h.Commands())
	p, err = vgpu.PlanRevert(ctx, r.env, openIntent(t, r).Path)
	require.NoError(t, err)
	require.NoError(t, p.Execute(ctx, r.env, nil))
	require.Contains(t, r.h.Commands()[before:], "dnf remove -y NVIDIA-vGPU-rhel")
	in, err = vgpu.ReadInstalled(ctx, r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, vgpu.Installed{Version: ver, Loaded: ver, Format: vgpu.FormatRun, Record: vgpu.RunRecord}, in)
	_, err = r.h.Run(ctx, "rpm", "-q", "NVIDIA-vGPU-rhel")
	require.Error(t, err, "the package is gone")
	require.Equal(t, uuids, liveUUIDs(r))
}

// An rpm change stopped after dnf removed A and before B went in resumes
// from its record: no second uninstall, B installed, the vGPU back.
func TestUpgradeRPMResumesAfterStopMidway(t *testing.T) {
	r, uuids := rpmRig(t, true)
	rpmB, err := vgputest.WriteRPM(t.TempDir(), verB, "vgpu-kvm")
	require.NoError(t, err)
	r.opts.Driver = rpmB
	k := &killAt{Host: r.h, prefix: "dnf install"}
	r.env.Runner = k
	_, err = r.install(t)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, k.killed)
	require.False(t, r.h.Root.Exists("/usr/bin/nvidia-vgpu-mgr"), "A was removed")

	r.env.Runner = r.h
	before := len(r.h.Commands())
	p, err := r.install(t)
	require.NoError(t, err)
	for _, s := range titles(p) {
		require.NotContains(t, s, "uninstall")
	}
	require.NotContains(t, r.h.Commands()[before:], "dnf remove -y NVIDIA-vGPU-rhel")
	require.Contains(t, p.Notes[len(p.Notes)-1], "resume the change: the vGPU manager 550.90.05 (.rpm) → 550.127.06 (.rpm)")
	in, err := vgpu.ReadInstalled(context.Background(), r.h.Root, r.h)
	require.NoError(t, err)
	require.Equal(t, verB, in.Version)
	require.Equal(t, vgpu.FormatRPM, in.Format)
	require.Equal(t, uuids, liveUUIDs(r))
}
