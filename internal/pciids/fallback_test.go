package pciids

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// oldHostIDs is a host's pci.ids from before the H200: it names the H100
// (10de:2330) but not the H200 (10de:2335).
const oldHostIDs = `10de  NVIDIA Corporation
	2330  GH100 [H100 SXM5 80GB]
C 03  Display controller
`

func TestLookupNamesFromEmbeddedWhatTheHostsFileLacks(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.New(dir).File("/usr/share/misc/pci.ids", oldHostIDs).Err())
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	h100, h200 := ID{"10de", "2330"}, ID{"10de", "2335"}
	n := Lookup(root, []ID{h100, h200})
	require.Equal(t, "/usr/share/misc/pci.ids", n.Source)
	require.Equal(t, "GH100 [H100 SXM5 80GB]", n.Devices[h100], "the host's file names it")
	require.Equal(t, Embedded([]ID{h200}).Devices[h200], n.Devices[h200])
	require.NotEmpty(t, n.Devices[h200])
	require.Equal(t, map[ID]bool{h200: true}, n.FromEmbedded, "only what the host's file lacks")
}
