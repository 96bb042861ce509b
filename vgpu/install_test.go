package vgpu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

const ver = "550.90.05"

type rig struct {
	h      *vgputest.Host
	env    *vgpu.Env
	opts   vgpu.InstallOptions
	sleeps []time.Duration
}

func newRig(t *testing.T, scenario string, gpus ...vgpu.GPUInfo) *rig {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	run, err := vgputest.WriteInstaller(t.TempDir(), ver, "vgpu-kvm")
	require.NoError(t, err)
	r := &rig{h: h, opts: vgpu.InstallOptions{Driver: run, GPUs: gpus}}
	r.env = &vgpu.Env{Root: h.Root, Runner: h, Sleep: func(d time.Duration) { r.sleeps = append(r.sleeps, d) },
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}
	return r
}

func (r *rig) install(t *testing.T) (*vgpu.InstallPlan, error) {
	t.Helper()
	p, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	if err != nil {
		return nil, err
	}
	return p, p.Execute(context.Background(), r.env, nil)
}

var l40s = []vgpu.GPUInfo{{Address: "0000:41:00.0", DeviceID: "26b9"}, {Address: "0000:61:00.0", DeviceID: "26b9"}}

func titles(p *vgpu.InstallPlan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Title)
	}
	return out
}

func TestInstallSRIOVEndToEndThenNoOp(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	p, err := r.install(t)
	require.NoError(t, err)
	require.Equal(t, []string{"0000:41:00.0", "0000:61:00.0"}, p.SRIOV)
	require.Equal(t, []string{
		"blacklist nouveau",
		"regenerate the initramfs (so nouveau stays out of early boot)",
		"unload nouveau",
		"run the NVIDIA installer NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm",
		"load nvidia",
		"load nvidia_vgpu_vfio (where this build has it: the mdev interface)",
		"enable and start nvidia-vgpud.service",
		"enable and start nvidia-vgpu-mgr.service",
		"enable the SR-IOV VFs of 0000:41:00.0",
		"enable the SR-IOV VFs of 0000:61:00.0",
		"make the VFs survive reboots (gpuprep-vgpu-sriov.service)",
		"enable gpuprep-vgpu-sriov.service",
	}, titles(p))
	require.Equal(t, []string{
		"update-initramfs -u",
		"modprobe -r nouveau",
		"sh " + r.opts.Driver + " --silent --dkms",
		"modprobe nvidia",
		"systemctl daemon-reload", "systemctl enable --now nvidia-vgpud.service",
		"systemctl daemon-reload", "systemctl enable --now nvidia-vgpu-mgr.service",
		"/usr/lib/nvidia/sriov-manage -e 0000:41:00.0",
		"/usr/lib/nvidia/sriov-manage -e 0000:61:00.0",
		"systemctl daemon-reload", "systemctl enable gpuprep-vgpu-sriov.service",
	}, r.h.Commands(), "kernel 6.8: no nvidia_vgpu_vfio module to load")
	root := r.h.Root
	require.Equal(t, ver, vgpu.InstalledVersion(root))
	for _, g := range []string{"0000:41:00.0", "0000:61:00.0"} {
		s := vgpu.Read(root, g)
		require.Equal(t, "sriov", s.Interface)
		require.Equal(t, 16, s.NumVFs)
	}
	bl, err := root.ReadString(vgpu.NouveauBlacklist)
	require.NoError(t, err)
	require.Contains(t, bl, "blacklist nouveau")
	unit, err := root.ReadString(vgpu.SRIOVUnit)
	require.NoError(t, err)
	require.Contains(t, unit, "After=nvidia-vgpud.service nvidia-vgpu-mgr.service")
	require.Contains(t, unit, `/usr/lib/nvidia/sriov-manage -e 0000:61:00.0; [ "$$(cat /sys/bus/pci/devices/0000:61:00.0/sriov_numvfs)" = "$$(cat /sys/bus/pci/devices/0000:61:00.0/sriov_totalvfs)" ] && exit 0`)
	j, err := journal.Read(root)
	require.NoError(t, err)
	require.Equal(t, vgpu.NouveauBlacklist, j[0].Path)

	// everything is in place: the plan is empty and nothing runs
	before := len(r.h.Commands())
	p, err = r.install(t)
	require.NoError(t, err)
	require.Empty(t, titles(p))
	require.Len(t, r.h.Commands(), before)
}

