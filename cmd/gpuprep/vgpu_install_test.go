package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

func TestVGPUInstall(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)

	// --dry-run against a root: the plan with the files' diffs, no commands
	out, stderr, code := gpuprep(t, "vgpu", "install", "--root", root, "--driver", run, "--dry-run")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"vGPU manager 550.90.05 (NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm, " + run + ")\n  SHA-256 " + sha256Hex(t, run) + ": the installer runs from a copy only root can write",
		"ok      kernel headers: kernel headers for 6.8.0-45-generic in /lib/modules/6.8.0-45-generic/build",
		"ok      pci-pf-stub: module pci-pf-stub, which sriov-manage needs to enable the VFs of 0000:41:00.0, 0000:61:00.0",
		"plan (--dry-run: nothing is changed):",
		"  1. blacklist nouveau\n       write /etc/modprobe.d/gpuprep-blacklist-nouveau.conf\n       --- /dev/null\n",
		"       +blacklist nouveau\n",
		"       $ sh " + run + " --silent --dkms\n",
		"       $ /usr/lib/nvidia/sriov-manage -e 0000:61:00.0\n",
		"       +After=nvidia-vgpud.service nvidia-vgpu-mgr.service\n",
	} {
		require.Contains(t, out, want)
	}
	_, stderr, code = gpuprep(t, "vgpu", "install", "--root", root, "--driver", run)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "only --dry-run works")

	// a simulated host: install, then a re-run does nothing
	h, err := vgputest.New(root)
	require.NoError(t, err)
	d := realDeps()
	d.vgpuInstallRunner = func(*host.Root, bool) (host.Runner, error) { return h, nil }
	out, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", run)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "done 12/12: enable gpuprep-vgpu-sriov.service")
	out, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", run)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "nothing to do: the vGPU manager 550.90.05 is installed, loaded and running, VFs enabled on 0000:41:00.0, 0000:61:00.0")
	out, _, code = gpuprepWith(t, d, "vgpu", "types", "--root", root, "--select", "0000:41:00.0")
	require.Equal(t, 0, code)
	require.Contains(t, out, "NVIDIA L40S-24Q")

	_, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", filepath.Join(t.TempDir(), "nvidia-vgpu-ubuntu-550_550.90.05_amd64.deb"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "no such file or directory")
	_, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--driver is required")
}

func TestVGPUInstallMissingPrerequisiteExits1(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	h, err := vgputest.New(root)
	require.NoError(t, err)
	require.NoError(t, h.Root.RemoveFile("/usr/sbin/dkms"))
	d := realDeps()
	d.vgpuInstallRunner = func(*host.Root, bool) (host.Runner, error) { return h, nil }
	out, stderr, code := gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", run)
	require.Equal(t, 1, code)
	require.Contains(t, out, "MISSING dkms: no dkms")
	require.Contains(t, stderr, "1 prerequisite of the vGPU manager missing")
	require.Empty(t, h.Commands())
	_, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", run, "--no-dkms")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, h.Commands(), "sh "+vgputest.InstallerCopy(root, run)+" --silent")
}

func TestVGPUInstallDeb(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed: the test builds a real .deb with it")
	}
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	b := fixture.New(root).File("/usr/bin/dpkg", "#!/bin/sh\n").File("/usr/bin/apt-get", "#!/bin/sh\n")
	require.NoError(t, b.Err())
	dir := t.TempDir()
	deb, err := vgputest.WriteDeb(dir, "550.90.05", "vgpu-kvm")
	require.NoError(t, err)

	// --dry-run against a root: dpkg-deb reads the package here, nothing runs there
	out, stderr, code := gpuprep(t, "vgpu", "install", "--root", root, "--driver", deb, "--dry-run")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"vGPU manager 550.90.05 (nvidia-vgpu-ubuntu-550 550.90.05, " + deb + ")",
		"ok      package tool: apt-get installs the .deb with its dependencies (DKMS builds the modules)",
		"  4. install the package nvidia-vgpu-ubuntu-550 550.90.05 (apt-get)\n       $ env DEBIAN_FRONTEND=noninteractive apt-get install -y " + deb + "\n",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "note: the archive listing was not read")

	// a guest package is refused whatever it is called
	grid, err := vgputest.WriteDeb(t.TempDir(), "550.90.05", "grid")
	require.NoError(t, err)
	fake := filepath.Join(t.TempDir(), filepath.Base(deb))
	require.NoError(t, os.Rename(grid, fake))
	_, stderr, code = gpuprep(t, "vgpu", "install", "--root", root, "--driver", fake, "--dry-run")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "this is the vGPU guest driver (package nvidia-linux-grid-550 550.90.05 holds nvidia-gridd")
	_, stderr, code = gpuprep(t, "vgpu", "install", "--root", root, "--driver", deb, "--no-dkms", "--dry-run")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--no-dkms applies to the .run only")

	// a simulated host: install, then a re-run does nothing
	h, err := vgputest.New(root)
	require.NoError(t, err)
	d := realDeps()
	d.vgpuInstallRunner = func(*host.Root, bool) (host.Runner, error) { return h, nil }
	out, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", deb)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "done 4/12: install the package nvidia-vgpu-ubuntu-550 550.90.05 (apt-get)")
	require.Contains(t, out, "done 12/12: enable gpuprep-vgpu-sriov.service")
	out, stderr, code = gpuprepWith(t, d, "vgpu", "install", "--root", root, "--driver", deb)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "nothing to do: the vGPU manager 550.90.05 is installed, loaded and running")
}
