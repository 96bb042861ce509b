package vgpu

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
)

// ConfigGPU is a GPU as a vgpu-device-manager config sees it: its index
// among the node's NVIDIA GPUs and its PCI IDs, and whether gpuprep was
// asked to touch it (--select).
type ConfigGPU struct {
	Address  string
	Index    int
	ID       DeviceID
	Selected bool
}

// ConfigGPUs lists the GPUs a config's indices count, as
// assert.WalkSelectedVGPUConfigForEachGPU does: go-nvlib's nvpci.GetGPUs,
// every NVIDIA device of class 030000 (VGA) or 030200 (3D) that is not a
// VF, ordered by address. selected are the GPUs gpuprep may change; a GPU
// not among them is counted but left alone.
func ConfigGPUs(root *host.Root, devices []*pci.Device, selected []*pci.Device) []ConfigGPU {
	sel := map[string]bool{}
	for _, d := range selected {
		sel[d.Address] = true
	}
	var gpus []*pci.Device
	for _, d := range devices {
		if d.VendorID == pci.VendorNVIDIA && (d.Class == "030000" || d.Class == "030200") && d.PhysFn == "" {
			gpus = append(gpus, d)
		}
	}
	sort.SliceStable(gpus, func(i, j int) bool { return gpus[i].Address < gpus[j].Address })
	out := make([]ConfigGPU, len(gpus))
	for i, d := range gpus {
		out[i] = ConfigGPU{Address: d.Address, Index: i, Selected: sel[d.Address], ID: DeviceID{
			Device: hex16(d.DeviceID), Vendor: hex16(d.VendorID), HasSubsystem: true,
			SubsystemDevice: sysfsHex16(root, d.Address, "subsystem_device"),
			SubsystemVendor: sysfsHex16(root, d.Address, "subsystem_vendor"),
		}}
	}
	return out
}

func hex16(s string) uint16 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 16)
	return uint16(n)
}

// sysfsHex16 reads a 0xNNNN attribute of a PCI device; 0 when unreadable
// (a filter naming a subsystem then matches no GPU, as it would not where
// the attribute reads 0).
func sysfsHex16(root *host.Root, addr, attr string) uint16 {
	s, err := root.ReadString("/sys/bus/pci/devices/" + addr + "/" + attr)
	if err != nil {
		return 0
	}
	return hex16(strings.TrimSpace(s))
}

// Wants turns the device sets of one config into what each selected GPU
// should have, walking the GPUs as vgpu-device-manager does: a GPU gets a
// device set when the set's device-filter passes its IDs and its devices
// name its index. A device set with no vGPU devices gives the GPU a
// Want with Count 0: it is named, and should have none. notes say what
// vgpu-device-manager also skips: indices no GPU has, filters that are no
// ID, GPUs the config names that --select leaves out.
//
// A GPU two device sets match with different vGPU devices is refused:
// vgpu-device-manager applies one set and then the other, and
// SetVGPUConfig fails for a set whose types the GPU does not offer and
// otherwise clears the GPU first, so that only the last set remains. The
// shipped "default" config has two such pairs, which it cannot apply
// either: 0x25B610DE (A16 and A2 share the ID) and 0x1E7810DE (Quadro RTX
// 6000 and 8000 passive).
// A config that gives no selected GPU anything is refused too: a node
// prepared for vGPUs that gets none is not ready.
func Wants(file, name string, sets []DeviceSet, gpus []ConfigGPU) (wants []Want, notes []string, err error) {
	notes = setNotes(file, name, sets, len(gpus))
	matched := 0
	for _, g := range gpus {
		var got []DeviceSet
		for _, s := range sets {
			if s.Filter.Matches(g.ID) && s.Devices.Matches(g.Index) {
				got = append(got, s)
			}
		}
		if len(got) == 0 {
			continue
		}
		for _, s := range got[1:] {
			if !maps.Equal(s.VGPUDevices, got[0].VGPUDevices) {
				return nil, nil, fmt.Errorf("%s: lines %d and %d: vgpu-configs.%s[%d] and [%d] both match GPU %s (index %d, %s) with different vGPU devices: vgpu-device-manager applies them in turn, clearing the GPU before each, so it fails where the GPU does not offer one set's types and otherwise keeps only the last; name each GPU in one device set",
					file, got[0].line, s.line, name, got[0].index, s.index, g.Address, g.Index, g.ID)
			}
		}
		if !g.Selected {
			notes = append(notes, fmt.Sprintf("%s: config %q names GPU %s (index %d), which --select leaves out: left alone", file, name, g.Address, g.Index))
			continue
		}
		matched++
		wants = append(wants, gpuWants(g.Address, got[0].VGPUDevices)...)
	}
	if matched == 0 {
		var have []string
		for _, g := range gpus {
			if g.Selected {
				have = append(have, fmt.Sprintf("%s (index %d, %s)", g.Address, g.Index, g.ID))
			}
		}
		if len(have) == 0 {
			have = []string{"none"}
		}
		return nil, notes, fmt.Errorf("%s: config %q matches none of the selected GPUs (%s): check its device-filter and devices", file, name, strings.Join(have, ", "))
	}
	return wants, notes, nil
}

// gpuWants are one GPU's wants, by type name; a Want of Count 0 with no
// type when the set gives it none.
func gpuWants(addr string, devices map[string]int) []Want {
	if len(devices) == 0 {
		return []Want{{GPU: addr}}
	}
	types := make([]string, 0, len(devices))
	for t := range devices {
		types = append(types, t)
	}
	sort.Strings(types)
	out := make([]Want, len(types))
	for i, t := range types {
		out[i] = Want{GPU: addr, Type: t, Count: devices[t]}
	}
	return out
}

// setNotes says which parts of the sets match no GPU on this node.
func setNotes(file, name string, sets []DeviceSet, ngpus int) []string {
	var notes []string
	for _, s := range sets {
		for _, u := range s.Filter.Unreadable {
			notes = append(notes, fmt.Sprintf("%s:%d: vgpu-configs.%s[%d].device-filter: %s: it matches no GPU (vgpu-device-manager ignores it the same way)", file, u.line, name, s.index, u.why))
		}
		for k, i := range s.Devices.Indices {
			if i < 0 || i >= ngpus {
				notes = append(notes, fmt.Sprintf("%s:%d: vgpu-configs.%s[%d]: GPU index %d: this node has %d NVIDIA %s; vgpu-device-manager skips it too", file, s.Devices.lines[k], name, s.index, i, ngpus, plural.Word(ngpus, "GPU")))
			}
		}
	}
	return notes
}
