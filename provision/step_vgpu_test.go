package provision_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// vgpuOptions are the options of a vm-vgpu plan on a vgpuHost: config
// l40s-24q, the installer of vGPU manager 550.90.05.
func vgpuOptions(t *testing.T, v *vgpuHost) provision.Options {
	t.Helper()
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	return provision.Options{Mode: preflight.VMVGPU, Runner: v, VGPUConfigFile: vgpuConfig(t), VGPUConfig: "l40s-24q", Driver: run, Binary: fakeGpuprep(t)}
}

func planWith(t *testing.T, n *node, o provision.Options) *provision.Plan {
	t.Helper()
	p, err := provision.NewPlan(context.Background(), n.k.Root, o)
	require.NoError(t, err)
	return p
}

func vfType(t *testing.T, n *node, vf string) string {
	t.Helper()
	return strings.TrimSpace(n.read(t, filepath.Join("/sys/bus/pci/devices", vf, "nvidia/current_vgpu_type")))
}

// The vgpu-install and vgpu-devices steps on an SR-IOV host before the
// vGPU manager (vgpu-fresh-sriov: two L40S): planned as the installer, the
// VFs and the units (the devices deferred until the manager runs),
// carried out on vgputest's host, planned no more once done, and undone by
// rollback as far as it goes: the vGPUs removed, the files gpuprep wrote
// gone, the manager left installed (a package operation, the step says).
func TestStepVGPU(t *testing.T) {
	n, v := newVGPUNode(t, "vgpu-fresh-sriov")
	o := vgpuOptions(t, v)
	before := n.tree(t)

	// plan: what a dry run shows, nothing changed
	p := planWith(t, n, o)
	var ids []string
	for _, s := range p.Steps {
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{provision.StepVGPUInstall, provision.StepVGPUDevices, provision.StepLabel}, ids)
	in := p.Step(provision.StepVGPUInstall)
	require.Equal(t, "install the vGPU manager 550.90.05 (NVIDIA-Linux-x86_64-550.90.05-vgpu-kvm) as gpuprep vgpu install does", in.Title)
	require.Contains(t, in.Commands, "sh "+o.Driver+" --silent --dkms")
	require.Contains(t, in.Commands, "/usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.Contains(t, in.Commands, "systemctl enable "+vgpu.SRIOVUnitName)
	require.Contains(t, in.Notes, "gpuprep rollback does not uninstall the vGPU manager (a package operation); it restores the files this step writes")
	var files []string
	for _, f := range in.Files {
		files = append(files, f.Path)
	}
	require.Equal(t, []string{vgpu.NouveauBlacklist, vgpu.SRIOVUnit}, files)
	dev := p.Step(provision.StepVGPUDevices)
	require.True(t, dev.Deferred)
	require.Equal(t, `create the vGPUs of config "l40s-24q" (2× L40S-24Q on 0000:41:00.0, 2× L40S-24Q on 0000:61:00.0), persistently (the writes are planned once the vGPU manager runs)`, dev.Title)
	require.Equal(t, before, n.tree(t), "plan changes nothing")
	require.Empty(t, v.h.Commands(), "plan runs nothing")

	// run
	oc, err := provision.Apply(context.Background(), n.env, p, provision.ApplyOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"vgpu-install done", "vgpu-devices done", "label done"}, stepIDs(oc))
	require.FileExists(t, filepath.Join(n.dir, "usr/bin/nvidia-vgpu-mgr"))
	require.Equal(t, "nvidia", n.k.Driver("0000:41:00.0"))
	vfs := []string{"0000:41:00.4", "0000:41:00.5", "0000:61:00.4", "0000:61:00.5"}
	for _, vf := range vfs {
		require.Equal(t, "1155", vfType(t, n, vf), vf) // L40S-24Q
	}
	require.Equal(t, "0", vfType(t, n, "0000:41:00.6"), "two a GPU, no more")
	for _, f := range []string{vgpu.NouveauBlacklist, vgpu.SRIOVUnit, vgpu.ApplyUnit, vgpu.PersistedConfig, vgpu.InstalledBinary} {
		require.FileExists(t, filepath.Join(n.dir, f))
	}
	require.Contains(t, n.read(t, vgpu.ApplyUnit), "ExecStart="+vgpu.InstalledBinary+" vgpu apply -f "+vgpu.PersistedConfig+" -c l40s-24q\n")

	// idempotent: the manager runs, so without --driver nothing is left
	o.Driver = ""
	require.Empty(t, planWith(t, n, o).Steps)

	// undo
	res := n.rollback(t, provision.RollbackOptions{})
	require.NotEmpty(t, res.Undone)
	for _, vf := range vfs {
		require.Equal(t, "0", vfType(t, n, vf), vf)
	}
	for _, f := range []string{vgpu.NouveauBlacklist, vgpu.SRIOVUnit, vgpu.ApplyUnit, vgpu.PersistedConfig, vgpu.InstalledBinary} {
		_, err := os.Stat(filepath.Join(n.dir, f))
		require.ErrorIs(t, err, os.ErrNotExist, f)
	}
	require.FileExists(t, filepath.Join(n.dir, "usr/bin/nvidia-vgpu-mgr"), "the manager stays installed")
	require.Empty(t, n.rollback(t, provision.RollbackOptions{}).Undone)
}
