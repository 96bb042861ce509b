package provision_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// vgpuHost plays a node for the vGPU and NFD timer steps: the vGPU
// manager's installer, modprobe, systemctl, sriov-manage, update-initramfs
// and nvidia-smi through vgputest.Host (systemctl's state kept under the
// root's /run/fake-systemd), other commands and sysfs writes through the
// fixture kernel simulator, the vGPU attributes through vgputest.Host.
type vgpuHost struct {
	h *vgputest.Host
	k *fixture.Kernel
}

func (v *vgpuHost) Run(ctx context.Context, argv ...string) ([]byte, error) {
	switch argv[0] {
	case "sh", "modprobe", "systemctl", vgpu.SRIOVManage, "update-initramfs", vgpu.NVIDIASMI, vgpu.RunUninstaller:
		return v.h.Run(ctx, argv...)
	}
	return v.k.Run(ctx, argv...)
}

func (v *vgpuHost) WriteAttr(p, val string) error {
	if err := v.h.WriteAttr(p, val); !errors.Is(err, vgputest.ErrNotSimulated) {
		return err
	}
	return v.k.WriteAttr(p, val)
}

// newVGPUNode is newNode with a vgpuHost for the runner and sysfs, and
// update-grub and update-initramfs under the root.
func newVGPUNode(t *testing.T, scenario string) (*node, *vgpuHost) {
	t.Helper()
	n := newNode(t, scenario)
	for _, f := range []string{"/usr/sbin/update-grub", "/usr/sbin/update-initramfs"} {
		require.NoError(t, fixture.New(n.dir).File(f, "#!/bin/sh\n").Err())
	}
	h, err := vgputest.New(n.dir)
	require.NoError(t, err)
	v := &vgpuHost{h: h, k: n.k}
	n.env.Runner, n.env.Sysfs = v, v
	return n, v
}

// vgpuConfig writes a vgpu-device-manager config: config l40s-24q, two
// L40S-24Q on every GPU.
func vgpuConfig(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  l40s-24q:\n    - devices: all\n      vgpu-devices:\n        \"L40S-24Q\": 2\n"), 0o644))
	return cfg
}

// fakeGpuprep is a file that stands for the running gpuprep, which the
// vGPU and NFD timer steps install under the root.
func fakeGpuprep(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "gpuprep")
	require.NoError(t, os.WriteFile(f, []byte("#!/bin/sh\n# gpuprep, as a test installs it\n"), 0o755))
	return f
}

// systemdHost runs systemctl through vgputest.Host (its state under the
// root's /run/fake-systemd), every other command through the fixture
// kernel simulator.
type systemdHost struct {
	h *vgputest.Host
	k *fixture.Kernel
}

func (s systemdHost) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if argv[0] == "systemctl" {
		return s.h.Run(ctx, argv...)
	}
	return s.k.Run(ctx, argv...)
}

// newSystemdNode is newNode with systemctl simulated (systemdHost).
func newSystemdNode(t *testing.T, scenario string) (*node, systemdHost) {
	t.Helper()
	n := newNode(t, scenario)
	h, err := vgputest.New(n.dir)
	require.NoError(t, err)
	s := systemdHost{h: h, k: n.k}
	n.env.Runner = s
	return n, s
}
