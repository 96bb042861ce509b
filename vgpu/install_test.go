package vgpu_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

const ver = "550.90.05"

type rig struct {
	h      *vgputest.Host
	env    effect.Effector
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
	r.env = effect.Effector{Root: h.Root, Runner: h, Pause: func(d time.Duration) { r.sleeps = append(r.sleeps, d) },
		Clock: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}
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
		"sh " + vgputest.InstallerCopy(r.h.Dir, r.opts.Driver) + " --silent --dkms",
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
		"5 prerequisites of the vGPU manager missing",
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
	r.opts.SRIOVAttempts = 3
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

	// the listing is read without commands: where none can run too
	_, err = vgpu.InspectDriver(ctx, renamed, host.NoRunner{})
	require.Error(t, err)
	require.NoError(t, os.Rename(renamed, kvm))
	d, err := vgpu.InspectDriver(ctx, kvm, host.NoRunner{})
	require.NoError(t, err)
	require.True(t, d.Listed)
	require.Equal(t, ver, d.Version)
	require.Empty(t, h.Calls, "nothing was run to read the drivers")

	for name, want := range map[string]string{
		"nvidia-vgpu-ubuntu-550_550.90.05_amd64.deb": "not a Debian package (no ar archive header)",
		"NVIDIA-vGPU-rhel-9.4-550.90.05.x86_64.rpm":  "not an RPM package (no RPM lead)",
	} {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte("#!/bin/sh\n"), 0o644))
		_, err = vgpu.InspectDriver(ctx, f, h)
		require.ErrorContains(t, err, want)
	}
	txt := filepath.Join(dir, "NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm2.run")
	require.NoError(t, os.WriteFile(txt, []byte("ELF..."), 0o644))
	_, err = vgpu.InspectDriver(ctx, txt, h)
	require.ErrorContains(t, err, "no makeself shell header")
}

// packageRig is a rig whose driver is a package: a real .deb built with
// dpkg-deb (the test is skipped without it) on the Ubuntu fixture, or a
// WriteRPM stand-in (rpmbuild is not needed) on the fixture made a RHEL
// host with rpm and, with dnf, dnf.
func packageRig(t *testing.T, format string, dnf bool) *rig {
	t.Helper()
	r := newRig(t, "vgpu-fresh-sriov", l40s...)
	b := fixture.New(r.h.Dir)
	var err error
	if format == "deb" {
		if _, err := exec.LookPath("dpkg-deb"); err != nil {
			t.Skip("dpkg-deb not installed: the .deb tests build a real package with it")
		}
		b.File("/usr/bin/dpkg", "#!/bin/sh\n").File("/usr/bin/apt-get", "#!/bin/sh\n")
		r.opts.Driver, err = vgputest.WriteDeb(t.TempDir(), ver, "vgpu-kvm")
	} else {
		b.File("/etc/os-release", "NAME=\"Red Hat Enterprise Linux\"\nID=\"rhel\"\nID_LIKE=\"fedora\"\n").File("/usr/bin/rpm", "#!/bin/sh\n")
		if dnf {
			b.File("/usr/bin/dnf", "#!/bin/sh\n")
		}
		r.opts.Driver, err = vgputest.WriteRPM(t.TempDir(), ver, "vgpu-kvm")
	}
	require.NoError(t, err)
	require.NoError(t, b.Err())
	return r
}

func prereqNames(p *vgpu.InstallPlan) []string {
	var out []string
	for _, q := range p.Prereqs {
		out = append(out, q.Name)
	}
	return out
}