func TestInstallMdevLoadsVFIOModuleAndEnablesNoVFs(t *testing.T) {
	r := newRig(t, "vgpu-fresh-mdev", vgpu.GPUInfo{Address: "0000:21:00.0", DeviceID: "1eb8"})
	p, err := r.install(t)
	require.NoError(t, err)
	require.Empty(t, p.SRIOV, "a T4 reports 16 VFs but uses mdev")
	for _, pr := range p.Prereqs {
		require.NotEqual(t, "pci-pf-stub", pr.Name, "not needed without SR-IOV")
	}
	require.Contains(t, r.h.Commands(), "modprobe nvidia_vgpu_vfio")
	require.True(t, r.h.Root.Exists("/sys/module/nvidia_vgpu_vfio"))
	require.False(t, r.h.Root.Exists(vgpu.SRIOVUnit))
	p, err = r.install(t)
	require.NoError(t, err)
	require.Empty(t, titles(p))
}

func TestInstallPrerequisitesMissing(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	b := fixture.New(r.h.Dir)
	b.Remove("/usr/src/linux-headers-6.8.0-45-generic").Remove("/usr/bin/gcc-13").Remove("/usr/sbin/dkms")
	b.File("/lib/modules/6.8.0-45-generic/modules.dep", "kernel/drivers/vfio/vfio.ko:\n")
	b.Bytes(vgpu.SecureBootVar, []byte{6, 0, 0, 0, 1})
	require.NoError(t, b.Err())
	_, err := r.install(t)
	var pe *vgpu.PrereqError
	require.ErrorAs(t, err, &pe)
	msg := err.Error()
	for _, want := range []string{
		"5 prerequisite(s) of the vGPU manager missing",
		"kernel headers: no headers for the running kernel 6.8.0-45-generic",
		"fix: apt-get install linux-headers-6.8.0-45-generic",
		"compiler: no C compiler (cc or gcc) on PATH",
		"fix: apt-get install build-essential",
		"dkms: no dkms",
		"pass --no-dkms",
		"pci-pf-stub: no module pci-pf-stub for 6.8.0-45-generic: sriov-manage needs it to enable the VFs of 0000:41:00.0, 0000:61:00.0",
		"fix: apt-get install linux-modules-extra-6.8.0-45-generic",
		"secure boot: Secure Boot is on and no module signing key is configured",
	} {
		require.Contains(t, msg, want)
	}
	require.Empty(t, r.h.Commands(), "nothing runs when a prerequisite is missing")

	// a configured DKMS MOK key satisfies Secure Boot and is passed on
	b.File("/var/lib/dkms/mok.key", "k").File("/var/lib/dkms/mok.pub", "p")
	require.NoError(t, b.Err())
	p, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.NoError(t, err)
	for _, s := range p.Steps {
		if strings.HasPrefix(s.Title, "run the NVIDIA installer") {
			require.Equal(t, []string{"sh", r.opts.Driver, "--silent", "--dkms",
				"--module-signing-secret-key=/var/lib/dkms/mok.key", "--module-signing-public-key=/var/lib/dkms/mok.pub"}, s.Commands[0])
		}
	}
}

func TestInstallerFailureStopsWithWhatToDo(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	r.h.InstallerEnv = []string{vgputest.FailEnv + "=1"}
	_, err := r.install(t)
	var se *vgpu.StepError
	require.ErrorAs(t, err, &se)
	require.Equal(t, 4, se.N)
	require.Contains(t, err.Error(), `step 4/12 (run the NVIDIA installer NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm) failed`)
	require.Contains(t, err.Error(), `"Building kernel modules"`)
	require.Contains(t, err.Error(), "to do: read /var/log/nvidia-installer.log")
	require.Contains(t, err.Error(), "steps 1–3 are done")
	require.NotContains(t, strings.Join(r.h.Commands(), "\n"), "modprobe nvidia")

	// fixed: the next run skips what is done and finishes
	r.h.InstallerEnv = nil
	p, err := r.install(t)
	require.NoError(t, err)
	require.Equal(t, "run the NVIDIA installer NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm", p.Steps[0].Title)
}

