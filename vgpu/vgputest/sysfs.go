package vgputest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// ErrNotSimulated is WriteAttr's answer for an attribute that is not a vGPU
// one: the caller hands the write to its kernel simulator.
var ErrNotSimulated = errors.New("not a vGPU attribute")

// MdevType is a vGPU type of the mdev interface.
type MdevType struct {
	ID   string // directory under mdev_supported_types: nvidia-224
	Name string // GRID T4-4Q
	Max  int    // instances on a GPU with no other vGPU
}

// MdevTypes are the types the vGPU manager's nvidia_vgpu_vfio registers for
// a GPU, by its PCI device ID (as sysfs writes it). A T4 (Turing) runs one
// type at a time: once it has a vGPU, the other types offer none.
var MdevTypes = map[string][]MdevType{
	"0x1eb8": {
		{"nvidia-222", "GRID T4-1Q", 16},
		{"nvidia-223", "GRID T4-2Q", 8},
		{"nvidia-224", "GRID T4-4Q", 4},
		{"nvidia-225", "GRID T4-8Q", 2},
		{"nvidia-226", "GRID T4-16Q", 1},
	},
	// A16 (GA107GL, one of the board's four 16 GB GPUs): the Q types of
	// vGPU 13–16, ids and names as NVIDIA's vGPU type tables for the A16
	// give them (nvidia-711 … nvidia-715 = NVIDIA A16-1Q … A16-16Q), Max
	// per GPU = 16 GB / framebuffer. Its VFs are the mdev parents
	// (VFParents).
	"0x25b6": {
		{"nvidia-711", "NVIDIA A16-1Q", 16},
		{"nvidia-712", "NVIDIA A16-2Q", 8},
		{"nvidia-713", "NVIDIA A16-4Q", 4},
		{"nvidia-714", "NVIDIA A16-8Q", 2},
		{"nvidia-715", "NVIDIA A16-16Q", 1},
	},
}

// VFParents are the GPUs (PCI device ID) whose SR-IOV VFs, not the PF, are
// the mdev parents (Ampere on vGPU 13–16): each VF has its own
// mdev_supported_types, offering 1 instance of a type while it has no
// vGPU and its GPU has room for one more (the GPU's instances are shared
// by its VFs: an A16 GPU takes 4 A16-4Q, on any 4 of its 16 VFs).
var VFParents = map[string]bool{"0x25b6": true}

// L40SCreatable is what a VF of an L40S (vendor-specific VFIO) lists in
// nvidia/creatable_vgpu_types while it has no type.
const L40SCreatable = "ID    : vGPU Name\n1155  : NVIDIA L40S-24Q\n1156  : NVIDIA L40S-48Q\n"

// MdevctlDir holds mdevctl's persistent mdev definitions,
// <MdevctlDir>/<parent>/<uuid>, a JSON object with mdev_type and start.
const MdevctlDir = "/etc/mdevctl.d"

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// WriteAttr plays the vGPU manager's sysfs attributes:
//
//   - <VF>/nvidia/current_vgpu_type (vendor-specific VFIO): the VF takes the
//     type, when it lists it as creatable (else EINVAL); a VF with a type
//     lists no creatable types, one set back to 0 lists the GPU's types
//     again; outside heterogeneous mode (see HeteroDir) the other VFs list
//     only the types of the framebuffer size the GPU hosts (setVFType);
//   - <PF>/mdev_supported_types/<type>/create: a UUID creates that mdev
//     (EINVAL for a malformed one, EEXIST for one that exists, ENOSPC when
//     the type has no instance left): its device directory below the PF
//     with mdev_type, remove and its own IOMMU group (and /dev/vfio/N), the
//     type's devices/ link, then /sys/bus/mdev/devices/<uuid>;
//     available_instances of every type of the GPU follow;
//   - /sys/bus/mdev/devices/<uuid>/remove: "1" removes the mdev.
//
// A write to an attribute that is not there fails with ENOENT.
//
// Every change is made so that a process killed in the middle (the crash
// tests kill the one running it) leaves the device either there or not:
// attribute files are replaced by rename, the /sys/bus/mdev/devices link
// is made last and removed first, and available_instances is recomputed
// from the devices there are at every create and remove. Other attributes
// get ErrNotSimulated.
func (h *Host) WriteAttr(p, v string) error {
	noent := fmt.Errorf("write %q to %s: %w", v, p, syscall.ENOENT)
	switch {
	case strings.HasSuffix(p, "/nvidia/current_vgpu_type"):
		real, err := h.Root.Realpath(p)
		if err != nil || !h.Root.Exists(p) {
			return noent
		}
		return h.setVFType(real, path.Dir(path.Dir(real)), strings.TrimSpace(v))
	case path.Base(p) == "create" && path.Base(path.Dir(path.Dir(p))) == "mdev_supported_types":
		typeDir, err := h.Root.Realpath(path.Dir(p))
		if err != nil || !h.Root.Exists(p) {
			return noent
		}
		return h.createMdev(path.Dir(path.Dir(typeDir)), path.Base(typeDir), strings.TrimSpace(v))
	case strings.HasPrefix(p, "/sys/bus/mdev/devices/") && path.Base(p) == "remove":
		if strings.TrimSpace(v) != "1" {
			return fmt.Errorf("write %q to %s: %w", v, p, syscall.EINVAL)
		}
		if !h.Root.Exists(p) {
			return noent
		}
		return h.removeMdev(path.Base(path.Dir(p)))
	}
	return ErrNotSimulated
}

