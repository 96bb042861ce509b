package vgputest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// The synthetic rpm keeps what it installs: rpm -qf and rpm -q answer from
// it (rpm's messages and exit status for a file no package owns, a file
// that is not there, a package not installed), rpm -e and dnf remove -y
// remove the package's files and its record.
func TestRPMRecordsQueriesAndRemoves(t *testing.T) {
	for _, tool := range []string{"rpm", "dnf"} {
		t.Run(tool, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, fixture.Build("vgpu-fresh-mdev", dir))
			require.NoError(t, fixture.New(dir).File("/usr/bin/other", "#!/bin/sh\n").Err())
			h, err := vgputest.New(dir)
			require.NoError(t, err)
			ctx := context.Background()
			pkg, err := vgputest.WriteRPM(t.TempDir(), "550.90.05", "vgpu-kvm")
			require.NoError(t, err)

			out, err := h.Run(ctx, "rpm", "-qf", "/usr/bin/nvidia-vgpu-mgr")
			require.EqualError(t, err, "rpm: exit status 1: error: file /usr/bin/nvidia-vgpu-mgr: No such file or directory")
			require.Empty(t, out)
			_, err = h.Run(ctx, "rpm", "-Uvh", "--replacepkgs", pkg)
			require.NoError(t, err)

			out, err = h.Run(ctx, "rpm", "-qf", "/usr/bin/nvidia-vgpu-mgr")
			require.NoError(t, err)
			require.Equal(t, "NVIDIA-vGPU-rhel-9.4-550.90.05.x86_64\n", string(out))
			out, err = h.Run(ctx, "rpm", "-qf", "--qf", "%{NAME} %{VERSION} %{RELEASE}\n", "/usr/bin/nvidia-vgpu-mgr")
			require.NoError(t, err)
			require.Equal(t, "NVIDIA-vGPU-rhel 9.4 550.90.05\n", string(out))
			out, err = h.Run(ctx, "rpm", "-qf", "/usr/bin/other")
			require.EqualError(t, err, "rpm: exit status 1")
			require.Equal(t, "file /usr/bin/other is not owned by any package\n", string(out))
			out, err = h.Run(ctx, "rpm", "-q", "NVIDIA-vGPU-rhel")
			require.NoError(t, err)
			require.Equal(t, "NVIDIA-vGPU-rhel-9.4-550.90.05.x86_64\n", string(out))
			kver, err := h.Root.ReadString("/proc/sys/kernel/osrelease")
			require.NoError(t, err)
			require.True(t, h.Root.Exists("/lib/modules/"+kver+"/updates/dkms/nvidia.ko"))

			if tool == "rpm" {
				_, err = h.Run(ctx, "rpm", "-e", "NVIDIA-vGPU-rhel")
			} else {
				out, err = h.Run(ctx, "dnf", "remove", "-y", "NVIDIA-vGPU-rhel")
				require.Contains(t, string(out), "Removed:\n  NVIDIA-vGPU-rhel-9.4-550.90.05.x86_64\n")
			}
			require.NoError(t, err)
			for _, f := range []string{"/usr/bin/nvidia-vgpu-mgr", "/usr/lib/nvidia/sriov-manage", "/lib/modules/" + kver + "/updates/dkms/nvidia.ko"} {
				require.False(t, h.Root.Exists(f), f)
			}
			dep, _ := os.ReadFile(filepath.Join(dir, "lib/modules", kver, "modules.dep"))
			require.NotContains(t, string(dep), "updates/dkms/nvidia.ko")
			require.True(t, h.Root.Exists("/usr/bin/other"))
			out, err = h.Run(ctx, "rpm", "-q", "NVIDIA-vGPU-rhel")
			require.EqualError(t, err, "rpm: exit status 1")
			require.Equal(t, "package NVIDIA-vGPU-rhel is not installed\n", string(out))

			// removing it again: rpm fails, dnf has nothing to do
			if tool == "rpm" {
				_, err = h.Run(ctx, "rpm", "-e", "NVIDIA-vGPU-rhel")
				require.EqualError(t, err, "rpm: exit status 1: error: package NVIDIA-vGPU-rhel is not installed")
			} else {
				out, err = h.Run(ctx, "dnf", "remove", "-y", "NVIDIA-vGPU-rhel")
				require.NoError(t, err)
				require.Contains(t, string(out), "No match for argument: NVIDIA-vGPU-rhel\nNo packages marked for removal.\n")
			}
		})
	}
}
