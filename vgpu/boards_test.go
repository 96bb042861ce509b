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
