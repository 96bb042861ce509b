package vgpu

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// DeviceID is a GPU's PCI IDs as a device-filter names them:
// vgpu-device-manager's pkg/types.DeviceID, written 0xDDDDVVVV (device,
// then vendor: "0x20B510DE" is 10de:20b5), optionally
// ":0xSSSSWWWW" for the subsystem (subsystem device, then vendor).
type DeviceID struct {
	Device, Vendor                   uint16
	SubsystemDevice, SubsystemVendor uint16
	HasSubsystem                     bool
}

// String writes the ID as device-filter does.
func (d DeviceID) String() string {
	s := fmt.Sprintf("0x%04X%04X", d.Device, d.Vendor)
	if d.HasSubsystem {
		s += fmt.Sprintf(":0x%04X%04X", d.SubsystemDevice, d.SubsystemVendor)
	}
	return s
}

// ParseDeviceID reads a device-filter entry as
// types.NewDeviceIDFromString does: at most two ":"-separated parts, each
// an unsigned 32-bit number in Go's base-0 syntax (0x hex, 0o octal, 0b,
// decimal; underscores allowed), the high half the device.
func ParseDeviceID(s string) (DeviceID, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return DeviceID{}, fmt.Errorf("%q: want 0xDEVICEVENDOR or 0xDEVICEVENDOR:0xSUBDEVICESUBVENDOR", s)
	}
	raw, err := strconv.ParseUint(parts[0], 0, 32)
	if err != nil {
		return DeviceID{}, fmt.Errorf("%q: not a 32-bit device-and-vendor number (like 0x20B510DE)", s)
	}
	d := DeviceID{Device: uint16(raw >> 16), Vendor: uint16(raw)}
	if len(parts) == 2 {
		sub, err := strconv.ParseUint(parts[1], 0, 32)
		if err != nil {
			return DeviceID{}, fmt.Errorf("%q: the subsystem %q is not a 32-bit number (like 0x151E10DE)", s, parts[1])
		}
		d.SubsystemDevice, d.SubsystemVendor, d.HasSubsystem = uint16(sub>>16), uint16(sub), true
	}
	return d, nil
}

// Matches is types.DeviceID.Matches: device and vendor equal, and the
// subsystem too when the filter names one.
func (d DeviceID) Matches(hw DeviceID) bool {
	if d.Device != hw.Device || d.Vendor != hw.Vendor {
		return false
	}
	return !d.HasSubsystem || (d.SubsystemDevice == hw.SubsystemDevice && d.SubsystemVendor == hw.SubsystemVendor)
}

// DeviceFilter is a device set's `device-filter`: absent, one ID or a list
// of them. Empty (absent, null, "", []) matches every GPU, as in
// VGPUConfigSpec.MatchesDeviceFilter. An entry that is not an ID is kept
// in Unreadable: vgpu-device-manager ignores the parse error and the entry
// matches no GPU, so it does here, and Wants says so.
type DeviceFilter struct {
	IDs        []DeviceID
	Unreadable []unreadable // entries that are no ID, with why
	entries    int
}

// decode accepts a string or a list of strings. A bare number is refused:
// YAML reads device-filter: 0x20B510DE unquoted as an integer, which
// VGPUConfigSpec.UnmarshalJSON refuses (it wants a string or strings).
func (f *DeviceFilter) decode(n *yaml.Node) error {
	var entries []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		entries = []*yaml.Node{n}
	case yaml.SequenceNode:
		entries = n.Content
	default:
		return fmt.Errorf("want a device ID string or a list of them")
	}
	for _, e := range entries {
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			return fmt.Errorf("line %d: %q: want a quoted device ID string (\"0x20B510DE\"): unquoted, YAML reads a number, which vgpu-device-manager refuses", e.Line, e.Value)
		}
		if e.Value == "" && n.Kind == yaml.ScalarNode {
			return nil // "" matches every GPU
		}
		f.entries++
		id, err := ParseDeviceID(e.Value)
		if err != nil {
			f.Unreadable = append(f.Unreadable, unreadable{line: e.Line, why: err.Error()})
			continue
		}
		f.IDs = append(f.IDs, id)
	}
	return nil
}

// unreadable is a device-filter entry that is no device ID: its line, and why.
type unreadable struct {
	line int
	why  string
}

// Matches reports whether a GPU with these IDs passes the filter.
func (f DeviceFilter) Matches(hw DeviceID) bool {
	if f.entries == 0 {
		return true
	}
	for _, id := range f.IDs {
		if id.Matches(hw) {
			return true
		}
	}
	return false
}
