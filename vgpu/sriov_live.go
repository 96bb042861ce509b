package vgpu

import (
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/plural"
)

// refuseLiveVGPUs refuses to plan sriov-manage -e on a GPU that has some of
// its VFs enabled and vGPUs on them. The kernel does not change a non-zero
// sriov_numvfs to another non-zero value ("%d VFs already enabled. Disable
// before enabling %d VFs", -EBUSY: sriov_numvfs_store in drivers/pci/iov.c),
// so enabling the rest means disabling the VFs there are, and with them the
// vGPUs on them and whatever VM uses them. A reload (a new vGPU manager,
// whose upgrade removes and recreates the vGPUs itself) is not refused.
func refuseLiveVGPUs(e *env, g string, reload bool) error {
	if reload {
		return nil
	}
	live := Existing(e.Root, g)
	if len(live) == 0 {
		return nil
	}
	dev := "/sys/bus/pci/devices/" + g
	return fmt.Errorf("%s has %d of its %d SR-IOV VFs enabled and %s on them (%s): enabling the other VFs "+
		"(sriov-manage -e) disables these first and destroys the vGPUs with them; remove them "+
		"(gpuprep vgpu apply with a config without them, after stopping their VMs) or enable the VFs in a maintenance window",
		g, readInt(e.Root, dev+"/sriov_numvfs"), readInt(e.Root, dev+"/sriov_totalvfs"),
		plural.N(len(live), "vGPU"), liveNames(live))
}

func liveNames(live []Instance) string {
	var out []string
	for _, in := range live {
		name := in.Type
		if name == "" {
			name = "type " + in.TypeID
		}
		out = append(out, name+" on "+in.Parent)
	}
	return strings.Join(out, ", ")
}
