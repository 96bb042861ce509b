package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// kubevirt config on a node with vendor-specific VFIO vGPUs: the VFs that
// hold a type become a pciHostDevices entry KubeVirt ≥ 1.9 allocates (no
// externalResourceProvider); for an older KubeVirt, none.
func TestKubeVirtConfigVendorSpecificVGPUs(t *testing.T) {
	live := reportFile(t, "sriov-vgpu-persisted", "--mode", "vm-vgpu")
	want := "      pciHostDevices:\n        - pciVendorSelector: 10DE:2335\n          resourceName: nvidia.com/NVIDIA_H200X-35C\n"
	for _, args := range [][]string{nil, {"--kubevirt-version", "1.9"}, {"--kubevirt-version", "v1.10.0"}} {
		out, stderr, code := gpuprep(t, append([]string{"kubevirt", "config", "--from-report", live}, args...)...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, want, args)
		require.NotContains(t, out, "externalResourceProvider:", args)
		require.Contains(t, out, "allocated by KubeVirt ≥ 1.9 itself", args)
		require.NotContains(t, out, "permittedHostDevices is empty", args)
	}
	out, stderr, code := gpuprep(t, "kubevirt", "config", "--from-report", live, "--kubevirt-version", "1.8.4")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, out, "pciVendorSelector")
	require.Contains(t, out, "KubeVirt 1.8 allocates PCI host devices on vfio-pci only; KubeVirt ≥ 1.9 allocates these VFs itself")
	_, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", live, "--kubevirt-version", "latest")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `--kubevirt-version "latest": want a KubeVirt release`)

	// -o json: the same entry, and no externalResourceProvider either
	out, stderr, code = gpuprep(t, "kubevirt", "config", "--from-report", live, "-o", "json")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"pciVendorSelector": "10DE:2335",`)
	require.Contains(t, out, `"resourceName": "nvidia.com/NVIDIA_H200X-35C"`)
	require.NotContains(t, out, `"externalResourceProvider"`)
}
