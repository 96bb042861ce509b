package initramfs

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// udev rules in the image: a rule that writes a device's driver_override
// at its add event keeps every other driver off it, whichever module udev
// loads for it (the kernel's drivers/pci/pci-driver.c, pci_match_device:
// with driver_override set, only the driver of that name matches). udev
// applies ATTR{} assignments while it processes the rules and runs RUN{}
// (80-drivers.rules' kmod load) after all of them (udev(7)), so the file's
// place in the order does not matter. Rules files are read from
// /etc/udev/rules.d, /run/udev/rules.d and /usr/lib (/lib)/udev/rules.d, a
// name in an earlier directory hiding the same name in a later one
// (udev(7), "Rules Files").
var udevRuleDirs = []string{"etc/udev/rules.d/", "run/udev/rules.d/", "usr/lib/udev/rules.d/", "lib/udev/rules.d/"}

func udevRulesFile(name string) bool {
	for _, d := range udevRuleDirs {
		if rest, ok := strings.CutPrefix(name, d); ok && !strings.Contains(rest, "/") && strings.HasSuffix(rest, ".rules") {
			return true
		}
	}
	return false
}

// Override is a udev rule of the image that sets driver_override on the
// PCI devices it matches: KERNEL== (a glob on the address), ATTR{vendor}==
// and ATTR{device}== ("0x10de"); empty when the rule does not test it.
type Override struct {
	Source                 string // "etc/udev/rules.d/40-gpuprep-vfio.rules:3"
	Kernel, Vendor, Device string
	Driver                 string
}

// Matches reports whether the rule sets the override of the device at
// addr with vendor and device IDs ("10de", "2335").
func (o Override) Matches(addr, vendor, device string) bool {
	if o.Kernel != "" {
		if ok, err := path.Match(o.Kernel, addr); err != nil || !ok {
			return false
		}
	}
	return (o.Vendor == "" || strings.EqualFold(strings.TrimPrefix(o.Vendor, "0x"), vendor)) &&
		(o.Device == "" || strings.EqualFold(strings.TrimPrefix(o.Device, "0x"), device))
}

// DriverOverrides reads the image's udev rules that set driver_override.
// Only rules whose every match key is one this reader knows (ACTION,
// SUBSYSTEM=="pci", KERNEL, ATTR{vendor}, ATTR{device}) count: a rule with
// another condition may not fire, and is left out.
func (img *Image) DriverOverrides() []Override {
	seen := map[string]bool{}
	var out []Override
	for _, d := range udevRuleDirs {
		var names []string
		for _, n := range img.order {
			if strings.HasPrefix(n, d) && udevRulesFile(n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			if seen[path.Base(n)] {
				continue
			}
			seen[path.Base(n)] = true
			data, ok := img.File(n)
			if !ok {
				continue
			}
			for i, l := range strings.Split(string(data), "\n") {
				if o, ok := parseOverrideRule(l); ok {
					o.Source = fmt.Sprintf("%s:%d", n, i+1)
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// parseOverrideRule reads one rule line (comma-separated KEY op "value").
func parseOverrideRule(l string) (Override, bool) {
	var o Override
	l = strings.TrimSpace(l)
	if l == "" || strings.HasPrefix(l, "#") || strings.HasSuffix(l, "\\") {
		return o, false
	}
	set, pci := false, false
	for _, part := range strings.Split(l, ",") {
		part = strings.TrimSpace(part)
		key, op, val, ok := udevKey(part)
		if !ok {
			return o, false
		}
		s, p, ok := o.take(key, op, val)
		if !ok {
			return o, false
		}
		set, pci = set || s, pci || p
	}
	return o, set && pci && o.Driver != ""
}

// take reads one KEY op "value" of a driver_override rule into o: set,
// it sets the override; pci, it matches PCI devices; ok false, a key
// gpuprep does not read there.
func (o *Override) take(key, op, val string) (set, pci, ok bool) {
	switch key + " " + op {
	case "ATTR{driver_override} =":
		o.Driver = val
		return true, false, true
	case "ACTION ==":
		return false, false, val == "add"
	case "SUBSYSTEM ==":
		return false, val == "pci", val == "pci"
	case "KERNEL ==":
		o.Kernel = val
	case "ATTR{vendor} ==":
		o.Vendor = val
	case "ATTR{device} ==":
		o.Device = val
	default:
		return false, false, false
	}
	return false, false, true
}

// udevKey splits KEY op "value" (op ==, !=, =, +=, :=).
func udevKey(s string) (key, op, val string, ok bool) {
	for _, o := range []string{"==", "!=", "+=", ":=", "="} {
		if i := strings.Index(s, o); i > 0 {
			v := strings.TrimSpace(s[i+len(o):])
			if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
				return "", "", "", false
			}
			return strings.TrimSpace(s[:i]), o, v[1 : len(v)-1], true
		}
	}
	return "", "", "", false
}
