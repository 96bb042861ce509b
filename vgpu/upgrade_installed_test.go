package vgpu_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
)

// The installed version is read from the installer's or dpkg's records, as
// hostile text: a line that is not what nvidia-installer writes, or a
// package dpkg does not call installed, is an error naming the file.
func TestReadInstalledRecords(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  vgpu.Installed
		err   string
	}{
		{"run", map[string]string{vgpu.RunRecord: "1.0-5509005 (550.90.05)\nNVIDIA Accelerated Graphics Driver for Linux-x86_64\n1: /usr/bin/nvidia-vgpu-mgr\n0\n"},
			vgpu.Installed{Version: "550.90.05", Format: vgpu.FormatRun, Record: vgpu.RunRecord}, ""},
		{"run forged", map[string]string{vgpu.RunRecord: "550.90.05; rm -rf /\n"}, vgpu.Installed{},
			`/var/lib/nvidia/log line 1: "550.90.05; rm -rf /" is not nvidia-installer's version line`},
		{"deb", map[string]string{"/usr/bin/nvidia-vgpu-mgr": "", vgpu.DpkgInfo + "/nvidia-vgpu-ubuntu-550.list": "/usr/bin/nvidia-smi\n/usr/bin/nvidia-vgpu-mgr\n",
			vgpu.DpkgStatus: "Package: bash\nStatus: install ok installed\nVersion: 5.2\n\nPackage: nvidia-vgpu-ubuntu-550\nStatus: install ok installed\nVersion: 550.90.05\n"},
			vgpu.Installed{Version: "550.90.05", Format: vgpu.FormatDeb, Package: "nvidia-vgpu-ubuntu-550", Record: vgpu.DpkgInfo + "/nvidia-vgpu-ubuntu-550.list"}, ""},
		{"deb removed", map[string]string{"/usr/bin/nvidia-vgpu-mgr": "", vgpu.DpkgInfo + "/nvidia-vgpu-ubuntu-550.list": "/usr/bin/nvidia-vgpu-mgr\n",
			vgpu.DpkgStatus: "Package: nvidia-vgpu-ubuntu-550\nStatus: deinstall ok config-files\nVersion: 550.90.05\n"}, vgpu.Installed{},
			`/var/lib/dpkg/status: package nvidia-vgpu-ubuntu-550 is "deinstall ok config-files", not installed`},
		{"module only", map[string]string{"/sys/module/nvidia/version": "550.54.10\n"},
			vgpu.Installed{Version: "550.54.10", Loaded: "550.54.10", Record: "/sys/module/nvidia/version"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := fixture.New(dir)
			for p, s := range c.files {
				b.File(p, s)
			}
			require.NoError(t, b.Err())
			root, err := host.NewRoot(dir)
			require.NoError(t, err)
			got, err := vgpu.ReadInstalled(context.Background(), root, host.NoRunner{})
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// rpm's answer for the file nvidia-vgpu-mgr: NVIDIA's vGPU manager rpm has
// the driver's version in RELEASE (NVIDIA-vGPU-rhel-8.9-550.163.02 is
// NAME-VERSION-RELEASE), another NVIDIA rpm in VERSION; a file no package
// owns, or an answer that holds no driver version, says nothing of how it
// was installed (no Format: the change is refused).
func TestReadInstalledRPM(t *testing.T) {
	q := "rpm -qf --qf %{NAME} %{VERSION} %{RELEASE}\n /usr/bin/nvidia-vgpu-mgr"
	for _, c := range []struct {
		name string
		resp host.FakeResponse
		want vgpu.Installed
	}{
		{"vGPU manager", host.FakeResponse{Out: []byte("NVIDIA-vGPU-rhel 8.9 550.163.02\n")},
			vgpu.Installed{Version: "550.163.02", Loaded: "550.163.02", Format: vgpu.FormatRPM, Package: "NVIDIA-vGPU-rhel", Record: "rpm -qf /usr/bin/nvidia-vgpu-mgr"}},
		{"version in VERSION", host.FakeResponse{Out: []byte("warning: a signature warning\nnvidia-vgpu-kvm 550.163.02 1.el9\n")},
			vgpu.Installed{Version: "550.163.02", Loaded: "550.163.02", Format: vgpu.FormatRPM, Package: "nvidia-vgpu-kvm", Record: "rpm -qf /usr/bin/nvidia-vgpu-mgr"}},
		{"not owned", host.FakeResponse{Out: []byte("file /usr/bin/nvidia-vgpu-mgr is not owned by any package\n"), Err: errors.New("exit status 1")},
			vgpu.Installed{Version: "550.163.02", Loaded: "550.163.02", Record: "/sys/module/nvidia/version"}},
		{"no driver version", host.FakeResponse{Out: []byte("NVIDIA-vGPU-rhel 8.9 1.el9\n")},
			vgpu.Installed{Version: "550.163.02", Loaded: "550.163.02", Record: "/sys/module/nvidia/version"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			b := fixture.New(dir).File("/usr/bin/nvidia-vgpu-mgr", "").File("/sys/module/nvidia/version", "550.163.02\n").Mkdir("/var/lib/rpm")
			require.NoError(t, b.Err())
			root, err := host.NewRoot(dir)
			require.NoError(t, err)
			got, err := vgpu.ReadInstalled(context.Background(), root, &host.FakeRunner{Strict: true, Responses: map[string]host.FakeResponse{q: c.resp}})
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}
