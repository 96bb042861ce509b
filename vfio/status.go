package vfio

import (
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
)

// DeviceStatus is one member of a selected device's IOMMU group.
type DeviceStatus struct {
	Address    string `json:"address"`
	VendorID   string `json:"vendorID"`
	DeviceID   string `json:"deviceID"`
	Class      string `json:"class"`
	Role       string `json:"role"`
	Driver     string `json:"driver"`
	Override   string `json:"driverOverride"`
	VFIODriver string `json:"vfioDriver,omitempty"` // the VFIO driver bind would use (endpoints only)
	Module     string `json:"vfioModule,omitempty"`
	Alias      string `json:"vfioAlias,omitempty"`
	Persisted  string `json:"persisted,omitempty"` // the driver gpuprep's persistent configuration binds at boot
}

// GroupNodeStatus is /dev/vfio/<group> as the host shows it.
type GroupNodeStatus struct {
	Path    string   `json:"path"`
	Present bool     `json:"present"`
	Viable  *bool    `json:"viable,omitempty"` // VFIO_GROUP_GET_STATUS on the live host
	Error   string   `json:"error,omitempty"`
	Holders []string `json:"holders,omitempty"`
}

// GPUStatus is one selected device.
type GPUStatus struct {
	Address    string          `json:"address"`
	Name       string          `json:"name"`
	IOMMUGroup string          `json:"iommuGroup"`
	Viable     bool            `json:"passthroughViable"`
	WhyNot     string          `json:"notViable,omitempty"` // why not, when passthroughViable is false
	OnVFIO     bool            `json:"onVFIO"`              // every endpoint of the group on a VFIO driver
	Members    []DeviceStatus  `json:"groupDevices"`
	Node       GroupNodeStatus `json:"groupNode"`
}

// PersistStatus is the persistent VFIO configuration found on the host.
type PersistStatus struct {
	Files   []string          `json:"files"`   // gpuprep's own files present
	Devices map[string]string `json:"devices"` // address → driver from gpuprep's files
	Other   []string          `json:"other"`   // VFIO configuration gpuprep did not write
}

// Status is `gpuprep vfio status`.
type Status struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Kernel     string        `json:"kernel"`
	Selection  string        `json:"selection"`
	GPUs       []GPUStatus   `json:"gpus"`
	Persistent PersistStatus `json:"persistent"`
}

// GetStatus reports, per selected device, its group members, their drivers
// and overrides, the VFIO driver bind would use, /dev/vfio/<group>, and the
// persistent configuration.
func GetStatus(root *host.Root, inv *pci.Inventory, sel pci.Selector, nvswitch bool) (*Status, error) {
	selected, err := Selection(inv, sel, nvswitch)
	if err != nil {
		return nil, err
	}
	st := &Status{APIVersion: "gpuprep/v1", Kind: "VFIOStatus", Kernel: kernel(root), Selection: sel.String(), GPUs: []GPUStatus{}}
	aliases, _ := readAliases(root, st.Kernel)
	persisted := Persisted(root)
	inv.Name(root, selected)
	for _, s := range selected {
		v := iommu.Viability(inv, s, selected)
		g := GPUStatus{Address: s.Address, Name: s.DisplayName(), IOMMUGroup: s.IOMMUGroup, Viable: v.Viable, OnVFIO: true}
		members := v.Members
		if s.IOMMUGroup == "" {
			members = []iommu.Member{{Dev: s, Role: iommu.RoleGPU}}
		}
		g.WhyNot = whyNotViable(root, s, v)
		for _, m := range members {
			ds := memberStatus(root, aliases, m, persisted)
			if m.Role != iommu.RoleBridge {
				g.OnVFIO = g.OnVFIO && pci.DriverIsVFIO(ds.Driver)
			}
			g.Members = append(g.Members, ds)
		}
		if s.IOMMUGroup != "" {
			g.Node = groupNodeStatus(root, s.IOMMUGroup)
		} else {
			g.OnVFIO = false
		}
		st.GPUs = append(st.GPUs, g)
	}
	st.Persistent = persistStatus(root, persisted)
	return st, nil
}