// The same steps as the .run's, with the package installed in place of the
// installer; then a re-run does nothing.
func TestInstallPackageEndToEndThenNoOp(t *testing.T) {
	for _, tc := range []struct {
		format, name string
		dnf          bool
		cmd          func(file string) string
	}{
		{"deb", "nvidia-vgpu-ubuntu-550 550.90.05 (apt-get)", true, func(f string) string { return "env DEBIAN_FRONTEND=noninteractive apt-get install -y " + f }},
		{"rpm", "NVIDIA-vGPU-rhel 9.4-550.90.05 (dnf)", true, func(f string) string { return "dnf install -y " + f }},
		{"rpm", "NVIDIA-vGPU-rhel 9.4-550.90.05 (rpm)", false, func(f string) string { return "rpm -Uvh --replacepkgs " + f }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := packageRig(t, tc.format, tc.dnf)
			// a package brings DKMS and the compiler as dependencies: neither is checked
			b := fixture.New(r.h.Dir).Remove("/usr/bin/gcc-13").Remove("/usr/sbin/dkms")
			if !tc.dnf {
				b.File("/usr/sbin/dkms", "#!/bin/sh\n") // rpm alone does not resolve dependencies
			}
			require.NoError(t, b.Err())
			p, err := r.install(t)
			require.NoError(t, err)
			require.True(t, p.Driver.Listed)
			require.Equal(t, tc.format, p.Driver.Format)
			require.Equal(t, ver, p.Driver.Version)
			require.Equal(t, []string{"kernel headers", "package tool", "pci-pf-stub", "secure boot"}, prereqNames(p))
			require.Empty(t, p.Notes)
			require.Equal(t, []string{
				"blacklist nouveau",
				"regenerate the initramfs (so nouveau stays out of early boot)",
				"unload nouveau",
				"install the package " + tc.name,
				"load nvidia",
				"load nvidia_vgpu_vfio (where this build has it: the mdev interface)",
				"enable and start nvidia-vgpud.service",
				"enable and start nvidia-vgpu-mgr.service",
				"enable the SR-IOV VFs of 0000:41:00.0",
				"enable the SR-IOV VFs of 0000:61:00.0",
				"make the VFs survive reboots (gpuprep-vgpu-sriov.service)",
				"enable gpuprep-vgpu-sriov.service",
			}, titles(p))
			cmds := r.h.Commands()
			// what the package manager gets is the verified root-only copy
			require.Equal(t, tc.cmd(filepath.Join(r.h.Dir, vgpu.InstallerScratch, p.Driver.SHA256, filepath.Base(r.opts.Driver))), cmds[2])
			require.NoDirExists(t, filepath.Join(r.h.Dir, vgpu.InstallerScratch, p.Driver.SHA256), "the copy is left behind")
			require.Equal(t, "modprobe nvidia", cmds[3])
			require.Equal(t, ver, vgpu.InstalledVersion(r.h.Root))
			require.Equal(t, 16, vgpu.Read(r.h.Root, "0000:61:00.0").NumVFs)
			require.True(t, r.h.Root.Exists(vgpu.SRIOVUnit))

			before := len(r.h.Commands())
			p, err = r.install(t)
			require.NoError(t, err)
			require.Empty(t, titles(p))
			require.Len(t, r.h.Commands(), before)
		})
	}
}

// The package is told by what it holds, not by its name: a guest (GRID)
// package or a plain driver package is refused, also when renamed to look
// like the vGPU manager, and a vGPU manager package under any name is taken.
func TestInspectPackageByContents(t *testing.T) {
	ctx := context.Background()
	for _, format := range []string{"deb", "rpm"} {
		t.Run(format, func(t *testing.T) {
			r := packageRig(t, format, true)
			write, pkgVer := vgputest.WriteRPM, ver+"-1" // an rpm's VERSION-RELEASE
			if format == "deb" {
				write, pkgVer = vgputest.WriteDeb, ver
			}
			dir := t.TempDir()
			kvmName := filepath.Base(r.opts.Driver)
			grid, err := write(dir, ver, "grid")
			require.NoError(t, err)
			renamed := filepath.Join(t.TempDir(), kvmName)
			require.NoError(t, os.Rename(grid, renamed))
			_, err = vgpu.InspectDriver(ctx, renamed, r.h)
			require.ErrorContains(t, err, "this is the vGPU guest driver (package nvidia-linux-grid-550 "+pkgVer+" holds nvidia-gridd, no nvidia-vgpu-mgr), for inside VMs")

			plain, err := write(dir, ver, "")
			require.NoError(t, err)
			_, err = vgpu.InspectDriver(ctx, plain, r.h)
			require.ErrorContains(t, err, "this is not the vGPU manager (package nvidia-driver-550 "+pkgVer+" holds no /usr/bin/nvidia-vgpu-mgr")

			odd := filepath.Join(dir, "vgpu-manager.pkg")
			require.NoError(t, os.Rename(r.opts.Driver, odd))
			d, err := vgpu.InspectDriver(ctx, odd, r.h)
			require.NoError(t, err)
			require.Equal(t, format, d.Format)
			require.Equal(t, "x86_64", d.Arch)
			require.Empty(t, r.h.Commands(), "only queries ran")

			// a refused package plans nothing
			r.opts.Driver = renamed
			_, err = r.install(t)
			require.ErrorContains(t, err, "vGPU guest driver")
			require.Empty(t, r.h.Commands())
		})
	}
}

