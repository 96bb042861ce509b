package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// A host pci.ids older than its GPU does not make it "unknown device":
// the embedded copy names it, and the finding says where the name came from.
func TestGPUNamedFromTheEmbeddedPCIIDsWhenTheHostsLacksIt(t *testing.T) {
	env, res := run(t, "old-host-pciids")
	f := find(res, want{"gpu.present", "0000:13:00.0", "", ""})
	require.Len(t, f, 1)
	require.Equal(t, preflight.Pass, f[0].Status)
	require.Contains(t, f[0].Message, "NVIDIA GH100 [H200 SXM 141GB] (10de:2335")
	require.NotContains(t, f[0].Message, "unknown device")
	require.Contains(t, f[0].Message, "name from gpuprep's embedded pci.ids: /usr/share/misc/pci.ids on the host does not list 10de:2335")
	require.Equal(t, "embedded", env.GPUs[0].NameSource)
	sw := find(res, want{"gpu.present", "0000:91:00.0,0000:93:00.0,0000:95:00.0,0000:97:00.0", "", ""})
	require.Len(t, sw, 1)
	require.Contains(t, sw[0].Message, "GH100 [H100 NVSwitch]")
	require.Contains(t, sw[0].Message, "does not list 10de:22a3")

	// the host's file names them: no note
	env, res = run(t, "hgx-h200")
	f = find(res, want{"gpu.present", "0000:13:00.0", "", ""})
	require.Len(t, f, 1)
	require.NotContains(t, f[0].Message, "embedded")
	require.Equal(t, "/usr/share/misc/pci.ids", env.GPUs[0].NameSource)
}
