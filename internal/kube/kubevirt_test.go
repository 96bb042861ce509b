package kube

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

func sampleReport() *report.Report {
	return &report.Report{GPUs: []report.GPU{
		{VendorID: "10de", DeviceID: "2335", ResourceName: "nvidia.com/GH100_H200_SXM_141GB"},
		{VendorID: "10de", DeviceID: "1eb8", ResourceName: "nvidia.com/TU104GL_TESLA_T4"},
		{VendorID: "1234", DeviceID: "1111"},
	}}
}

func TestKubeVirtPatchMergesAndDeduplicates(t *testing.T) {
	r2 := sampleReport()
	r2.GPUs[0].VGPU = &report.VGPU{Interface: "sriov", Types: []report.VGPUType{{Name: "NVIDIA H200X-70C", ResourceName: "nvidia.com/NVIDIA_H200X-70C"}}}
	r3 := &report.Report{GPUs: []report.GPU{{VendorID: "10de", DeviceID: "1eb8", ResourceName: "nvidia.com/TU104GL_TESLA_T4",
		VGPU: &report.VGPU{Interface: "mdev", Types: []report.VGPUType{{Name: "GRID T4-1Q", ResourceName: "nvidia.com/GRID_T4-1Q"}}}}}}
	p, notes := KubeVirt([]Host{{"a", sampleReport()}, {"b", r2}, {"c", r3}})
	c := p.Spec.Configuration
	require.Equal(t, []PCIHostDevice{{"10DE:1EB8", "nvidia.com/TU104GL_TESLA_T4", true}, {"10DE:2335", "nvidia.com/GH100_H200_SXM_141GB", true}}, c.PermittedHostDevices.PCIHostDevices)
	require.Equal(t, []MediatedDevice{{"GRID T4-1Q", "nvidia.com/GRID_T4-1Q", true}}, c.PermittedHostDevices.MediatedDevices)
	require.Equal(t, []string{"GPU", "DisableMDEVConfiguration"}, c.DeveloperConfiguration.FeatureGates)
	require.Contains(t, notes[0], "1 vGPU type(s) on SR-IOV GPUs")
	require.Contains(t, notes[0], "hosts b")
}
