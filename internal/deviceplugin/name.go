package deviceplugin

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Namespace is the prefix of every resource the plugin advertises
// (DeviceNamespace in pkg/device_plugin/generic_device_plugin.go, every tag
// from v1.1.1 to v1.6.0; Register sends DeviceNamespace + "/" + deviceName).
const Namespace = "nvidia.com"

// The plugin's clean-up of a pci.ids name (getDeviceName in
// pkg/device_plugin/device_plugin.go, the same from v1.2.2 to v1.6.0):
// strings.TrimSpace, strings.ToUpper, "/" and "." replaced by "_", each run
// of `\s+` replaced by one "_", then every run of `[^a-zA-Z0-9_.]+` removed
// (the "." there no longer occurs), which drops the brackets of
// "GB100 [HGX B200 168GB]" and keeps what they enclose.
var (
	spaceRuns = lazyRegexp(`\s+`)
	otherRuns = lazyRegexp(`[^a-zA-Z0-9_.]+`)
)

// ResourceName is the extended resource release r advertises for an NVIDIA
// device (deviceID: four hex digits, as sysfs writes them, in lower case):
// the device's name in r's pci.ids, cleaned up as the plugin does; the raw
// device ID when that pci.ids has no name for it, or the name cleans up to
// nothing (createDevicePlugins: deviceName = k). An error when kubelet would
// refuse the name (Register fails: kubelet's device manager accepts only
// extended resource names, and a name ending in "_" is not one), so that the
// plugin advertises nothing for the device: the name is returned with it.
func (r Release) ResourceName(deviceID string) (string, error) {
	id := strings.ToLower(deviceID)
	name := Namespace + "/" + clean(lookup(r.devices, id), id)
	if err := extendedResourceName(name); err != nil {
		return name, fmt.Errorf("sandbox device plugin %s names device %s %s, which kubelet refuses (%v): the plugin cannot register it, so no node advertises it", r.Tag, id, name, err)
	}
	return name, nil
}

// lookup is getDeviceName's scan of vendor 10de's device lines: the first
// line starting with the device ID (prefix "\t"+ID on the file's line; the
// lines here are kept without their tab), what follows the ID; "" when none.
func lookup(devices []string, id string) string {
	for _, l := range devices {
		if strings.HasPrefix(l, id) {
			return strings.TrimPrefix(l, id)
		}
	}
	return ""
}

// clean turns a pci.ids name into the plugin's device name; the device ID
// when nothing is left.
func clean(name, id string) string {
	n := strings.ToUpper(strings.TrimSpace(name))
	n = strings.ReplaceAll(n, "/", "_")
	n = strings.ReplaceAll(n, ".", "_")
	n = spaceRuns().ReplaceAllString(n, "_")
	n = otherRuns().ReplaceAllString(n, "")
	if n == "" {
		return id
	}
	return n
}

// extendedResourceName: kubelet's test (v1helper.IsExtendedResourceName):
// the name with the quota prefix "requests." is a qualified name.
func extendedResourceName(name string) error {
	if errs := validation.IsQualifiedName("requests." + name); len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
