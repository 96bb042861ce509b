package deviceplugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The embedded table is in the script's format (parseTable is strict) and
// holds what the plugin's tags bundle (scripts/deviceplugin-names.sh: the
// pci.ids of each tag, byte for byte a pciutils/pciids snapshot).
func TestEmbeddedTable(t *testing.T) {
	tab, err := parseTable(devicesTxt)
	require.NoError(t, err)
	require.Equal(t, []string{"v1.2.2", "v1.2.3", "v1.2.4", "v1.2.5", "v1.2.6", "v1.2.7", "v1.2.8", "v1.2.9",
		"v1.2.10", "v1.3.0", "v1.3.1", "v1.4.0", "v1.5.0", "v1.6.0"}, Known())
	var versions []string
	for _, p := range tab.pciids {
		versions = append(versions, p.Version)
	}
	require.Equal(t, []string{"2023.05.23", "2023.11.11", "2024.06.23", "2025.02.12", "2025.07.11"}, versions)
	for tag, want := range map[string]PCIIDs{
		"v1.2.4": {"2023.05.23", "f52a641a814e92b528884c1f285ef72e477105ee", "e97ddbf60c71ba0a5125878f1dde91d9b0aeaa50c7d074bba376510313fa85d7"},
		"v1.3.1": {"2025.02.12", "7af0f1f503389f0258766a1727a7dd1d2bb02771", "402d341f0b39e953d2d9a2ce44995cc0648b22c78927c8dced02ebefe38eba9b"},
		"v1.6.0": {"2025.07.11", "461b41990a0e4d4165e21a2f4ce91ba6ca7fea9d", "a96cd22db83c10d9141ecd7b14325ed9c936de5ef01d78e7e7e43f070184270b"},
	} {
		require.Equal(t, want, release(t, tag).PCIIDs, tag)
	}
	// device line counts of vendor 10de (grep of each pci.ids)
	for tag, n := range map[string]int{"v1.2.2": 1757, "v1.2.5": 1785, "v1.2.8": 1859, "v1.3.1": 1894, "v1.6.0": 1931} {
		require.Len(t, release(t, tag).devices, n, tag)
	}
	require.Equal(t, "v1.6.0 (pci.ids 2025.07.11)", release(t, Default).String())
}

func TestParseTableRefuses(t *testing.T) {
	head := "pciids\t2025.07.11\t461b41990a0e4d4165e21a2f4ce91ba6ca7fea9d\ta96cd22db83c10d9141ecd7b14325ed9c936de5ef01d78e7e7e43f070184270b\n" +
		"pciids\t2025.02.12\t7af0f1f503389f0258766a1727a7dd1d2bb02771\t402d341f0b39e953d2d9a2ce44995cc0648b22c78927c8dced02ebefe38eba9b\n" +
		"release\tv1.6.0\t2025.07.11\n"
	ok := head + "device\t11\t2909  GB100 [HGX B200 168GB]\n"
	_, err := parseTable(ok)
	require.NoError(t, err)
	for want, s := range map[string]string{
		"line 4: want device MASK":  head + "device\t1\t2909  X\n",
		"line 4: want device MASK ": head + "device\t00\t2909  X\n",
		"does not start with":       head + "device\t11\t2909\n",
		"device 2909 twice":         head + "device\t10\t2909  X\ndevice\t11\t2909  Y\n",
		"no pciids record":          head + "release\tv1.5.0\t2024.01.01\n",
		"release v1.6.0 twice":      head + "release\tv1.6.0\t2025.02.12\n",
		"line 5: \"pciids\" out of": ok + "pciids\t2025.01.01\t461b41990a0e4d4165e21a2f4ce91ba6ca7fea9d\ta96cd22db83c10d9141ecd7b14325ed9c936de5ef01d78e7e7e43f070184270b\n",
		"line 1: release v1.6.0":    "release\tv1.6.0\t2025.07.11\n",
		"out of place":              head + "pci.ids\tx\n",
		"want pciids VERSION":       "pciids\t2025.07.11\tabc\tdef\n",
		"no release":                "# nothing\n",
		"want release TAG":          head + "release\t1.6\t2025.07.11\n",
	} {
		_, err := parseTable(s)
		require.ErrorContains(t, err, want, s)
	}
}

// The script, run on pciutils/pciids history, writes exactly the embedded
// table. It needs a clone of github.com/pciutils/pciids (or a directory of
// pci.ids.VERSION files): GPUPREP_PCIIDS_REPO; skipped without one.
func TestScriptWritesTheTable(t *testing.T) {
	src := os.Getenv("GPUPREP_PCIIDS_REPO")
	if src == "" {
		t.Skip("GPUPREP_PCIIDS_REPO (a clone of pciutils/pciids) not set")
	}
	out := filepath.Join(t.TempDir(), "devices.txt")
	cmd := exec.Command("bash", "../../scripts/deviceplugin-names.sh", src, out)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, devicesTxt, string(got))
	require.True(t, strings.HasPrefix(string(b), "wrote "), string(b))
}

func TestLookup(t *testing.T) {
	r, err := Lookup("1.4.0")
	require.NoError(t, err)
	require.Equal(t, "v1.4.0", r.Tag)
	_, err = Lookup("v1.2.1")
	require.ErrorContains(t, err, "before v1.2.2 look the device ID up anywhere")
	_, err = Lookup("v1.7.0")
	require.ErrorContains(t, err, `version "v1.7.0": gpuprep does not know which pci.ids it bundles`)
	_, err = Lookup("v1.6.0-ubi9")
	require.ErrorContains(t, err, "does not know")
}

// BenchmarkParseTable: the embedded table parsed, as every gpuprep process
// that names resources (check, with any report) does once.
func BenchmarkParseTable(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseTable(devicesTxt); err != nil {
			b.Fatal(err)
		}
	}
}