// state writes the simulator's own file p (under HeteroDir), creating its
// directory.
func (h *Host) state(p, content string) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Join(h.Dir, p)), 0o755); err != nil {
		return err
	}
	return h.attr(p, content)
}

// attr replaces the host file p with content by rename.
func (h *Host) attr(p, content string) error {
	full := filepath.Join(h.Dir, p)
	tmp := filepath.Join(filepath.Dir(full), ".sim-"+filepath.Base(full))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, full)
}

// gpuOf returns the device directory of the GPU (PF) a parent belongs to:
// its physfn's for a VF, its own otherwise.
func (h *Host) gpuOf(parentDir string) string {
	if !h.Root.Exists(parentDir + "/physfn") {
		return parentDir
	}
	if pf, err := h.Root.Realpath(parentDir + "/physfn"); err == nil {
		return pf
	}
	return parentDir
}

// mdevs lists the mdevs of the GPU whose device directory is pfDir, on the
// PF or on one of its VFs: UUID → type directory name.
func (h *Host) mdevs(pfDir string) map[string]string {
	out := map[string]string{}
	for u, m := range h.mdevParents(pfDir) {
		out[u] = m[1]
	}
	return out
}

// mdevParents lists the mdevs of the GPU at pfDir: UUID → [parent
// directory, type directory name].
func (h *Host) mdevParents(pfDir string) map[string][2]string {
	out := map[string][2]string{}
	for _, u := range h.Root.Names("/sys/bus/mdev/devices") {
		real, err := h.Root.Realpath("/sys/bus/mdev/devices/" + u)
		if err != nil || h.gpuOf(path.Dir(real)) != pfDir {
			continue
		}
		out[u] = [2]string{path.Dir(real), h.Root.LinkBase(real + "/mdev_type")}
	}
	return out
}

// parentDirs are the mdev parents of the GPU at pfDir: the PF, or its VFs
// (VFParents).
func (h *Host) parentDirs(pfDir string) []string {
	if !VFParents[h.deviceID(pfDir)] {
		return []string{pfDir}
	}
	var out []string
	for _, l := range h.Root.Names(pfDir) {
		if !strings.HasPrefix(l, "virtfn") {
			continue
		}
		if vf, err := h.Root.Realpath(pfDir + "/" + l); err == nil && h.Root.Exists(vf+"/mdev_supported_types") {
			out = append(out, vf)
		}
	}
	return out
}

func (h *Host) deviceID(dir string) string {
	id, _ := h.Root.ReadString(dir + "/device")
	return id
}

// typesOf returns the mdev types the GPU (or VF) at dir offers.
func (h *Host) typesOf(dir string) []MdevType {
	return MdevTypes[h.deviceID(dir)]
}

