package report

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/deviceplugin"
)

// A report names devices as the GPU Operator's sandbox device plugin
// release does (v1.6.0, pci.ids 2025.07.11), not from gpuprep's newer
// pci.ids: HGX B200 (10de:2909) is newer than the plugin's file.
func TestResourceNamesAreTheDeployedPlugins(t *testing.T) {
	gs := []GPU{{VendorID: "10de", DeviceID: "2909"}, {VendorID: "10de", DeviceID: "2335"}, {VendorID: "1002", DeviceID: "74a1"}}
	resourceNames(gs)
	require.Equal(t, "nvidia.com/2909", gs[0].ResourceName)
	require.Equal(t, "nvidia.com/GH100_H200_SXM_141GB", gs[1].ResourceName)
	require.Empty(t, gs[2].ResourceName)
}

// NameResources renames for another release, and leaves unnamed (with a
// note) a device whose name kubelet refuses.
func TestNameResourcesForARelease(t *testing.T) {
	r := &Report{
		GPUs:       []GPU{{VendorID: "10de", DeviceID: "2335", ResourceName: "nvidia.com/stale"}, {VendorID: "10de", DeviceID: "24fa"}, {VendorID: "10de", DeviceID: "24fa"}},
		NVSwitches: []GPU{{VendorID: "10de", DeviceID: "22a3"}},
	}
	old, err := deviceplugin.Lookup("v1.2.7") // pci.ids 2023.11.11: no H200 yet
	require.NoError(t, err)
	notes := r.NameResources(old)
	require.Equal(t, "nvidia.com/2335", r.GPUs[0].ResourceName)
	require.Empty(t, r.GPUs[1].ResourceName)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU_, which kubelet refuses")
	require.Equal(t, "nvidia.com/GH100_H100_NVSWITCH", r.NVSwitches[0].ResourceName)
}
