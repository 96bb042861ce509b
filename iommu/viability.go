package iommu

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// Role is why a device in a GPU's group does or does not block passthrough.
type Role string

// Roles of group members.
const (
	RoleGPU      Role = "gpu"      // the GPU itself
	RoleFunction Role = "function" // another function of the same physical device (audio, USB, UCSI)
	RoleBridge   Role = "bridge"   // a bridge or port: fine (pcieport sets driver_managed_dma)
	RoleSelected Role = "selected" // another selected GPU or NVSwitch: must go to the same VM
	RoleForeign  Role = "foreign"  // any other endpoint: blocks passthrough
)

// Member is one device of a GPU's IOMMU group.
type Member struct {
	Dev  *pci.Device
	Role Role
}

// Verdict says whether a GPU's IOMMU group can be assigned to a VM.
type Verdict struct {
	GPU     *pci.Device
	Group   string
	Viable  bool
	Members []Member
	Foreign []*pci.Device
	Shared  []*pci.Device // other selected GPUs/NVSwitches in the group
}

// Viability judges gpu's group. selected holds every device treated as a
// GPU (and NVSwitches that go with them).
func Viability(inv *pci.Inventory, gpu *pci.Device, selected []*pci.Device) Verdict {
	v := Verdict{GPU: gpu, Group: gpu.IOMMUGroup}
	if gpu.IOMMUGroup == "" {
		return v
	}
	isSel := map[string]bool{}
	for _, s := range selected {
		isSel[s.Address] = true
	}
	for _, d := range inv.Group(gpu.IOMMUGroup) {
		m := Member{Dev: d}
		switch {
		case d == gpu:
			m.Role = RoleGPU
		case d.IsBridge():
			m.Role = RoleBridge
		case d.Slot() == gpu.Slot():
			m.Role = RoleFunction
		case isSel[d.Address]:
			m.Role = RoleSelected
			v.Shared = append(v.Shared, d)
		default:
			m.Role = RoleForeign
			v.Foreign = append(v.Foreign, d)
		}
		v.Members = append(v.Members, m)
	}
	v.Viable = len(v.Foreign) == 0
	return v
}

// Isolation explains why a device shares its group: it reads the ACS
// capability (PCIe extended capability 0x000D) of every port above it and
// names the ones that do not isolate what is below them, or a PCIe-to-PCI
// bridge that makes everything behind it one requester.
func Isolation(root *host.Root, inv *pci.Inventory, d *pci.Device) []string {
	up := inv.Upstream(d)
	if len(up) == 0 {
		return []string{fmt.Sprintf("%s sits on the root bus with no port above it: its isolation is up to the root complex (multi-function root-complex devices without ACS share a group)", d.Address)}
	}
	var out []string
	for _, p := range up {
		if why := portIsolation(root, inv, p); why != "" {
			out = append(out, why)
		}
	}
	if len(out) == 0 {
		out = append(out, "every port above it has ACS isolation enabled; the group is shared below them (a multi-function device or a switch without ACS quirk)")
	}
	return out
}

// portIsolation says why the port p above a device does not isolate it,
// or "" when it does (ACS enabled, or a port the kernel asks no ACS of).
func portIsolation(root *host.Root, inv *pci.Inventory, p *pci.Device) string {
	cfg, err := root.ReadFile("/sys/bus/pci/devices/" + p.Address + "/config")
	if err != nil {
		return fmt.Sprintf("cannot read the config space of %s: %v", p.Address, err)
	}
	typ, isPCIe := pcieType(cfg)
	switch {
	case len(cfg) < 0x40:
		return fmt.Sprintf("cannot read the config space of %s (%d bytes)", p.Address, len(cfg))
	case !isPCIe && len(cfg) >= 0x100 || isPCIe && typ == 0x7:
		return fmt.Sprintf("%s is a PCIe-to-PCI bridge: devices behind it share its requester ID and cannot be isolated from each other", p.Address)
	case isPCIe && typ == 0x5 && !multifunction(cfg, inv, p):
		// The kernel asks ACS of a switch's upstream port only when it
		// is part of a multi-function device (pci_acs_enabled, after
		// PCIe 6.12.1.2): a single-function one isolates nothing and
		// splits nothing.
		return ""
	case len(cfg) <= 0x100:
		return fmt.Sprintf("cannot read the extended config space of %s (only %d bytes readable: run as root to read ACS)", p.Address, len(cfg))
	}
	ctrl, capab, ok := acs(cfg)
	kind := portKind(typ)
	if !ok {
		return fmt.Sprintf("%s (%s) has no ACS capability", p.Address, kind)
	}
	need := uint16(acsSV|acsRR|acsCR|acsUF) & capab
	if missing := need &^ ctrl; missing != 0 {
		return fmt.Sprintf("%s (%s) has ACS but %s disabled (control %#04x)", p.Address, kind, acsNames(missing), ctrl)
	}
	return ""
}

