package kube

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

// vendorHost is a vm-vgpu report of an H200 whose VFs hold vGPUs of the
// vendor-specific VFIO interface (VF PCI IDs 10de:dev), one per type.
func vendorHost(dev string, types ...string) *report.Report {
	g := report.GPU{Address: "0000:41:00.0", VendorID: "10de", DeviceID: "2335", Driver: "nvidia", ResourceName: "nvidia.com/GH100_H200_SXM_141GB",
		VGPU: &report.VGPU{Interface: "sriov", Types: []report.VGPUType{}}}
	for i, t := range types {
		g.VGPU.Instances = append(g.VGPU.Instances, report.VGPUInstance{Device: "0000:41:00." + string(rune('4'+i)), VendorID: "10de", DeviceID: dev, TypeID: "1430", Type: t})
	}
	return &report.Report{Mode: "vm-vgpu", GPUs: []report.GPU{g}}
}

func TestKubeVirtPermitsVendorSpecificVGPUsFrom19(t *testing.T) {
	hosts := []Host{{"a", vendorHost("2336", "NVIDIA H200X-35C", "NVIDIA H200X-35C")}, {"b", vendorHost("2336", "NVIDIA H200X-35C")}}
	for _, v := range []KubeVirtVersion{{}, {1, 9}, {1, 10}, {2, 0}} {
		p, notes, _ := KubeVirt(hosts, KubeVirtOptions{Version: v})
		require.Equal(t, []PCIHostDevice{{PCIVendorSelector: "10DE:2336", ResourceName: "nvidia.com/NVIDIA_H200X-35C"}}, p.Spec.Configuration.PermittedHostDevices.PCIHostDevices, v)
		require.Contains(t, strings.Join(notes, "\n"), "10DE:2336: the VFs that hold vGPU type NVIDIA H200X-35C (hosts a, b), allocated by KubeVirt ≥ 1.9 itself (no externalResourceProvider")
		require.Empty(t, p.Spec.Configuration.PermittedHostDevices.MediatedDevices)
	}
	// the YAML has no externalResourceProvider for it
	p, _, _ := KubeVirt(hosts, KubeVirtOptions{})
	var b strings.Builder
	require.NoError(t, WriteYAML(&b, p, nil))
	require.Contains(t, b.String(), "pciVendorSelector: 10DE:2336")
	require.NotContains(t, b.String(), "externalResourceProvider")

	// before 1.9 KubeVirt cannot allocate them: nothing, and a note
	for _, v := range []KubeVirtVersion{{1, 8}, {1, 6}, {0, 59}} {
		p, notes, _ := KubeVirt(hosts, KubeVirtOptions{Version: v})
		require.Empty(t, p.Spec.Configuration.PermittedHostDevices.PCIHostDevices, v)
		require.Contains(t, strings.Join(notes, "\n"), "vendor-specific VFIO vGPUs (VFs 10DE:2336 on driver nvidia) are left out of pciHostDevices: KubeVirt "+v.String()+" allocates PCI host devices on vfio-pci only; KubeVirt ≥ 1.9 allocates these VFs itself")
	}

	// one selector, two types: KubeVirt could not tell them apart
	p, notes, _ := KubeVirt([]Host{{"a", vendorHost("2336", "NVIDIA H200X-35C")}, {"b", vendorHost("2336", "NVIDIA H200X-70C")}}, KubeVirtOptions{})
	require.Empty(t, p.Spec.Configuration.PermittedHostDevices.PCIHostDevices)
	require.Contains(t, strings.Join(notes, "\n"), "the vGPU VFs 10DE:2336 hold different types (NVIDIA H200X-35C on a; NVIDIA H200X-70C on b)")

	// a selector passthrough hosts already have (externalResourceProvider): the passthrough entry stays
	pt := &report.Report{Mode: "vm-passthrough", GPUs: []report.GPU{{Address: "0000:13:00.0", VendorID: "10de", DeviceID: "2335", Driver: "vfio-pci", ResourceName: "nvidia.com/GH100_H200_SXM_141GB"}}}
	p, notes, _ = KubeVirt([]Host{{"pt", pt}, {"a", vendorHost("2335", "NVIDIA H200X-35C")}}, KubeVirtOptions{})
	require.Equal(t, []PCIHostDevice{{"10DE:2335", "nvidia.com/GH100_H200_SXM_141GB", true}}, p.Spec.Configuration.PermittedHostDevices.PCIHostDevices)
	require.Contains(t, strings.Join(notes, "\n"), "the vGPU VFs 10DE:2335 (NVIDIA H200X-35C) are left out of pciHostDevices: the selector is permitted for passthrough already")

	// types offered, no vGPU yet: nothing to allocate, and a note
	p, notes, _ = KubeVirt([]Host{{"fresh", vendorHost("2336")}}, KubeVirtOptions{})
	require.Empty(t, p.Spec.Configuration.PermittedHostDevices.PCIHostDevices)
	require.Contains(t, strings.Join(notes, "\n"), "no vGPU exists yet on the vendor-specific VFIO GPUs fresh 0000:41:00.0")
}

func TestParseKubeVirtVersion(t *testing.T) {
	for s, want := range map[string]KubeVirtVersion{"1.9": {1, 9}, "v1.9.0": {1, 9}, "1.10.2": {1, 10}, "v1.9.0-rc.1": {1, 9}, "v0.59.1": {0, 59}} {
		v, err := ParseKubeVirtVersion(s)
		require.NoError(t, err, s)
		require.Equal(t, want, v, s)
	}
	for _, s := range []string{"", "1", "latest", "1.9.x", "v1.9.0\n", "1.9.0.1"} {
		_, err := ParseKubeVirtVersion(s)
		require.Error(t, err, s)
	}
}

// A report whose vGPU instances are not what they can be is refused.
func TestCheckHostRefusesBadVGPUInstances(t *testing.T) {
	for field, mut := range map[string]func(*report.VGPUInstance){
		"gpus[0].vgpu.instances[0].deviceID": func(in *report.VGPUInstance) { in.DeviceID = "23:6" },
		"gpus[0].vgpu.instances[0].device":   func(in *report.VGPUInstance) { in.Device = "../../x" },
		"gpus[0].vgpu.instances[0].type":     func(in *report.VGPUInstance) { in.Type = "NVIDIA H200X-35C\n- evil" },
		"gpus[0].vgpu.instances[0].typeID":   func(in *report.VGPUInstance) { in.TypeID = "14x" },
	} {
		r := vendorHost("2336", "NVIDIA H200X-35C")
		mut(&r.GPUs[0].VGPU.Instances[0])
		err := CheckHost(Host{"a", r})
		var re *RefusedError
		require.ErrorAs(t, err, &re, field)
		require.Equal(t, field, re.Field)
	}
	require.NoError(t, CheckHost(Host{"a", vendorHost("2336", "NVIDIA H200X-35C")}))
}
