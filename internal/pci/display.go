package pci

import "strings"

// DisplayName is the one way gpuprep names a device wherever it shows one
// (check's findings, the report's gpus[].name and its header, vfio status,
// vGPU config errors): the vendor's short name, then the pci.ids device
// name, as lspci prints them less the company suffix: "NVIDIA GH100 [H200
// SXM 141GB]" (pci.ids: vendor 10de "NVIDIA Corporation", device 2335
// "GH100 [H200 SXM 141GB]"). Not the marketing name alone ("H200 SXM
// 141GB", the bracketed part), nor the full vendor name. "" when pci.ids
// does not name the device.
func DisplayName(vendor, device string) string {
	if device == "" {
		return ""
	}
	v := strings.TrimSuffix(strings.TrimSuffix(vendor, " Corporation"), " Corp.")
	if v == "" {
		return device
	}
	return v + " " + device
}

// DisplayName is d's name as DisplayName says it.
func (d *Device) DisplayName() string { return DisplayName(d.VendorName, d.Name) }
