package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// An AMD node whose firmware describes its IOMMUs and whose kernel started
// none, with nothing on the command line turning them off: iommu=pt does
// not turn an AMD IOMMU on, so iommu.kernel does not send the node to
// grub ensure and a reboot (it did: "set the IOMMU kernel arguments
// (gpuprep grub ensure --mode vm-passthrough) and reboot").
func TestAMDIOMMUInactiveIsNotForKernelArgs(t *testing.T) {
	_, res := run(t, "amd-iommu-inactive")
	f := one(t, res, "iommu.kernel", "/sys/class/iommu", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "the AMD IOMMU is on whenever firmware describes it (IVRS), and iommu=pt does not turn it on")
	require.Contains(t, f.Remedy, "rebooting will not help")
	require.False(t, f.Fixable, f.Remedy)
	require.Empty(t, f.FixCommand)
}
