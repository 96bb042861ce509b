package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// apply --mode vm-vgpu --driver B on a node apply set up with A (what fleet
// apply runs on each host, the canary first): the vgpu-install step
// changes the version, the vGPUs stay what they were (the same UUIDs), and
// a whole rollback puts A back before it removes the vGPUs gpuprep made.
func TestApplyVMVGPUChangesVersion(t *testing.T) {
	c := vgpuCases[1] // mdev
	require.Equal(t, "mdev", c.name)
	root, n, d, args, _ := appliedVGPUNode(t, c)
	before := vgpusOf(t, root)
	require.Len(t, before, 3) // two of gpuprep's, one mdevctl defines
	runB, err := vgputest.WriteInstaller(t.TempDir(), "550.127.06", "vgpu-kvm")
	require.NoError(t, err)

	// without gpuprep's copy of A (a node where A was installed by hand)
	// the change needs A's installer, --previous-driver
	kept := filepath.Join(root, vgpu.UpgradeDir)
	require.NoError(t, os.Rename(kept, kept+".away"))
	out, errs, code := gpuprepWith(t, d, append([]string{"plan", "--driver", runB}, args...)...)
	require.Equal(t, exitUsage, code, out+errs)
	require.Contains(t, errs, "give its installer or package with --previous-driver FILE")
	runA, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	out, errs, code = gpuprepWith(t, d, append([]string{"plan", "--driver", runB, "--previous-driver", runA}, args...)...)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "1. vgpu-install: change the vGPU manager 550.90.05 to 550.127.06")
	require.NoError(t, os.Rename(kept+".away", kept))

	out, errs, code = gpuprepWith(t, d, append([]string{"plan", "--driver", runB}, args...)...)
	require.Equal(t, exitOK, code, out+errs)
	require.Contains(t, out, "1. vgpu-install: change the vGPU manager 550.90.05 to 550.127.06 (NVIDIA-Linux-x86_64-550.127.06-vgpu-kvm) as gpuprep vgpu install does\n")
	require.Contains(t, out, "   run: /usr/bin/nvidia-installer --uninstall --silent\n")
	require.Contains(t, out, "   note: upgrade: the vGPU manager 550.90.05 (.run) → 550.127.06 (.run)")
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes", "--driver", runB}, args...)...)
	require.Equal(t, exitOK, code, out+errs)
	require.Equal(t, "550.127.06", vgpu.InstalledVersion(n.h.Root))
	require.Equal(t, before, vgpusOf(t, root))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "the vGPU manager is back at 550.90.05")
	require.Equal(t, "550.90.05", vgpu.InstalledVersion(n.h.Root))
	want := map[string]string{}
	for k, v := range c.foreign {
		want[k] = v
	}
	require.Equal(t, want, vgpusOf(t, root), "gpuprep's vGPUs removed, the foreign one kept")
}
