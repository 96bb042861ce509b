// Package pci discovers the PCI functions of a host (from sysfs, against the
// host root), names them from pci.ids, and chooses which are treated as GPUs.
package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pciids"
)

// VendorNVIDIA is NVIDIA's PCI vendor ID.
const VendorNVIDIA = "10de"

// Device is one PCI function.
type Device struct {
	Address    string // full form, 0000:41:00.0
	VendorID   string // four lower-case hex digits
	DeviceID   string
	Class      string // six lower-case hex digits: 030200
	VendorName string
	Name       string // device name from pci.ids; "" when unknown
	NameSource string // the pci.ids Name came from: a path in the root, or "embedded"
	Driver     string // "" when unbound
	IOMMUGroup string // "" when none
	Parent     string // upstream bridge address; "" on a root bus
	PhysFn     string // the PF of a virtual function
}

// BaseClass returns the two-digit base class and subclass ("0300").
func (d *Device) BaseClass() string { return d.Class[:4] }

// IsBridge reports whether d is a host, PCI-to-PCI or PCI Express bridge
// (class 0600, 0604, 0609), which never blocks passthrough of its group.
func (d *Device) IsBridge() bool {
	switch d.BaseClass() {
	case "0600", "0604", "0609":
		return true
	}
	return false
}

// IsDisplay reports whether d is a VGA or 3D controller (0300, 0302).
func (d *Device) IsDisplay() bool {
	c := d.BaseClass()
	return c == "0300" || c == "0302"
}

// IsNVSwitch reports whether d is an NVIDIA NVSwitch (class 0680).
func (d *Device) IsNVSwitch() bool { return d.VendorID == VendorNVIDIA && d.BaseClass() == "0680" }

// Slot is the domain:bus:device part of the address: the physical device
// whose functions these are.
func (d *Device) Slot() string { return Slot(d.Address) }

// Slot returns the domain:bus:device part of a full PCI address.
func Slot(addr string) string {
	if i := strings.LastIndexByte(addr, '.'); i > 0 {
		return addr[:i]
	}
	return addr
}

// Label names d for people: "0000:41:00.0 NVIDIA GH100 [H200 SXM 141GB]".
func (d *Device) Label() string {
	n := d.Name
	if n == "" {
		n = "device " + d.VendorID + ":" + d.DeviceID
	}
	return d.Address + " " + n
}

// Inventory holds every PCI function of a host.
type Inventory struct {
	Devices   []*Device
	byAddr    map[string]*Device
	IDsSource string // which pci.ids named the devices
}

// Get returns the device at addr, or nil.
func (inv *Inventory) Get(addr string) *Device { return inv.byAddr[addr] }

// Group returns the devices of IOMMU group g, sorted by address.
func (inv *Inventory) Group(g string) []*Device {
	var out []*Device
	if g == "" {
		return out
	}
	for _, d := range inv.Devices {
		if d.IOMMUGroup == g {
			out = append(out, d)
		}
	}
	return out
}

// Upstream returns the chain of bridges above d, nearest first.
func (inv *Inventory) Upstream(d *Device) []*Device {
	var out []*Device
	for p := inv.Get(d.Parent); p != nil && len(out) < 32; p = inv.Get(p.Parent) {
		out = append(out, p)
	}
	return out
}

// Discover enumerates the PCI functions under the root's /sys/bus/pci/devices.
// A host without PCI (or without sysfs) gives an empty inventory.
//
// Each device's directory is opened once and its identity, driver, IOMMU
// group and physical function are read by name inside it; its parent bridge
// is the directory above it in the path /sys/bus/pci/devices/ADDR links to.
// ghw (the test oracle, see pci_test.go) reads the same files but resolves
// each from the top and reads more of them: 4.5 ms against 0.6 ms for the
// 57 functions of an HGX H200 node, most of a check's own time.
func Discover(root *host.Root) (*Inventory, error) { return discovery{}.discover(root) }

// discovery is how Discover reads the devices; its hooks, nil but in
// tests, run before each device is read (beforeRead: a device that goes
// away between the listing and the reading) and once a device's directory
// is open (afterOpen: a device removed and added again while it is read).
type discovery struct {
	beforeRead, afterOpen func(addr string)
}

func (dc discovery) discover(root *host.Root) (*Inventory, error) {
	const devices = "/sys/bus/pci/devices"
	inv := &Inventory{byAddr: map[string]*Device{}}
	bus, err := root.OpenDir(devices)
	if errors.Is(err, fs.ErrNotExist) {
		return inv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("PCI discovery: %w", err)
	}
	defer bus.Close()
	names, err := bus.Names()
	if err != nil {
		return nil, fmt.Errorf("PCI discovery: %w", err)
	}
	for _, addr := range names {
		if !IsAddress(addr) {
			return nil, fmt.Errorf("PCI discovery: %s/%s: not a PCI address (domain:bus:device.function)", devices, addr)
		}
		if dc.beforeRead != nil {
			dc.beforeRead(addr)
		}
		d, err := dc.readDevice(root, bus, addr)
		for try := 0; err != nil; try++ {
			if _, lerr := bus.Readlink(addr); errors.Is(lerr, fs.ErrNotExist) {
				break // removed while we read it (VFs torn down, a hot unplug): not there
			}
			if try == 1 {
				return nil, fmt.Errorf("PCI discovery: %w", err)
			}
			// Still listed: removed and added again while we read it (VFs
			// re-created at the same address). Once more, afresh.
			d, err = dc.readDevice(root, bus, addr)
		}
		if d == nil {
			continue
		}
		inv.Devices = append(inv.Devices, d)
		inv.byAddr[addr] = d
	}
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Address < inv.Devices[j].Address })
	return inv, nil
}