const (
	acsSV = 0x01
	acsRR = 0x04
	acsCR = 0x08
	acsUF = 0x10
)

func acsNames(bits uint16) string {
	var n []string
	for _, b := range []struct {
		bit  uint16
		name string
	}{{acsSV, "SV (source validation)"}, {acsRR, "RR (P2P request redirect)"}, {acsCR, "CR (P2P completion redirect)"}, {acsUF, "UF (upstream forwarding)"}} {
		if bits&b.bit != 0 {
			n = append(n, b.name)
		}
	}
	return strings.Join(n, ", ")
}

func portKind(t int) string {
	switch t {
	case 0x4:
		return "root port"
	case 0x5:
		return "switch upstream port"
	case 0x6:
		return "switch downstream port"
	case 0x8:
		return "PCI-to-PCIe bridge"
	}
	return "bridge"
}

// pcieType walks the standard capability list for the PCI Express
// capability (0x10) and returns its device/port type.
func pcieType(cfg []byte) (int, bool) {
	if len(cfg) < 0x40 || binary.LittleEndian.Uint16(cfg[0x06:])&0x10 == 0 {
		return 0, false
	}
	off := int(cfg[0x34]) &^ 3
	for n := 0; off >= 0x40 && off+4 <= len(cfg) && n < 48; n++ {
		if cfg[off] == 0x10 {
			return int(cfg[off+2]>>4) & 0xf, true
		}
		off = int(cfg[off+1]) &^ 3
	}
	return 0, false
}

// acs walks the extended capability list from 0x100 for ACS (0x000D) and
// returns its control and capability registers.
func acs(cfg []byte) (ctrl, capab uint16, ok bool) {
	off := 0x100
	for n := 0; off >= 0x100 && off+8 <= len(cfg) && n < 512; n++ {
		h := binary.LittleEndian.Uint32(cfg[off:])
		if h == 0 || h == 0xffffffff {
			return 0, 0, false
		}
		if h&0xffff == 0x000D {
			return binary.LittleEndian.Uint16(cfg[off+6:]), binary.LittleEndian.Uint16(cfg[off+4:]), true
		}
		off = int(h>>20) &^ 3
	}
	return 0, 0, false
}

// multifunction reports whether the PCI function p is part of a
// multi-function device: its header type says so (bit 7 of 0x0E), or
// another function of its slot is there.
func multifunction(cfg []byte, inv *pci.Inventory, p *pci.Device) bool {
	if len(cfg) > 0x0e && cfg[0x0e]&0x80 != 0 {
		return true
	}
	for _, d := range inv.Devices {
		if d.Address != p.Address && d.Slot() == p.Slot() {
			return true
		}
	}
	return false
}

// PortGaps are the ports above d that do not isolate it by their own ACS
// (portIsolation's reasons; none where every port does): where the kernel
// still gives d a group of its own, a kernel quirk or an ACS override
// stands in for them.
func PortGaps(root *host.Root, inv *pci.Inventory, d *pci.Device) []string {
	var out []string
	for _, p := range inv.Upstream(d) {
		if why := portIsolation(root, inv, p); why != "" {
			out = append(out, why)
		}
	}
	return out
}
