package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

// decodeStrict decodes one JSON document into v, refusing fields v does not
// have and anything after it.
func decodeStrict(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), s)
	require.False(t, dec.More(), s)
}

// vgpu types -o json is one document (apiVersion, kind VGPUTypes) whose
// per-GPU vgpu object is the one check -o json reports, field for field.
func TestVGPUTypesJSONIsOneDocument(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu-persisted")
	out, stderr, code := gpuprep(t, "vgpu", "types", "--root", root, "-o", "json")
	require.Equal(t, 0, code, stderr)
	var doc report.VGPUTypes
	decodeStrict(t, out, &doc)
	require.Equal(t, "gpuprep/v1", doc.APIVersion)
	require.Equal(t, "VGPUTypes", doc.Kind)
	require.Len(t, doc.GPUs, 1)
	g := doc.GPUs[0]
	require.Equal(t, "0000:41:00.0", g.Address)
	require.NotNil(t, g.VGPU)
	require.Equal(t, "sriov", g.VGPU.Interface)
	require.Equal(t, []report.VGPUType{
		{ID: "1428", Name: "NVIDIA H200X-141C", Available: -1, ResourceName: "nvidia.com/NVIDIA_H200X-141C"},
		{ID: "1429", Name: "NVIDIA H200X-70C", Available: -1, ResourceName: "nvidia.com/NVIDIA_H200X-70C"},
		{ID: "1430", Name: "NVIDIA H200X-35C", Available: -1, ResourceName: "nvidia.com/NVIDIA_H200X-35C"},
	}, g.VGPU.Types)
	require.Equal(t, []report.VGPUInstance{
		{Device: "0000:41:00.4", VendorID: "10de", DeviceID: "2335", TypeID: "1430", Type: "NVIDIA H200X-35C"},
		{Device: "0000:41:00.5", VendorID: "10de", DeviceID: "2335", TypeID: "1430", Type: "NVIDIA H200X-35C"},
	}, g.VGPU.Instances)

	// the field names are check -o json's: the same object
	out, _, _ = gpuprep(t, "check", "--root", root, "-o", "json")
	var r report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Equal(t, r.GPUs[0].VGPU, g.VGPU)
	var raw struct {
		GPUs []struct {
			VGPU map[string]json.RawMessage `json:"vgpu"`
		} `json:"gpus"`
	}
	typesOut, _, _ := gpuprep(t, "vgpu", "types", "--root", root, "-o", "json")
	require.NoError(t, json.Unmarshal([]byte(typesOut), &raw))
	for _, k := range []string{"interface", "totalVFs", "numVFs", "types", "instances"} {
		require.Contains(t, raw.GPUs[0].VGPU, k)
	}
	require.NotContains(t, typesOut, `"ID"`)
	require.NotContains(t, typesOut, `"Available"`)

	// a GPU with no vGPU interface: vgpu null, not left out
	out, stderr, code = gpuprep(t, "vgpu", "types", "--root", fixtureRoot(t, "hgx-h200"), "-o", "json", "--select", "0000:13:00.0")
	require.Equal(t, 0, code, stderr)
	doc = report.VGPUTypes{}
	decodeStrict(t, out, &doc)
	require.Equal(t, []report.VGPUTypesGPU{{Address: "0000:13:00.0"}}, doc.GPUs)
	require.Contains(t, out, `"vgpu": null`)
}
