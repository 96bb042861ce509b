package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// gpuprep check --root on roots short of evidence says so instead of
// passing or failing on what it could not read.
func TestCheckOnRootsShortOfEvidence(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	out, _, _ := gpuprep(t, "check", "-v", "--root", fixtureRoot(t, "vtx-disabled-old-kernel"))
	require.Contains(t, out, "⚠ cpu.virtualization         cpu flag vmx: vmx flag present, but kernel 4.15.0-213-generic is older than 5.6")

	out, _, code := gpuprep(t, "check", "--root", fixtureRoot(t, "capture-no-modules"), "--mode", "container")
	require.Equal(t, 0, code, out)
	out, _, _ = gpuprep(t, "check", "-v", "--root", fixtureRoot(t, "capture-no-modules"))
	require.Contains(t, out, "? vfio.modules               /proc/sys/kernel/osrelease: the running kernel's release is unknown")
	require.NotContains(t, out, "/lib/modules//")

	// the display name comes from the embedded pci.ids; the sandbox device
	// plugin's resource name stays what its own bundled pci.ids gives
	out, _, _ = gpuprep(t, "check", "--root", fixtureRoot(t, "old-host-pciids"), "-o", "json")
	var r struct {
		GPUs []struct{ Address, Name, ResourceName string } `json:"gpus"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.NotEmpty(t, r.GPUs)
	for _, g := range r.GPUs {
		require.Equal(t, "NVIDIA GH100 [H200 SXM 141GB]", g.Name, g.Address)
		require.Equal(t, "nvidia.com/GH100_H200_SXM_141GB", g.ResourceName, g.Address)
	}
}
