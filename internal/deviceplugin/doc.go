// Package deviceplugin names PCI passthrough resources as NVIDIA's sandbox
// device plugin (github.com/NVIDIA/kubevirt-gpu-device-plugin, which the GPU
// Operator deploys on vm-passthrough nodes) names them, release by release.
//
// The plugin names a device from the pci.ids bundled in its own image, not
// the host's and not the newest: a GPU newer than that file is advertised as
// nvidia.com/<device ID>, and a name changed since is advertised the old way.
// names/devices.txt holds, for each release from v1.2.2, the NVIDIA device
// lines of the pci.ids it bundles; scripts/deviceplugin-names.sh generates it
// from pciutils/pciids history and says where each file comes from.
package deviceplugin
