// Package pci discovers the PCI functions of a host (through ghw, against the
// host root), names them from pci.ids, and chooses which are treated as GPUs.
package pci

import (
	"fmt"
	"io"
	"log/slog"
	"path"
	"sort"
	"strings"

	"github.com/jaypipes/ghw"
	ghwpci "github.com/jaypipes/ghw/pkg/pci"
	"github.com/jaypipes/pcidb"

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

var emptyDB = &pcidb.PCIDB{
	Classes:  map[string]*pcidb.Class{},
	Vendors:  map[string]*pcidb.Vendor{},
	Products: map[string]*pcidb.Product{},
}

// Discover enumerates the PCI functions under the root's /sys/bus/pci/devices.
// A host without PCI (or without sysfs) gives an empty inventory.
func Discover(root *host.Root) (*Inventory, error) {
	// ghw names devices from a database it loads whole; naming only the
	// devices we report is much cheaper, so ghw gets an empty one.
	info, err := ghwpci.New(ghw.WithChroot(root.Dir()), ghw.WithDisableTopology(),
		ghw.WithPCIDB(emptyDB), ghw.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil, fmt.Errorf("PCI discovery under %s: %w", root.Dir(), err)
	}
	inv := &Inventory{byAddr: map[string]*Device{}}
	if len(info.Devices) == 0 && len(root.Names("/sys/bus/pci/devices")) > 0 {
		// ghw gives up on the whole bus when one device lacks a readable modalias.
		return nil, fmt.Errorf("PCI discovery: %s lists devices but none could be read (a device without a readable modalias?)", "/sys/bus/pci/devices")
	}
	for _, gd := range info.Devices {
		d := &Device{
			Address:    gd.Address,
			VendorID:   gd.Vendor.ID,
			DeviceID:   gd.Product.ID,
			Driver:     gd.Driver,
			IOMMUGroup: gd.IOMMUGroup,
			Parent:     gd.ParentAddress,
		}
		if gd.Class != nil && gd.Subclass != nil && gd.ProgrammingInterface != nil {
			d.Class = gd.Class.ID + gd.Subclass.ID + gd.ProgrammingInterface.ID
		}
		if len(d.Class) != 6 {
			d.Class = classFromSysfs(root, d.Address)
		}
		if t, err := root.Readlink("/sys/bus/pci/devices/" + d.Address + "/physfn"); err == nil {
			d.PhysFn = path.Base(t)
		}
		inv.Devices = append(inv.Devices, d)
		inv.byAddr[d.Address] = d
	}
	sort.Slice(inv.Devices, func(i, j int) bool { return inv.Devices[i].Address < inv.Devices[j].Address })
	return inv, nil
}

func classFromSysfs(root *host.Root, addr string) string {
	s, err := root.ReadString("/sys/bus/pci/devices/" + addr + "/class")
	if err != nil {
		return "000000"
	}
	s = strings.TrimPrefix(strings.ToLower(s), "0x")
	if len(s) != 6 {
		return "000000"
	}
	return s
}

// Name fills in vendor and device names of the given devices from pci.ids.
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
		d.Name = names.Devices[pciids.ID{Vendor: d.VendorID, Device: d.DeviceID}]
	}
}

// DriverIsVFIO reports whether a driver name is vfio-pci or a vendor VFIO
// variant driver (nvgrace_gpu_vfio_pci, mlx5_vfio_pci, …).
func DriverIsVFIO(driver string) bool {
	d := strings.ReplaceAll(driver, "_", "-")
	return d == "vfio-pci" || strings.HasSuffix(d, "-vfio-pci")
}
