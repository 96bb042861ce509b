package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

func goodHost() Host {
	return Host{Name: "hgx-node-01", Report: &report.Report{Mode: "vm-vgpu",
		GPUs: []report.GPU{{Address: "0000:13:00.0", VendorID: "10de", DeviceID: "1eb8", IOMMUGroup: "5", ResourceName: "nvidia.com/TU104GL_TESLA_T4",
			GroupDevices: []report.GroupDevice{{Address: "0000:13:00.1"}},
			VGPU: &report.VGPU{Interface: "mdev", Types: []report.VGPUType{
				{ID: "nvidia-222", Name: "GRID T4-1Q", ResourceName: "nvidia.com/GRID_T4-1Q"},
				{ID: "nvidia-63", Name: "NVIDIA A100-4-20C", ResourceName: "nvidia.com/NVIDIA_A100-4-20C"}}}}},
		NVSwitches: []report.GPU{{Address: "10000:05:00.0", VendorID: "10de", DeviceID: "22a3", ResourceName: "nvidia.com/GH100_H100_NVSWITCH"}},
	}}
}

func TestCheckHostAcceptsGpuprepReports(t *testing.T) {
	require.NoError(t, CheckHost(goodHost()))
	h := goodHost()
	h.Name, h.Report.Mode = "10.0.0.1", ""
	h.Report.GPUs[0].VGPU = &report.VGPU{Interface: "sriov", Types: []report.VGPUType{{ID: "1428", Name: "NVIDIA H200X-141C", ResourceName: "nvidia.com/NVIDIA_H200X-141C"}}}
	require.NoError(t, CheckHost(h))
	for _, name := range []string{"gpu-1.example.com", "[fe80::1]", "узел-1", "gpu_node@rack2"} {
		h.Name = name
		require.NoError(t, CheckHost(h), name)
	}
	for _, name := range []string{"", "-x", "gpu 1", "gpu\u202e1", "gpu\x001", strings.Repeat("a", 254)} {
		h.Name = name
		require.Error(t, CheckHost(h), name)
	}
}

// Each value that goes into an emitted document (or names a host in its
// notes) is refused outside its form, naming the host and the field.
func TestCheckHostRefusesValuesOutOfForm(t *testing.T) {
	inject := "\nmetadata:\n  ownerReferences: []"
	for _, c := range []struct {
		field  string
		mutate func(h *Host)
	}{
		{"name", func(h *Host) { h.Name += inject }},
		{"mode", func(h *Host) { h.Report.Mode = "vm-vgpu" + inject }},
		{"gpus[0].vendorID", func(h *Host) { h.Report.GPUs[0].VendorID = "10de0" }},
		{"gpus[0].deviceID", func(h *Host) { h.Report.GPUs[0].DeviceID = `1eb8"` + inject }},
		{"gpus[0].address", func(h *Host) { h.Report.GPUs[0].Address += inject }},
		{"gpus[0].iommuGroup", func(h *Host) { h.Report.GPUs[0].IOMMUGroup = "5 (shared)" }},
		{"gpus[0].resourceName", func(h *Host) { h.Report.GPUs[0].ResourceName += inject }},
		{"gpus[0].groupDevices[0].address", func(h *Host) {
			h.Report.GPUs[0].GroupDevices[0].Address = "\x1b[2J"
		}},
		{"gpus[0].vgpu.interface", func(h *Host) { h.Report.GPUs[0].VGPU.Interface = "mdev" + inject }},
		{"gpus[0].vgpu.types[1].id", func(h *Host) { h.Report.GPUs[0].VGPU.Types[1].ID = "nvidia-63/../x" }},
		{"gpus[0].vgpu.types[0].name", func(h *Host) { h.Report.GPUs[0].VGPU.Types[0].Name += inject }},
		{"gpus[0].vgpu.types[0].resourceName", func(h *Host) { h.Report.GPUs[0].VGPU.Types[0].ResourceName = "nvidia.com/GRID_T4-2Q" }},
		{"nvswitches[0].resourceName", func(h *Host) { h.Report.NVSwitches[0].ResourceName = "example.com/x" }},
		{"nvswitches[0].deviceID", func(h *Host) { h.Report.NVSwitches[0].DeviceID = "22A" }},
		{"gpus[0].vgpu.types[1].resourceName", func(h *Host) { h.Report.GPUs[0].VGPU.Types[1].ResourceName = "nvidia.com/" + strings.Repeat("A", 64) }},
	} {
		field := c.field
		h := goodHost()
		c.mutate(&h)
		err := CheckHost(h)
		var re *RefusedError
		require.True(t, errors.As(err, &re), "%s: %v", field, err)
		require.Equal(t, field, re.Field)
		msg := err.Error()
		require.Contains(t, msg, `host "hgx-node-01`, field)
		require.NotContains(t, msg, "\n", field)
		require.NotContains(t, msg, "\x1b", field)
	}
}

func TestCheckResourceNameIsKubernetesRules(t *testing.T) {
	for _, ok := range []string{"nvidia.com/GH100_H200_SXM_141GB", "nvidia.com/2235", "nvidia.com/NVIDIA_A10-12Q"} {
		require.NoError(t, checkResourceName(ok), ok)
	}
	for _, bad := range []string{"nvidia.com/", "nvidia.com/a/b", "nvidia.com/_x", "nvidia.com/x y", "kubernetes.io/gpu", "nvidia.com/" + strings.Repeat("x", 64)} {
		require.Error(t, checkResourceName(bad), bad)
	}
}