// The exact rpm queries, answered by a FakeRunner as a real rpm answers
// them (rpmbuild is not on the machines the tests run on, so no real .rpm
// is built).
func TestInspectRPMQueries(t *testing.T) {
	f, err := vgputest.WriteRPM(t.TempDir(), ver, "vgpu-kvm")
	require.NoError(t, err)
	body, err := os.ReadFile(f)
	require.NoError(t, err)
	fr := &copyQueries{t: t, user: f, want: body, responses: map[string]host.FakeResponse{
		"rpm -qp --qf %{NAME} %{VERSION} %{RELEASE} %{ARCH} FILE": {Out: []byte("NVIDIA-vGPU-rhel 9.4 550.90.05 x86_64")},
		"rpm -qlp FILE": {Out: []byte("/etc/nvidia/nvidia-vgpud.conf\n/usr/bin/nvidia-smi\n/usr/bin/nvidia-vgpu-mgr\n/usr/bin/nvidia-vgpud\n/usr/lib/nvidia/sriov-manage\n")},
	}}
	d, err := vgpu.InspectDriver(context.Background(), f, fr)
	require.NoError(t, err)
	require.Equal(t, "NVIDIA-vGPU-rhel 9.4-550.90.05", d.Name())
	require.Equal(t, ver, d.Version)
	require.Equal(t, sha(body), d.SHA256)
	require.Len(t, fr.calls, 2)

	fr.responses["rpm -qlp FILE"] = host.FakeResponse{Out: []byte("/usr/bin/nvidia-smi\n/usr/bin/nvidia-gridd\n/etc/nvidia/gridd.conf.template\n")}
	_, err = vgpu.InspectDriver(context.Background(), f, fr)
	require.ErrorContains(t, err, "this is the vGPU guest driver")

	// the queries cannot run: the package is not taken on trust
	_, err = vgpu.InspectDriver(context.Background(), f, host.NoRunner{})
	require.ErrorContains(t, err, "reading the package (rpm -qp) failed")
	require.ErrorContains(t, err, "reading a .rpm needs rpm on the machine gpuprep runs on")

	// a Debian version with epoch and revision: the driver version is its upstream part
	deb := filepath.Join(t.TempDir(), "x.deb")
	require.NoError(t, os.WriteFile(deb, []byte("!<arch>\ndebian-binary"), 0o644))
	fr = &copyQueries{t: t, user: deb, want: []byte("!<arch>\ndebian-binary"), responses: map[string]host.FakeResponse{
		"dpkg-deb -f FILE Package Version Architecture": {Out: []byte("Package: nvidia-vgpu-ubuntu-550\nVersion: 1:550.90.05-0ubuntu1\nArchitecture: amd64\n")},
		"dpkg-deb -c FILE": {Out: []byte("drwxr-xr-x root/root         0 2024-06-01 00:00 ./usr/bin/\n-rwxr-xr-x root/root   1234 2024-06-01 00:00 ./usr/bin/nvidia-vgpu-mgr\n")},
	}}
	d, err = vgpu.InspectDriver(context.Background(), deb, fr)
	require.NoError(t, err)
	require.Equal(t, ver, d.Version)
	require.Equal(t, "1:550.90.05-0ubuntu1", d.PkgVersion)
}

