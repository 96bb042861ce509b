package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGPUNamedOneWay: a GPU has one name wherever gpuprep shows it (check's
// finding, the report's gpus[].name and header, vfio status): the vendor's
// short name and the pci.ids device name (pci.DisplayName). Before, the
// same H200 was "NVIDIA GH100 [H200 SXM 141GB]", "GH100 [H200 SXM 141GB]",
// "NVIDIA Corporation GH100 [H200 SXM 141GB]" and "H200 SXM 141GB".
func TestGPUNamedOneWay(t *testing.T) {
	const want = "NVIDIA GH100 [H200 SXM 141GB]"
	root := fixtureRoot(t, "hgx-h200")
	out, _, _ := gpuprep(t, "check", "--root", root, "-o", "json")
	var rep struct {
		GPUs     []struct{ Name string }
		Findings []struct{ Check, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, want, rep.GPUs[0].Name)
	require.Contains(t, rep.Findings[0].Message, want+" (10de:2335")
	text, _, _ := gpuprep(t, "check", "--root", root)
	require.Contains(t, text, "GPUs: 8 × "+want+";")
	st, errs, _ := gpuprep(t, "vfio", "status", "--root", root, "-o", "json")
	var vs struct{ GPUs []struct{ Name string } }
	require.NoError(t, json.Unmarshal([]byte(st), &vs), errs)
	require.Equal(t, want, vs.GPUs[0].Name)
}
