package kube

import (
	"strings"
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
	p, notes, _ := KubeVirt([]Host{{"a", sampleReport()}, {"b", r2}, {"c", r3}}, KubeVirtOptions{})
	c := p.Spec.Configuration
	require.Equal(t, []PCIHostDevice{{"10DE:1EB8", "nvidia.com/TU104GL_TESLA_T4", true}, {"10DE:2335", "nvidia.com/GH100_H200_SXM_141GB", true}}, c.PermittedHostDevices.PCIHostDevices)
	require.Equal(t, []MediatedDevice{{"GRID T4-1Q", "nvidia.com/GRID_T4-1Q", true}}, c.PermittedHostDevices.MediatedDevices)
	require.Nil(t, c.DeveloperConfiguration, "KubeVirt 1.9: no feature gate (GPU is GA)")
	require.Equal(t, false, *c.MediatedDevicesConfiguration.Enabled)
	all := strings.Join(notes, "\n")
	require.Contains(t, all, "1 vGPU type on SR-IOV GPUs")
	require.Contains(t, all, "hosts b")
}

// What each KubeVirt release wants (kubevirt_gates.go): the GPU gate before
// v1.4, DisableMDEVConfiguration before v1.8 where mdevs are permitted,
// mediatedDevicesConfiguration.enabled: false from v1.8; a release that
// needs no gate gets no developerConfiguration at all (a merge patch's
// featureGates list would replace the CR's whole).
func TestKubeVirtGatesPerRelease(t *testing.T) {
	mdev := &report.Report{GPUs: []report.GPU{{VendorID: "10de", DeviceID: "1eb8", ResourceName: "nvidia.com/TU104GL_TESLA_T4",
		VGPU: &report.VGPU{Interface: "mdev", Types: []report.VGPUType{{Name: "GRID T4-1Q", ResourceName: "nvidia.com/GRID_T4-1Q"}}}}}}
	for _, tc := range []struct {
		version string
		hosts   []Host
		gates   []string
		mdevOff bool
		note    string
	}{
		{"1.3", []Host{{"a", sampleReport()}}, []string{"GPU"}, false, "KubeVirt 1.3 assumed (--kubevirt-version): feature gate GPU (GA from 1.4)"},
		{"1.3", []Host{{"a", mdev}}, []string{"GPU", "DisableMDEVConfiguration"}, false, "feature gate DisableMDEVConfiguration"},
		{"1.4", []Host{{"a", sampleReport()}}, nil, false, "KubeVirt 1.4 assumed (--kubevirt-version): no GPU feature gate (GA since 1.4"},
		{"v1.7.2", []Host{{"a", mdev}}, []string{"DisableMDEVConfiguration"}, false, "feature gate DisableMDEVConfiguration"},
		{"1.8", []Host{{"a", mdev}}, nil, true, "mediatedDevicesConfiguration.enabled: false (DisableMDEVConfiguration is deprecated since 1.8)"},
		{"1.9", []Host{{"a", sampleReport()}}, nil, false, "KubeVirt 1.9 assumed"},
	} {
		v, err := ParseKubeVirtVersion(tc.version)
		require.NoError(t, err)
		p, notes, _ := KubeVirt(tc.hosts, KubeVirtOptions{Version: v})
		c := p.Spec.Configuration
		if tc.gates == nil {
			require.Nil(t, c.DeveloperConfiguration, tc.version)
		} else {
			require.Equal(t, tc.gates, c.DeveloperConfiguration.FeatureGates, tc.version)
		}
		require.Equal(t, tc.mdevOff, c.MediatedDevicesConfiguration != nil && !*c.MediatedDevicesConfiguration.Enabled, tc.version)
		require.Contains(t, strings.Join(notes, "\n"), tc.note, tc.version)
		var b strings.Builder
		require.NoError(t, WriteYAML(&b, p, nil))
		require.Equal(t, tc.gates != nil, strings.Contains(b.String(), "developerConfiguration:"), b.String())
	}
}

// Only what can be allocated in each report's mode is permitted: the PF of
// an SR-IOV vGPU GPU never (nor a vm-vgpu node's GPUs at all), NVSwitches
// only where gpuprep gives them to VMs (--nvswitch, or already on VFIO),
// nothing of a container node.
func TestKubeVirtPermitsOnlyWhatCanBeAllocated(t *testing.T) {
	h200 := report.GPU{VendorID: "10de", DeviceID: "2335", Driver: "nvidia", ResourceName: "nvidia.com/GH100_H200_SXM_141GB"}
	nvswitch := report.GPU{VendorID: "10de", DeviceID: "22a3", Driver: "nvidia", ResourceName: "nvidia.com/GH100_H100_NVSWITCH"}
	sriov := h200
	sriov.VGPU = &report.VGPU{Interface: "sriov", Types: []report.VGPUType{{Name: "NVIDIA H200X-141C", ResourceName: "nvidia.com/NVIDIA_H200X-141C"}}}
	selectors := func(p *KubeVirtPatch) []string {
		var out []string
		for _, d := range p.Spec.Configuration.PermittedHostDevices.PCIHostDevices {
			out = append(out, d.PCIVendorSelector)
		}
		return out
	}

	// an SR-IOV vGPU host, with and without --mode vm-vgpu
	for _, mode := range []string{"", "vm-vgpu"} {
		p, notes, _ := KubeVirt([]Host{{"sriov", &report.Report{Mode: mode, GPUs: []report.GPU{sriov}}}}, KubeVirtOptions{})
		require.Empty(t, selectors(p), mode)
		require.Contains(t, strings.Join(notes, "\n"), "the GPUs of vGPU hosts (sriov) are left out of pciHostDevices", mode)
	}
	// vm-vgpu before the manager: no types, and no PF either
	p, notes, _ := KubeVirt([]Host{{"fresh", &report.Report{Mode: "vm-vgpu", GPUs: []report.GPU{h200}, NVSwitches: []report.GPU{nvswitch}}}}, KubeVirtOptions{NVSwitch: true})
	require.Empty(t, selectors(p))
	require.Contains(t, strings.Join(notes, "\n"), "hosts fresh (vm-vgpu) show no vGPU types yet")

	// an HGX node: its NVSwitches stay with the host unless --nvswitch,
	// or already on VFIO
	hgx := &report.Report{GPUs: []report.GPU{h200}, NVSwitches: []report.GPU{nvswitch}}
	p, notes, _ = KubeVirt([]Host{{"hgx", hgx}}, KubeVirtOptions{})
	require.Equal(t, []string{"10DE:2335"}, selectors(p))
	require.Contains(t, strings.Join(notes, "\n"), "the NVSwitches of hosts hgx are left out of pciHostDevices")
	p, _, _ = KubeVirt([]Host{{"hgx", hgx}}, KubeVirtOptions{NVSwitch: true})
	require.Equal(t, []string{"10DE:22A3", "10DE:2335"}, selectors(p))
	bound := nvswitch
	bound.Driver = "vfio-pci"
	p, _, _ = KubeVirt([]Host{{"hgx", &report.Report{Mode: "vm-passthrough", GPUs: []report.GPU{h200}, NVSwitches: []report.GPU{bound}}}}, KubeVirtOptions{})
	require.Equal(t, []string{"10DE:22A3", "10DE:2335"}, selectors(p))

	// a container node's GPUs go to no VM
	p, notes, _ = KubeVirt([]Host{{"c", &report.Report{Mode: "container", GPUs: []report.GPU{h200}}}}, KubeVirtOptions{})
	require.Empty(t, selectors(p))
	require.Contains(t, strings.Join(notes, "\n"), "hosts c: reports made for --mode container")
}