func (dc discovery) readDevice(root *host.Root, bus *host.Dir, addr string) (*Device, error) {
	d := &Device{Address: addr}
	if t, err := bus.Readlink(addr); err == nil {
		if p := path.Base(path.Dir(t)); IsAddress(p) {
			d.Parent = p
		}
	}
	dir, err := root.OpenDir(bus.Path() + "/" + addr)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	if dc.afterOpen != nil {
		dc.afterOpen(addr)
	}
	if !d.identityFromModalias(dir) {
		if err := d.identityFromAttributes(dir); err != nil {
			return nil, err
		}
	}
	d.Driver = dir.LinkBase("driver")
	d.IOMMUGroup = dir.LinkBase("iommu_group")
	d.PhysFn = dir.LinkBase("physfn")
	return d, nil
}

// identityFromModalias takes vendor, device and class from the one file
// that holds all three: pci:v000010DEd00002335sv…sd…bc03sc02i00.
func (d *Device) identityFromModalias(dir *host.Dir) bool {
	m, err := dir.ReadString("modalias")
	if err != nil {
		return false
	}
	m = strings.ToLower(m)
	vendor, rest, ok1 := cutHex(m, "pci:v", 8)
	device, rest, ok2 := cutHex(rest, "d", 8)
	_, rest, ok3 := cutHex(rest, "sv", 8)
	_, rest, ok4 := cutHex(rest, "sd", 8)
	base, rest, ok5 := cutHex(rest, "bc", 2)
	sub, rest, ok6 := cutHex(rest, "sc", 2)
	pi, _, ok7 := cutHex(rest, "i", 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return false
	}
	d.VendorID, d.DeviceID, d.Class = vendor[4:], device[4:], base+sub+pi
	return true
}

// identityFromAttributes reads the vendor, device and class attributes
// (0x10de, 0x2335, 0x030200), for a device whose modalias is unreadable.
func (d *Device) identityFromAttributes(dir *host.Dir) error {
	for _, a := range []struct {
		name string
		to   *string
		n    int
	}{{"vendor", &d.VendorID, 4}, {"device", &d.DeviceID, 4}, {"class", &d.Class, 6}} {
		s, err := dir.ReadString(a.name)
		if err != nil {
			return fmt.Errorf("%s: no usable modalias, and %w", dir.Path(), err)
		}
		v, _, ok := cutHex(strings.ToLower(s), "0x", a.n)
		if !ok || len(s) != 2+a.n {
			return fmt.Errorf("%s/%s: %q is not a PCI %s ID", dir.Path(), a.name, s, a.name)
		}
		*a.to = v
	}
	return nil
}

// cutHex cuts prefix and then n hexadecimal digits from the front of s.
func cutHex(s, prefix string, n int) (digits, rest string, ok bool) {
	s, ok = strings.CutPrefix(s, prefix)
	if !ok || len(s) < n || !isHex(s[:n]) {
		return "", "", false
	}
	return s[:n], s[n:], true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// IsAddress reports whether s is a full PCI address as sysfs names one:
// domain (4 hex digits, 5 or more for a VMD domain such as 10000), bus,
// device and function, lower case: 0000:41:00.0.
func IsAddress(s string) bool {
	i := strings.IndexByte(s, ':')
	if i < 4 || i > 8 || !isHex(s[:i]) || i > 4 && s[0] == '0' { // sysfs prints %04x
		return false
	}
	r := s[i+1:]
	return len(r) == 7 && r[2] == ':' && r[5] == '.' && isHex(r[:2]) && isHex(r[3:5]) && isHex(r[6:]) && r[6] <= '7'
}

// Name fills in vendor and device names of the given devices from pci.ids:
// the root's, and the embedded copy for what the root's does not name
// (pciids.Lookup); each device's NameSource says which named it.
func (inv *Inventory) Name(root *host.Root, devs []*Device) {
	ids := make([]pciids.ID, 0, len(devs))
	for _, d := range devs {
		ids = append(ids, pciids.ID{Vendor: d.VendorID, Device: d.DeviceID})
	}
	if len(ids) == 0 {
		return
	}
	names := pciids.Lookup(root, ids)
	inv.IDsSource = names.Source
	for _, d := range devs {
		d.VendorName = names.Vendors[d.VendorID]
		id := pciids.ID{Vendor: d.VendorID, Device: d.DeviceID}
		d.Name, d.NameSource = names.Devices[id], ""
		switch {
		case d.Name == "":
		case names.FromEmbedded[id]:
			d.NameSource = "embedded"
		default:
			d.NameSource = names.Source
		}
	}
}

// DriverIsVFIO reports whether a driver name is vfio-pci or a vendor VFIO
// variant driver (nvgrace_gpu_vfio_pci, mlx5_vfio_pci, …).
func DriverIsVFIO(driver string) bool {
	d := strings.ReplaceAll(driver, "_", "-")
	return d == "vfio-pci" || strings.HasSuffix(d, "-vfio-pci")
}