// available is how many more instances of typ fit on the GPU that has have.
func available(t MdevType, have map[string]string) int {
	n := t.Max
	for _, typ := range have {
		if typ != t.ID {
			return 0
		}
		n--
	}
	return n
}

// parentAvailable is how many more instances of t the parent at dir takes:
// what its GPU takes (available), and on a VF parent at most 1, 0 once it
// has an mdev.
func (h *Host) parentAvailable(dir string, t MdevType) int {
	pf := h.gpuOf(dir)
	all := h.mdevParents(pf)
	n := available(t, h.mdevs(pf))
	if dir == pf {
		return n
	}
	for _, m := range all {
		if m[0] == dir {
			return 0
		}
	}
	return min(n, 1)
}

// recount rewrites available_instances of every type of every mdev parent
// of the GPU that the parent at dir belongs to.
func (h *Host) recount(dir string) error {
	pf := h.gpuOf(dir)
	for _, p := range h.parentDirs(pf) {
		for _, t := range h.typesOf(p) {
			if err := h.attr(p+"/mdev_supported_types/"+t.ID+"/available_instances", fmt.Sprintf("%d\n", h.parentAvailable(p, t))); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *Host) createMdev(pfDir, typeID, uuid string) error {
	fail := func(e error) error {
		return fmt.Errorf("write %q to %s/mdev_supported_types/%s/create: %w", uuid, pfDir, typeID, e)
	}
	if !uuidRe.MatchString(uuid) {
		return fail(syscall.EINVAL)
	}
	if h.Root.Exists("/sys/bus/mdev/devices/" + uuid) {
		return fail(syscall.EEXIST)
	}
	var t *MdevType
	for _, x := range h.typesOf(pfDir) {
		if x.ID == typeID {
			t = &x
			break
		}
	}
	if t == nil {
		return fail(syscall.ENOENT)
	}
	if h.parentAvailable(pfDir, *t) <= 0 {
		return fail(syscall.ENOSPC)
	}
	dev := pfDir + "/" + uuid
	group := h.freeGroup()
	b := fixture.New(h.Dir)
	b.Remove(dev) // what a killed create left
	b.Link(dev+"/mdev_type", pfDir+"/mdev_supported_types/"+typeID)
	b.File(dev+"/remove", "")
	b.File(group+"/type", "DMA\n")
	b.Link(group+"/devices/"+uuid, dev)
	b.Link(dev+"/iommu_group", group)
	b.File("/dev/vfio/"+path.Base(group), "")
	b.Link(pfDir+"/mdev_supported_types/"+typeID+"/devices/"+uuid, dev)
	b.Link("/sys/bus/mdev/devices/"+uuid, dev)
	if err := b.Err(); err != nil {
		return err
	}
	return h.recount(pfDir)
}

// freeGroup returns an IOMMU group directory no device uses (mdevs get
// their own, numbered from 1000).
func (h *Host) freeGroup() string {
	used := map[int]bool{}
	for _, g := range h.Root.Names("/sys/kernel/iommu_groups") {
		if n, err := strconv.Atoi(g); err == nil && len(h.Root.Names("/sys/kernel/iommu_groups/"+g+"/devices")) > 0 {
			used[n] = true
		}
	}
	n := 1000
	for used[n] {
		n++
	}
	return fmt.Sprintf("/sys/kernel/iommu_groups/%d", n)
}

func (h *Host) removeMdev(uuid string) error {
	dev, err := h.Root.Realpath("/sys/bus/mdev/devices/" + uuid)
	if err != nil {
		return err
	}
	pfDir := path.Dir(dev)
	typ := h.Root.LinkBase(dev + "/mdev_type")
	group, _ := h.Root.Realpath(dev + "/iommu_group")
	b := fixture.New(h.Dir)
	b.Remove("/sys/bus/mdev/devices/" + uuid)
	b.Remove(pfDir + "/mdev_supported_types/" + typ + "/devices/" + uuid)
	if group != "" {
		b.Remove("/dev/vfio/" + path.Base(group)).Remove(group)
	}
	b.Remove(dev)
	if err := b.Err(); err != nil {
		return err
	}
	return h.recount(pfDir)
}

// registerMdev is what loading nvidia_vgpu_vfio does: every GPU on the
// nvidia driver with types in MdevTypes becomes an mdev parent
// (mdev_supported_types, /sys/class/mdev_bus/<addr>); then, as mdevctl's
// udev rule does when a parent registers, the mdevs defined in MdevctlDir
// for it with "start": "auto" are created.
func (h *Host) registerMdev() error {
	b := fixture.New(h.Dir)
	var parents []string
	for _, a := range h.Root.Names("/sys/bus/pci/devices") {
		dev, err := h.Root.Realpath("/sys/bus/pci/devices/" + a)
		if err != nil || h.Root.LinkBase(dev+"/driver") != "nvidia" {
			continue
		}
		// a VF is a parent where its GPU's VFs are (VFParents), a PF where not
		if h.Root.Exists(dev+"/physfn") != VFParents[h.deviceID(dev)] {
			continue
		}
		if len(h.typesOf(dev)) == 0 {
			continue
		}
		if err := h.registerParent(b, a, dev); err != nil {
			return err
		}
		parents = append(parents, a)
	}
	if err := b.Err(); err != nil {
		return err
	}
	for _, a := range parents {
		if err := h.startParentMdevs(a); err != nil {
			return err
		}
	}
	return nil
}

// startParentMdevs creates the mdevs defined in MdevctlDir for the parent
// a with "start": "auto" that do not exist, as mdevctl's udev rule does
// when the parent registers.
func (h *Host) startParentMdevs(a string) error {
	defs := h.Root.Names(MdevctlDir + "/" + a)
	sort.Strings(defs)
	for _, u := range defs {
		raw, err := h.Root.ReadFile(MdevctlDir + "/" + a + "/" + u)
		if err != nil {
			return err
		}
		var def struct {
			Type  string `json:"mdev_type"`
			Start string `json:"start"`
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			return fmt.Errorf("mdevctl: %s/%s/%s: %w", MdevctlDir, a, u, err)
		}
		if def.Start != "auto" || h.Root.Exists("/sys/bus/mdev/devices/"+u) {
			continue
		}
		dev, err := h.Root.Realpath("/sys/bus/pci/devices/" + a)
		if err != nil {
			return err
		}
		if err := h.createMdev(dev, def.Type, u); err != nil {
			return fmt.Errorf("mdevctl start-parent-mdevs %s: %w", a, err)
		}
	}
	return nil
}

// registerParent makes the device a (at dev) an mdev parent: its
// mdev_supported_types (name, device_api, description, create, devices/,
// available_instances) and /sys/class/mdev_bus/<a>, the link last.
func (h *Host) registerParent(b *fixture.Builder, a, dev string) error {
	for _, t := range h.typesOf(dev) {
		base := dev + "/mdev_supported_types/" + t.ID
		b.File(base+"/name", t.Name+"\n")
		b.File(base+"/device_api", "vfio-pci\n")
		b.File(base+"/description", fmt.Sprintf("num_heads=4, frl_config=60, framebuffer=%dM, max_resolution=5120x2880, max_instance=%d\n", 16384/t.Max, t.Max))
		b.File(base+"/create", "")
		b.Mkdir(base + "/devices")
	}
	if err := b.Err(); err != nil {
		return err
	}
	if err := h.recount(dev); err != nil {
		return err
	}
	b.Link("/sys/class/mdev_bus/"+a, dev)
	return b.Err()
}

// unregisterMdev is unloading nvidia_vgpu_vfio: refused while an mdev
// exists (it holds the module), otherwise the GPUs stop being mdev parents.
func (h *Host) unregisterMdev() error {
	if n := len(h.Root.Names("/sys/bus/mdev/devices")); n > 0 {
		return fmt.Errorf("modprobe: exit status 1: modprobe: FATAL: Module nvidia_vgpu_vfio is in use (%d mdevs)", n)
	}
	b := fixture.New(h.Dir)
	for _, a := range h.Root.Names("/sys/class/mdev_bus") {
		if dev, err := h.Root.Realpath("/sys/class/mdev_bus/" + a); err == nil {
			b.Remove(dev + "/mdev_supported_types")
		}
		b.Remove("/sys/class/mdev_bus/" + a)
	}
	return b.Err()
}
