package provision_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
)

// The vfio-bind step on a node whose IOMMU is on (turing-multifunction:
// a Turing board's four functions, on nvidia, snd_hda_intel, xhci_hcd and
// nvidia-gpu): planned as the sysfs writes and the persistent
// configuration, carried out on the kernel simulator, planned no more once
// done, and undone by rollback (each function back on its driver, the
// files gone).
func TestStepVFIOBind(t *testing.T) {
	n := newNode(t, "turing-multifunction")
	fns := map[string]string{"0000:01:00.0": "nvidia", "0000:01:00.1": "snd_hda_intel", "0000:01:00.2": "xhci_hcd", "0000:01:00.3": "nvidia-gpu"}
	for a, d := range fns {
		require.Equal(t, d, n.k.Driver(a), a)
	}
	before := n.tree(t)

	// plan: what a dry run shows, nothing changed
	p := n.plan(t, preflight.VMPassthrough)
	s := p.Step(provision.StepVFIOBind)
	require.NotNil(t, s)
	require.Equal(t, "bind to VFIO, persistently: 0000:01:00.0 (nvidia → vfio-pci), 0000:01:00.1 (snd_hda_intel → vfio-pci), 0000:01:00.2 (xhci_hcd → vfio-pci), 0000:01:00.3 (nvidia-gpu → vfio-pci)", s.Title)
	require.Equal(t, []string{"modprobe vfio_iommu_type1", "modprobe vfio_pci"}, s.Prepare)
	require.Equal(t, []string{
		`write "0000:01:00.0" > /sys/bus/pci/devices/0000:01:00.0/driver/unbind`,
		`write "vfio-pci" > /sys/bus/pci/devices/0000:01:00.0/driver_override`,
		`write "0000:01:00.0" > /sys/bus/pci/drivers/vfio-pci/bind`,
	}, s.Sysfs[:3])
	require.Len(t, s.Sysfs, 12)
	var files []string
	for _, f := range s.Files {
		require.True(t, f.Created, f.Path)
		files = append(files, f.Path)
	}
	require.Equal(t, []string{"/etc/modprobe.d/gpuprep-vfio.conf", "/etc/modules-load.d/gpuprep-vfio.conf"}, files)
	require.Contains(t, string(s.Files[0].New), "options vfio-pci ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87\n")
	require.Equal(t, before, n.tree(t), "plan changes nothing")
	require.Empty(t, n.k.Commands, "plan runs nothing")

	// run
	oc := n.apply(t, preflight.VMPassthrough)
	require.Equal(t, []string{"vfio-bind done", "label done"}, stepIDs(oc))
	for a := range fns {
		require.Equal(t, "vfio-pci", n.k.Driver(a), a)
	}
	require.Contains(t, n.read(t, "/etc/modprobe.d/gpuprep-vfio.conf"), "# gpuprep-devices: 0000:01:00.0=vfio-pci 0000:01:00.1=vfio-pci 0000:01:00.2=vfio-pci 0000:01:00.3=vfio-pci\n")

	// idempotent: nothing left to plan
	require.Nil(t, n.plan(t, preflight.VMPassthrough).Step(provision.StepVFIOBind))

	// undo: each function back on its driver, the tree as before
	res := n.rollback(t, provision.RollbackOptions{})
	require.NotEmpty(t, res.Undone)
	for a, d := range fns {
		require.Equal(t, d, n.k.Driver(a), a)
	}
	require.Equal(t, untouched(before), untouched(n.tree(t)))
	require.Empty(t, n.rollback(t, provision.RollbackOptions{}).Undone)
}
