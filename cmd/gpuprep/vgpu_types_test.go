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
	// free per GPU: the two VFs without a type offer one of each
	require.Equal(t, []report.VGPUType{
		{ID: "1428", Name: "NVIDIA H200X-141C", Available: report.FreeCount(2), ResourceName: "nvidia.com/NVIDIA_H200X-141C"},
		{ID: "1429", Name: "NVIDIA H200X-70C", Available: report.FreeCount(2), ResourceName: "nvidia.com/NVIDIA_H200X-70C"},
		{ID: "1430", Name: "NVIDIA H200X-35C", Available: report.FreeCount(2), ResourceName: "nvidia.com/NVIDIA_H200X-35C"},
	}, g.VGPU.Types)
	// and per parent: a VF holding a vGPU offers none
	free := []report.VGPUFree{{ID: "1428", Available: report.FreeCount(1)}, {ID: "1429", Available: report.FreeCount(1)}, {ID: "1430", Available: report.FreeCount(1)}}
	require.Equal(t, []report.VGPUParent{
		{Address: "0000:41:00.4", Types: []report.VGPUFree{}},
		{Address: "0000:41:00.5", Types: []report.VGPUFree{}},
		{Address: "0000:41:00.6", Types: free},
		{Address: "0000:41:00.7", Types: free},
	}, g.VGPU.Parents)
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
	for _, k := range []string{"interface", "totalVFs", "numVFs", "types", "parents", "instances"} {
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

// Free instances per parent on the mdev layouts: a T4's one parent is the
// PF itself; an A16 GPU's parents are its 16 VFs, one vGPU each, while the
// GPU's count is what the VFs offer together.
func TestVGPUTypesJSONParentsOnMdevLayouts(t *testing.T) {
	types := func(scenario string) report.VGPUTypesGPU {
		t.Helper()
		out, stderr, code := gpuprep(t, "vgpu", "types", "--root", fixtureRoot(t, scenario), "-o", "json")
		require.Equal(t, 0, code, stderr)
		var doc report.VGPUTypes
		decodeStrict(t, out, &doc)
		require.NotEmpty(t, doc.GPUs)
		require.NotNil(t, doc.GPUs[0].VGPU)
		return doc.GPUs[0]
	}
	t4 := types("mdev-vgpu")
	require.Len(t, t4.VGPU.Parents, 1)
	require.Equal(t, t4.Address, t4.VGPU.Parents[0].Address)
	require.Equal(t, report.VGPUFree{ID: "nvidia-222", Available: report.FreeCount(16)}, t4.VGPU.Parents[0].Types[0])

	a16 := types("vfmdev-vgpu")
	require.Len(t, a16.VGPU.Parents, 16)
	for _, p := range a16.VGPU.Parents {
		require.NotEqual(t, a16.Address, p.Address, "the PF is no parent")
		require.Contains(t, p.Types, report.VGPUFree{ID: "nvidia-711", Available: report.FreeCount(1)}, p.Address)
	}
	require.Equal(t, "nvidia-711", a16.VGPU.Types[0].ID)
	require.Equal(t, report.FreeCount(16), a16.VGPU.Types[0].Available)
}
