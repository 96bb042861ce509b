package deviceplugin

import (
	"fmt"
	"strings"
)

// Default is the sandbox device plugin release the current GPU Operator
// deploys: sandboxDevicePlugin.version in NVIDIA/gpu-operator
// deployments/gpu-operator/values.yaml (v1.6.0 at commit a22dbf67, since
// 6cdc92e2 of 2026-08-20).
const Default = "v1.6.0"

// Release is a sandbox device plugin release and the pci.ids its image
// bundles (/usr/pci.ids, copied from the plugin's utils/pci.ids).
type Release struct {
	Tag    string
	PCIIDs PCIIDs
	column int
	// devices: vendor 10de's device lines of that pci.ids, without their
	// leading tab, as getDeviceName scans them.
	devices []string
}

// beforeVendorScan: v1.1.1 to v1.2.1 looked the device ID up on every line
// of the whole pci.ids (pkg/device_plugin/device_plugin.go getDeviceName at
// those tags: the first line containing the ID, or starting with it at
// v1.2.1), not among NVIDIA's devices; v1.2.2 brought locateVendor.
var beforeVendorScan = lazyRegexp(`^v?1\.(1\.\d+|2\.[01])$`)

// Lookup is the release with tag ("v1.6.0"; "1.6.0" is taken as v1.6.0).
// A release gpuprep has no pci.ids for is an error that says so: its names
// cannot be known.
func Lookup(tag string) (Release, error) {
	t, err := loadTable()
	if err != nil {
		return Release{}, err
	}
	want := tag
	if !strings.HasPrefix(want, "v") {
		want = "v" + want
	}
	for _, r := range t.releases {
		if r.Tag == want {
			return r, nil
		}
	}
	if beforeVendorScan().MatchString(tag) {
		return Release{}, fmt.Errorf("sandbox device plugin %s: releases before v1.2.2 look the device ID up anywhere in their pci.ids, not among NVIDIA's devices, and gpuprep does not name resources their way (known: %s)", tag, strings.Join(Known(), ", "))
	}
	return Release{}, fmt.Errorf("sandbox device plugin version %q: gpuprep does not know which pci.ids it bundles, so not the names it advertises (known: %s; a new release: add it to scripts/deviceplugin-names.sh)", tag, strings.Join(Known(), ", "))
}

// Oldest is the oldest release gpuprep names resources for.
const Oldest = "v1.2.2"

// Known lists the releases Lookup knows, oldest first.
func Known() []string {
	t, err := loadTable()
	if err != nil {
		return nil
	}
	var tags []string
	for _, r := range t.releases {
		tags = append(tags, r.Tag)
	}
	return tags
}

// String: "v1.6.0 (pci.ids 2025.07.11)".
func (r Release) String() string {
	return r.Tag + " (pci.ids " + r.PCIIDs.Version + ")"
}