func TestInstallUnloadFailureNamesTheModule(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	r.h.Busy["nouveau"] = true
	_, err := r.install(t)
	require.ErrorContains(t, err, "step 3/12 (unload nouveau) failed")
	require.ErrorContains(t, err, "Module nouveau is in use")
	require.ErrorContains(t, err, "to do: something still uses the GPU")
}

func TestSRIOVRetriesUnbindLockAndVerifies(t *testing.T) {
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	r.h.UnbindLock = 2
	_, err := r.install(t)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{5 * time.Second, 10 * time.Second}, r.sleeps)
	require.Equal(t, 16, vgpu.Read(r.h.Root, "0000:41:00.0").NumVFs)

	// sriov-manage exiting 0 without enabling is caught by the check
	r = newRig(t, "vgpu-fresh-sriov", l40s...)
	r.h.ExitZeroNoVFs = true
	r.env.SRIOVAttempts = 3
	_, err = r.install(t)
	require.ErrorContains(t, err, "(enable the SR-IOV VFs of 0000:41:00.0) failed: VFs of 0000:41:00.0 not enabled after 3 attempts: sriov-manage exited 0 but sriov_numvfs is 0 of 16")
	require.ErrorContains(t, err, "to do: an NVML client")
	require.Len(t, r.sleeps, 2)
}

func TestInstallRejectsWrongPackages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	grid, err := vgputest.WriteInstaller(dir, ver, "grid")
	require.NoError(t, err)
	_, err = vgpu.InspectDriver(ctx, grid, h)
	require.ErrorContains(t, err, "this is the vGPU guest driver (NVIDIA-Linux-x86_64-550.90.05-grid), for inside VMs")
	plain, err := vgputest.WriteInstaller(dir, ver, "")
	require.NoError(t, err)
	_, err = vgpu.InspectDriver(ctx, plain, h)
	require.ErrorContains(t, err, "this is not the vGPU manager")

	// renamed: the header wins over the name
	kvm, err := vgputest.WriteInstaller(dir, ver, "vgpu-kvm")
	require.NoError(t, err)
	renamed := filepath.Join(dir, "NVIDIA-Linux-x86_64-535.129.03-vgpu-kvm.run")
	require.NoError(t, os.Rename(kvm, renamed))
	_, err = vgpu.InspectDriver(ctx, renamed, h)
	require.ErrorContains(t, err, "file name says x86_64 535.129.03 but the archive holds NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm")

	// a header that claims vgpu-kvm over an archive without nvidia-vgpu-mgr
	fake := filepath.Join(dir, "fake.run")
	b, _ := os.ReadFile(grid)
	require.NoError(t, os.WriteFile(fake, []byte(strings.Replace(string(b), "-grid\"", "-vgpu-kvm\"", 1)), 0o644))
	_, err = vgpu.InspectDriver(ctx, fake, h)
	require.ErrorContains(t, err, "the archive holds no nvidia-vgpu-mgr")

	// the listing is skipped where commands cannot run
	d, err := vgpu.InspectDriver(ctx, renamed, host.NoRunner{})
	require.Error(t, err)
	require.NoError(t, os.Rename(renamed, kvm))
	d, err = vgpu.InspectDriver(ctx, kvm, host.NoRunner{})
	require.NoError(t, err)
	require.False(t, d.Listed)
	require.Equal(t, ver, d.Version)

	for _, name := range []string{"nvidia-vgpu-ubuntu-550_550.90.05_amd64.deb", "NVIDIA-vGPU-rhel-9.4-550.90.05.x86_64.rpm"} {
		_, err = vgpu.InspectDriver(ctx, filepath.Join(dir, name), h)
		require.True(t, errors.Is(err, vgpu.ErrUnsupportedPackage), name)
		require.ErrorContains(t, err, "install this package with `")
	}
	txt := filepath.Join(dir, "NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm2.run")
	require.NoError(t, os.WriteFile(txt, []byte("ELF..."), 0o644))
	_, err = vgpu.InspectDriver(ctx, txt, h)
	require.ErrorContains(t, err, "no makeself shell header")
}