func TestInstallPackageFailureThenSuccess(t *testing.T) {
	for _, format := range []string{"deb", "rpm"} {
		t.Run(format, func(t *testing.T) {
			r := packageRig(t, format, true)
			r.h.FailPackage = true
			_, err := r.install(t)
			var se *vgpu.StepError
			require.ErrorAs(t, err, &se)
			require.Equal(t, 4, se.N)
			require.ErrorContains(t, err, "step 4/12 (install the package ")
			require.ErrorContains(t, err, "Bad return status for module build on kernel: 6.8.0-45-generic")
			require.ErrorContains(t, err, "a kernel module build error is in /var/lib/dkms/nvidia*/*/build/make.log")
			require.ErrorContains(t, err, "steps 1–3 are done")
			require.NotContains(t, strings.Join(r.h.Commands(), "\n"), "modprobe nvidia")
			require.False(t, r.h.Root.Exists("/usr/bin/nvidia-vgpu-mgr"))

			r.h.FailPackage = false
			p, err := r.install(t)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(p.Steps[0].Title, "install the package "))
			p, err = r.install(t)
			require.NoError(t, err)
			require.Empty(t, titles(p))
		})
	}
}

func TestInstallPackagePrerequisites(t *testing.T) {
	r := packageRig(t, "deb", true)
	b := fixture.New(r.h.Dir)
	b.Remove("/usr/src/linux-headers-6.8.0-45-generic").Remove("/usr/bin/dpkg").Remove("/usr/bin/apt-get")
	b.Bytes(vgpu.SecureBootVar, []byte{6, 0, 0, 0, 1})
	require.NoError(t, b.Err())
	_, err := r.install(t)
	var pe *vgpu.PrereqError
	require.ErrorAs(t, err, &pe)
	for _, want := range []string{
		"3 prerequisites of the vGPU manager missing",
		"kernel headers: no headers for the running kernel 6.8.0-45-generic",
		"package tool: no dpkg: this host does not install .deb packages",
		"fix: use the vGPU manager package for this distribution (the .rpm) or the .run",
		"secure boot: Secure Boot is on and DKMS has no module signing key",
		"fix: create DKMS's key pair (/var/lib/dkms/mok.key",
	} {
		require.ErrorContains(t, err, want)
	}
	require.Empty(t, r.h.Commands())

	// dpkg without apt-get: dpkg -i, which needs dkms installed already
	b.File("/usr/src/linux-headers-6.8.0-45-generic/Makefile", "").File("/usr/bin/dpkg", "").File("/var/lib/dkms/mok.key", "k").File("/var/lib/dkms/mok.pub", "p")
	require.NoError(t, b.Err())
	p, err := vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.NoError(t, err)
	require.NoError(t, p.Missing())
	require.Equal(t, [][]string{{"dpkg", "-i", r.opts.Driver}}, p.Steps[3].Commands)
	require.Contains(t, p.Steps[3].Remedy, "dpkg does not install dependencies")
	b.Remove("/usr/sbin/dkms")
	require.NoError(t, b.Err())
	p, err = vgpu.PlanInstall(context.Background(), r.env, r.opts)
	require.NoError(t, err)
	require.ErrorContains(t, p.Missing(), "package tool: no apt-get and no dkms")

	// the .run's options do not apply to a package
	opts := r.opts
	opts.NoDKMS = true
	_, err = vgpu.PlanInstall(context.Background(), r.env, opts)
	require.ErrorContains(t, err, "--no-dkms applies to the .run only")
	opts = r.opts
	opts.SigningKey, opts.SigningCert = "/k", "/c"
	_, err = vgpu.PlanInstall(context.Background(), r.env, opts)
	require.ErrorContains(t, err, "--signing-key/--signing-cert apply to the .run only")
}

// A --dry-run against another root runs no command there, but the package
// queries run on this machine (Query): the plan is complete.
func TestPlanPackageDryRunQueriesOnThisMachine(t *testing.T) {
	r := packageRig(t, "deb", true)
	env := r.env
	env.Runner, env.Query = host.NoRunner{}, host.ExecRunner{}
	p, err := vgpu.PlanInstall(context.Background(), env, r.opts)
	require.NoError(t, err)
	require.True(t, p.Driver.Listed)
	require.Empty(t, p.Notes)
	require.Equal(t, "install the package nvidia-vgpu-ubuntu-550 550.90.05 (apt-get)", p.Steps[3].Title)
}
