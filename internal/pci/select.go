package pci

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Selector chooses which devices are treated as GPUs. The zero value selects
// every NVIDIA GPU (vendor 10de, class 0300 or 0302).
type Selector struct {
	terms []term
}

type term struct {
	raw            string
	addr           string // full address
	vendor, device string
}

var (
	shortAddrRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`) })
	idRe        = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{4}(:[0-9a-f]{4})?$`) })
)

// ParseSelector parses --select values: a PCI address (0000:41:00.0,
// 10000:e1:00.0 in a VMD domain, or 41:00.0 in domain 0000), VVVV:DDDD, or VVVV (that vendor's display and 3D controllers).
func ParseSelector(values []string) (Selector, error) {
	var s Selector
	for _, raw := range values {
		for _, v := range strings.Split(raw, ",") {
			v = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "0x")))
			switch {
			case v == "":
				continue
			case IsAddress(v):
				s.terms = append(s.terms, term{raw: v, addr: v})
			case shortAddrRe().MatchString(v):
				s.terms = append(s.terms, term{raw: v, addr: "0000:" + v})
			case idRe().MatchString(v):
				t := term{raw: v, vendor: v[:4]}
				if len(v) == 9 {
					t.device = v[5:]
				}
				s.terms = append(s.terms, t)
			default:
				return s, fmt.Errorf("--select %q: want a PCI address (0000:41:00.0), VVVV:DDDD or VVVV (hex)", raw)
			}
		}
	}
	return s, nil
}

// Default reports whether s is the default selection.
func (s Selector) Default() bool { return len(s.terms) == 0 }

// String gives the selection as flags would spell it.
func (s Selector) String() string {
	if s.Default() {
		return "every NVIDIA GPU"
	}
	var parts []string
	for _, t := range s.terms {
		parts = append(parts, t.raw)
	}
	return strings.Join(parts, ",")
}

func (t term) match(d *Device) bool {
	switch {
	case t.addr != "":
		return d.Address == t.addr
	case t.device != "":
		return d.VendorID == t.vendor && d.DeviceID == t.device
	default:
		return d.VendorID == t.vendor && (d.IsDisplay() || d.BaseClass() == "0380")
	}
}

// Select returns the devices treated as GPUs, and an error naming every
// selector term that matched nothing. Virtual functions are never selected
// as GPUs by vendor: they belong to their PF.
func (s Selector) Select(inv *Inventory) ([]*Device, error) {
	var out []*Device
	if s.Default() {
		for _, d := range inv.Devices {
			if d.VendorID == VendorNVIDIA && d.IsDisplay() && d.PhysFn == "" {
				out = append(out, d)
			}
		}
		return out, nil
	}
	matched := make([]bool, len(s.terms))
	for _, d := range inv.Devices {
		for i, t := range s.terms {
			if t.match(d) && (d.PhysFn == "" || t.addr != "") {
				matched[i] = true
				if !contains(out, d) {
					out = append(out, d)
				}
			}
		}
	}
	var missing []string
	for i, t := range s.terms {
		if !matched[i] {
			missing = append(missing, t.raw)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("--select %s: no such PCI device on this host", strings.Join(missing, ","))
	}
	return out, nil
}

// NVSwitches returns the NVIDIA NVSwitches.
func NVSwitches(inv *Inventory) []*Device {
	var out []*Device
	for _, d := range inv.Devices {
		if d.IsNVSwitch() {
			out = append(out, d)
		}
	}
	return out
}

func contains(ds []*Device, d *Device) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}
