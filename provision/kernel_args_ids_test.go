package provision_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
)

// builtinVFIONode is turing-multifunction on a kernel with vfio-pci built
// in (as stock Ubuntu kernels from 5.4 to 6.2 build it, CONFIG_VFIO_PCI=y:
// modules.builtin lists kernel/drivers/vfio/pci/vfio-pci.ko), booted with
// intel_iommu=on iommu=pt, while /etc/default/grub has lost iommu=pt (the
// kernel has it only from this boot): the plan has a kernel-args step that
// needs no reboot, and a vfio-bind step now.
func builtinVFIONode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build("turing-multifunction", dir))
	b := fixture.New(dir)
	b.ModuleFiles("6.1.0-18-amd64", []string{"kernel/drivers/vfio/vfio_iommu_type1.ko"},
		[]string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko"}, nil)
	b.BuiltinModule("vfio_pci", "vfio-pci")
	b.File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on\"\nGRUB_CMDLINE_LINUX=\"\"\n")
	for _, f := range []string{"/usr/sbin/update-grub", "/usr/sbin/update-initramfs"} {
		b.File(f, "#!/bin/sh\n")
	}
	require.NoError(t, b.Err())
	n := newNode(t, "no-gpu") // for its clock; the kernel is this root's
	k, err := fixture.NewKernel(dir)
	require.NoError(t, err)
	n.dir, n.k = dir, k
	n.env.Root, n.env.Sysfs, n.env.Runner = k.Root, k, k
	return n
}

const turingIDs = "vfio-pci.ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87"

// Where vfio-pci is built in and the plan edits the kernel command line
// anyway, vfio-pci.ids= goes into the kernel-args step's edit: one diff of
// /etc/default/grub with iommu=pt and the IDs, one update-grub, and the
// vfio-bind step makes no edit of its own (no `options vfio-pci ids=`,
// which a built-in module never reads). apply makes that one edit;
// rollback undoes it with the binding.
func TestPlanBuiltinVFIOIDsInKernelArgsStep(t *testing.T) {
	n := builtinVFIONode(t)
	p := n.plan(t, preflight.VMPassthrough)
	ka, vb := p.Step(provision.StepKernelArgs), p.Step(provision.StepVFIOBind)
	require.NotNil(t, ka, "%+v", p.Steps)
	require.NotNil(t, vb, "%+v", p.Steps)
	require.Len(t, ka.Files, 1)
	require.Equal(t, "/etc/default/grub", ka.Files[0].Path)
	require.Contains(t, ka.Files[0].Diff, `+GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt `+turingIDs+`"`)
	require.Equal(t, []string{"update-grub"}, ka.Commands)
	require.Contains(t, strings.Join(ka.Notes, "\n"), "vfio-pci is built into kernel 6.1.0-18-amd64 (modules.builtin)")
	for _, s := range p.Steps {
		if s.ID == provision.StepKernelArgs {
			continue
		}
		require.NotContains(t, s.Commands, "update-grub", "one bootloader edit: %s", s.ID)
		for _, f := range s.Files {
			require.NotEqual(t, "/etc/default/grub", f.Path, s.ID)
		}
	}
	require.Contains(t, strings.Join(vb.Notes, "\n"), turingIDs+" goes on the kernel command line in the kernel-args step's edit")
	for _, f := range vb.Files {
		require.NotContains(t, string(f.New), "options vfio-pci ids=", f.Path)
	}

	before := n.tree(t)
	oc := n.apply(t, preflight.VMPassthrough)
	require.Equal(t, []string{"kernel-args done", "vfio-bind done"}, stepIDs(oc)[:2])
	grub := n.read(t, "/etc/default/grub")
	require.Contains(t, grub, "intel_iommu=on iommu=pt "+turingIDs+`"`)
	require.Equal(t, 1, strings.Count(grub, "vfio-pci.ids="))
	conf := n.read(t, vfio.ModprobeConf)
	require.Contains(t, conf, "# gpuprep-cmdline-ids: 10de:10f8,10de:1ad8,10de:1ad9,10de:1e87\n", "recorded as gpuprep's, for vfio unbind")
	require.NotContains(t, conf, "options vfio-pci ids=")

	res := n.rollback(t, provision.RollbackOptions{})
	require.NotEmpty(t, res.Undone)
	require.Equal(t, untouched(before), untouched(n.tree(t)))
}

// Without the kernel-args step (the arguments configured and running),
// the vfio-bind step makes the edit itself, as vfio bind --persist does.
func TestPlanBuiltinVFIOIDsInBindStep(t *testing.T) {
	n := builtinVFIONode(t)
	require.NoError(t, fixture.New(n.dir).File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash intel_iommu=on iommu=pt\"\nGRUB_CMDLINE_LINUX=\"\"\n").Err())
	p := n.plan(t, preflight.VMPassthrough)
	require.Nil(t, p.Step(provision.StepKernelArgs))
	vb := p.Step(provision.StepVFIOBind)
	require.NotNil(t, vb)
	require.Contains(t, vb.Commands, "update-grub")
	var diff string
	for _, f := range vb.Files {
		if f.Path == "/etc/default/grub" {
			diff = f.Diff
		}
	}
	require.Contains(t, diff, turingIDs)
}

// Before the reboot that turns the IOMMU on (Ubuntu 22.04's 5.15 kernel,
// which builds vfio-pci in), the vfio-bind step waits for the IOMMU
// groups, and with them which IDs: the kernel-args step's edit has the
// IOMMU arguments only, and the deferred step says it puts vfio-pci.ids=
// on the kernel command line itself after the reboot, and why.
func TestPlanBuiltinVFIODeferredBind(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("iommu-off-kernel", dir))
	b := fixture.New(dir)
	b.ModuleFiles("5.15.0-91-generic", []string{"kernel/drivers/vfio/vfio_iommu_type1.ko"},
		[]string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko"}, nil)
	b.BuiltinModule("vfio_pci", "vfio-pci")
	require.NoError(t, b.Err())
	k, err := fixture.NewKernel(dir)
	require.NoError(t, err)
	p, err := provision.NewPlan(context.Background(), k.Root, provision.Options{Mode: preflight.VMPassthrough, Runner: k})
	require.NoError(t, err)
	ka, vb := p.Step(provision.StepKernelArgs), p.Step(provision.StepVFIOBind)
	require.NotNil(t, ka)
	require.NotNil(t, vb)
	require.True(t, vb.Deferred)
	require.NotContains(t, ka.Files[0].Diff, "vfio-pci.ids")
	require.Contains(t, strings.Join(vb.Notes, "\n"), "vfio-pci is built into kernel 5.15.0-91-generic (modules.builtin)")
	require.Contains(t, strings.Join(vb.Notes, "\n"), "after the reboot this step puts vfio-pci.ids= for the devices it binds on the kernel command line")
}
