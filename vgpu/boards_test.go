package vgpu_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/vgpu"
)

// GeForce and TITAN boards are told by their pci.ids names; a name that
// also names a professional line, or none, is not taken for one.
func TestConsumerBoard(t *testing.T) {
	for name, want := range map[string]string{
		"AD102 [GeForce RTX 4090]":                "GeForce RTX 4090",
		"GA106 [Geforce RTX 3050]":                "Geforce RTX 3050",
		"TU102 [TITAN RTX]":                       "TITAN RTX",
		"GV100 [TITAN V]":                         "TITAN V",
		"GH100 [H200 SXM 141GB]":                  "",
		"TU104GL [Tesla T4]":                      "",
		"AD102GL [L40S]":                          "",
		"GA102GL [RTX A6000]":                     "",
		"AD102GL [RTX 6000 Ada Generation]":       "",
		"NV37GL [Quadro FX 330/GeForce PCX 5300]": "",
		"": "",
	} {
		board, ok := vgpu.ConsumerBoard(name)
		require.Equal(t, want != "", ok, name)
		require.Equal(t, want, board, name)
	}
}

// vGPU type names start with the board's family; a name gpuprep cannot
// read (a workstation board, an unknown device, a type of another shape)
// is never held against a config.
func TestTypeFitsBoard(t *testing.T) {
	for _, c := range []struct {
		typ, board string
		fits       bool
	}{
		{"H200X-141C", "GH100 [H200 SXM 141GB]", true},
		{"NVIDIA H200X-70C", "GH100 [H200 SXM 141GB]", true},
		{"H200X-141C", "GH100 [H100 PCIe]", false},
		{"H100XM-80C", "GH100 [H100 PCIe]", true}, // same family: names cannot tell
		{"H100L-94C", "GH100 [H100L 94GB]", true},
		{"L40S-24Q", "AD102GL [L40S]", true},
		{"L4-24Q", "AD102GL [L40S]", false},
		{"A100-40C", "GA102GL [A10]", false},
		{"A10-12Q", "GA102GL [A10]", true},
		{"A100D-80C", "GA100 [A100 PCIe 80GB]", true},
		{"A100-1-5C", "GA100 [A100-SXM-64GB]", true},
		{"GRID T4-1Q", "TU104GL [Tesla T4]", true},
		{"T4-1Q", "AD102GL [L40S]", false},
		{"V100X-16Q", "GV100GL [Tesla V100 SXM2 16GB]", true},
		{"A16-4Q", "GA107GL [A2 / A16]", true}, // two boards share the ID
		{"RTXA6000-24Q", "GA102GL [RTX A6000]", true},
		{"L40S-24Q", "GA102GL [RTX A6000]", true}, // a workstation name: not judged
		{"H200X-141C", "", true},
		{"H200X-141C", "GH100", true},
	} {
		require.Equal(t, c.fits, vgpu.TypeFitsBoard(c.typ, c.board), "%s on %s", c.typ, c.board)
	}
}

func TestWantsFitBoards(t *testing.T) {
	boards := map[string]string{"0000:41:00.0": "GH100 [H100 PCIe]", "0000:61:00.0": "GH100 [H100 PCIe]", "0000:81:00.0": "AD102GL [L40S]"}
	wants := []vgpu.Want{{GPU: "0000:41:00.0", Type: "H200X-141C", Count: 1}, {GPU: "0000:61:00.0", Type: "H200X-141C", Count: 1}, {GPU: "0000:81:00.0", Type: "L40S-24Q", Count: 2}}
	err := vgpu.WantsFitBoards("vgpu.yaml", "h200", wants, boards, nil)
	require.EqualError(t, err, `vgpu.yaml: config "h200" asks for vGPU types these GPUs cannot have: "H200X-141C" on NVIDIA GH100 [H100 PCIe] 0000:41:00.0, 0000:61:00.0 (NVIDIA vGPU type names start with the board's name); choose or write a config for these GPUs`)
	// what a GPU offers wins over its name
	offered := func(gpu string) []vgpu.Type { return []vgpu.Type{{ID: "1428", Name: "NVIDIA H200X-141C"}} }
	require.NoError(t, vgpu.WantsFitBoards("vgpu.yaml", "h200", wants, boards, offered))
	require.NoError(t, vgpu.WantsFitBoards("vgpu.yaml", "l40s", wants[2:], boards, nil))
}
