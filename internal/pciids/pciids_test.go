package pciids

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/stretchr/testify/require"
)

const sample = `# comment
10de  NVIDIA Corporation
	2330  GH100 [H100 SXM5 80GB]
		10de 16c1  H100 SXM5 80GB
	2335  GH100 [H200 SXM 141GB]
1234  Technical Corp.
C 03  Display controller
	00  VGA compatible controller
`

func TestLookupFromRoot(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.New(dir).File("/usr/share/hwdata/pci.ids", sample).Err())
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	n := Lookup(root, []ID{{"10de", "2335"}, {"10de", "16c1"}, {"1234", "1111"}, {"abcd", ""}, {"0002", ""}})
	require.Equal(t, "/usr/share/hwdata/pci.ids", n.Source)
	require.Equal(t, "GH100 [H200 SXM 141GB]", n.Devices[ID{"10de", "2335"}])
	require.Empty(t, n.Devices[ID{"10de", "16c1"}], "a subsystem line is not a device")
	require.Equal(t, "NVIDIA Corporation", n.Vendors["10de"])
	require.Equal(t, "Technical Corp.", n.Vendors["1234"])
	// the root's file lacks vendor abcd: the embedded copy names it
	require.Equal(t, "Vadatech Inc.", n.Vendors["abcd"])
	require.Equal(t, map[ID]bool{{Vendor: "abcd"}: true}, n.FromEmbedded)
	require.NotContains(t, n.Vendors, "0002", "neither file names it")
}

func TestLookupEmbeddedWhenRootHasNone(t *testing.T) {
	root, err := host.NewRoot(t.TempDir())
	require.NoError(t, err)
	n := Lookup(root, []ID{{"10de", "2330"}})
	require.Equal(t, "embedded", n.Source)
	require.True(t, strings.Contains(n.Devices[ID{"10de", "2330"}], "H100"), n.Devices)
}

func BenchmarkLookupEmbedded(b *testing.B) {
	root, _ := host.NewRoot(b.TempDir())
	for i := 0; i < b.N; i++ {
		Lookup(root, []ID{{"10de", "2330"}, {"10de", "22a3"}})
	}
}

// Embedded jumps to each vendor's section; it must name exactly what a scan
// of the whole file names, for vendors anywhere in it (the first, the last
// before the device classes, ones missing).
func TestEmbeddedMatchesFullScan(t *testing.T) {
	var ids []ID
	vendor := ""
	lines := strings.Split(string(embedded), "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "C "):
			i = len(lines)
		case len(l) > 6 && isHex4([]byte(l)) && l[4:6] == "  ":
			vendor = l[:4]
			if i%7 == 0 {
				ids = append(ids, ID{Vendor: vendor})
			}
		case vendor != "" && len(l) > 6 && l[0] == '\t' && l[1] != '\t' && i%53 == 0:
			ids = append(ids, ID{vendor, l[1:5]})
		}
		if i == len(lines) {
			break
		}
	}
	ids = append(ids, ID{"0001", ""}, ID{"ffff", ""}, ID{"10de", "ffff"}, ID{"abcd", "0001"}, ID{"zz", "0001"})
	require.Greater(t, len(ids), 500)
	want := scan(bytes.NewReader(embedded), ids)
	got := Embedded(ids)
	require.Equal(t, want.Vendors, got.Vendors)
	require.Equal(t, want.Devices, got.Devices)
	require.NotEmpty(t, got.Devices)
}

func BenchmarkEmbedded(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Embedded([]ID{{"10de", "2335"}, {"10de", "22a3"}})
	}
}