// whyNotViable is why the group of s (verdict v) cannot go to a VM whole,
// "" when it can.
func whyNotViable(root *host.Root, s *pci.Device, v iommu.Verdict) string {
	switch {
	case s.IOMMUGroup == "":
		if iommu.ReadKernel(root).Active() {
			return "no IOMMU group: the active IOMMU does not translate for this device (see gpuprep check --mode vm-passthrough)"
		}
		return "no IOMMU group: the IOMMU is not active in the kernel (see gpuprep check --mode vm-passthrough)"
	case !v.Viable:
		var foreign []string
		for _, f := range v.Foreign {
			foreign = append(foreign, f.Address)
		}
		return "the group holds endpoints that are not this GPU's: " + strings.Join(foreign, ", ")
	}
	return ""
}

// memberStatus is the status of the group member m: its driver and
// override, and, but for a bridge, the VFIO driver bind would give it.
func memberStatus(root *host.Root, aliases []alias, m iommu.Member, persisted map[string]string) DeviceStatus {
	ds := DeviceStatus{Address: m.Dev.Address, VendorID: m.Dev.VendorID, DeviceID: m.Dev.DeviceID, Class: m.Dev.Class,
		Role: string(m.Role), Persisted: persisted[m.Dev.Address]}
	ds.Driver, ds.Override = current(root, m.Dev.Address)
	if m.Role != iommu.RoleBridge {
		ds.Module, ds.Alias = chooseModule(aliases, modalias(root, m.Dev.Address))
		ds.VFIODriver = driverName(root, ds.Module)
	}
	return ds
}

// groupNodeStatus is the state of /dev/vfio/<group>: there, viable as the
// kernel says (live, not recording), and who holds it open.
func groupNodeStatus(root *host.Root, group string) GroupNodeStatus {
	n := GroupNodeStatus{Path: "/dev/vfio/" + group}
	n.Present = root.Exists(n.Path)
	// The kernel's own answer (an ioctl): not while a snapshot
	// records, which could not hold it.
	if n.Present && root.IsLive() && !root.IsRecording() {
		ok, err := GroupViable(group)
		if err != nil {
			n.Error = err.Error()
		} else {
			n.Viable = &ok
		}
	}
	for _, h := range Holders(root, GroupNode(group)) {
		n.Holders = append(n.Holders, h.String())
	}
	return n
}

func persistStatus(root *host.Root, persisted map[string]string) PersistStatus {
	ps := PersistStatus{Devices: persisted, Files: []string{}, Other: []string{}}
	for _, f := range []string{ModprobeConf, ModulesLoad, UdevRule} {
		if root.Exists(f) {
			ps.Files = append(ps.Files, f)
		}
	}
	var other []string
	for _, dir := range []string{"/etc/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"} {
		for _, n := range root.Names(dir) {
			p := dir + "/" + n
			if p != ModprobeConf && strings.HasSuffix(n, ".conf") {
				other = append(other, vfioModprobeLines(root, p)...)
			}
		}
	}
	if c, err := kargs.ReadString(root, "/proc/cmdline"); err == nil {
		for _, a := range strings.Fields(c) {
			if strings.HasPrefix(a, "vfio-pci.") || strings.HasPrefix(a, "vfio_pci.") {
				other = append(other, "/proc/cmdline: "+a)
			}
		}
	}
	sort.Strings(other)
	ps.Other = append(ps.Other, other...)
	return ps
}

// vfioModprobeLines are the lines of the modprobe.d file p that name a
// VFIO module ("p: line").
func vfioModprobeLines(root *host.Root, p string) []string {
	var out []string
	b, _ := root.ReadFile(p)
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if f := strings.Fields(l); len(f) >= 2 && f[0] != "#" && (strings.Contains(f[1], "vfio") ||
			(f[0] == "softdep" && strings.Contains(l, "vfio"))) {
			out = append(out, p+": "+l)
		}
	}
	return out
}
