// Package vgpu reads the NVIDIA vGPU state of a host through both kernel
// interfaces: mediated devices (mdev_supported_types on the PF, or on VFs for
// Ampere on older kernels) and the vendor-specific VFIO framework of vGPU ≥ 17
// on kernel ≥ 6.8 (SR-IOV VFs with nvidia/creatable_vgpu_types).
package vgpu

import (
	"sort"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Type is a vGPU type a device can create.
type Type struct {
	ID        string // mdev type dir (nvidia-222) or numeric id (1428)
	Name      string // NVIDIA A10-12Q
	Available int    // available_instances (mdev); -1 when unknown
}

// GPU is the vGPU state of one physical GPU.
type GPU struct {
	Address   string
	Interface string // "mdev", "sriov" (vendor-specific VFIO), or "" when none is set up
	TotalVFs  int
	NumVFs    int
	VFs       []string
	// Types are the types of its parents, de-duplicated, in the order
	// found; Available is the GPU's free count (summed over its parents)
	Types []Type
	// Parents are the devices vGPUs are created on: the PF (Turing mdev),
	// or its VFs (Ampere mdev, vendor-specific VFIO), with their own free
	// counts
	Parents []Parent
}

// VFParents reports whether the GPU's VFs are its mdev parents (Ampere
// SR-IOV with mdev).
func (g GPU) VFParents() bool {
	return g.Interface == "mdev" && len(g.Parents) > 0 && g.Parents[0].Address != g.Address
}

// Manager is evidence of an installed NVIDIA vGPU manager.
type Manager struct {
	Installed bool
	Evidence  []string
	// Files are the manager's programs found on the host itself (also in
	// Evidence).
	Files []string
}

// ReadManager looks for the vGPU manager's kernel module and daemons.
func ReadManager(root *host.Root) Manager {
	var m Manager
	for _, mod := range []string{"nvidia_vgpu_vfio"} {
		if root.Exists("/sys/module/" + mod) {
			m.Evidence = append(m.Evidence, "module "+mod+" loaded")
		}
	}
	for _, b := range []string{"/usr/bin/nvidia-vgpu-mgr", "/usr/bin/nvidia-vgpud", "/usr/lib/nvidia/sriov-manage"} {
		if root.Exists(b) {
			m.Evidence = append(m.Evidence, b)
			m.Files = append(m.Files, b)
		}
	}
	if len(root.Names("/sys/class/mdev_bus")) > 0 {
		m.Evidence = append(m.Evidence, "/sys/class/mdev_bus populated")
	}
	m.Installed = len(m.Evidence) > 0
	return m
}

// Read reads the vGPU state of the PF at addr: its parents (Parents) and
// their types merged (Types), with free instances per parent and per GPU.
func Read(root *host.Root, addr string) GPU {
	dev := "/sys/bus/pci/devices/" + addr
	g := GPU{Address: addr, TotalVFs: readInt(root, dev+"/sriov_totalvfs"), NumVFs: readInt(root, dev+"/sriov_numvfs")}
	// virtfnN links exist for enabled VFs only: none when sriov_numvfs
	// says 0 or the GPU has no SR-IOV (no such file). Unreadable: look.
	var names []string
	if g.NumVFs > 0 || g.NumVFs < 0 && root.Exists(dev+"/sriov_numvfs") {
		names = root.Names(dev)
	}
	// in VF order (virtfn2 before virtfn10), as the parents are taken
	byIndex := map[int]string{}
	var idx []int
	for _, l := range names {
		n, err := strconv.Atoi(strings.TrimPrefix(l, "virtfn"))
		if !strings.HasPrefix(l, "virtfn") || err != nil || n < 0 {
			continue
		}
		if vf := root.LinkBase(dev + "/" + l); vf != "" {
			byIndex[n] = vf
			idx = append(idx, n)
		}
	}
	sort.Ints(idx)
	for _, n := range idx {
		g.VFs = append(g.VFs, byIndex[n])
	}
	g.Parents = parentsOf(root, dev, g.VFs)
	for _, p := range g.Parents {
		if g.Interface != "mdev" {
			g.Interface = p.Interface // mdev wins where a host shows both
		}
	}
	vfParents := g.VFParents()
	var have map[string]int
	if vfParents {
		have = mdevsByType(root, g.Parents)
	}
	g.Types = gpuTypes(g.Parents, have, vfParents)
	return g
}

// ParseCreatable parses nvidia/creatable_vgpu_types: lines "<id> : <name>"
// (a header line "ID : vGPU Name" may come first).
func ParseCreatable(s string) []Type {
	var out []Type
	for _, l := range strings.Split(s, "\n") {
		id, name, ok := strings.Cut(l, ":")
		id, name = strings.TrimSpace(id), strings.TrimSpace(name)
		if !ok || id == "" {
			continue
		}
		if _, err := strconv.Atoi(id); err != nil {
			continue // header
		}
		out = append(out, Type{ID: id, Name: name, Available: -1})
	}
	return out
}

func mdevTypes(root *host.Root, dev string) []Type {
	var out []Type
	for _, t := range root.Names(dev + "/mdev_supported_types") {
		base := dev + "/mdev_supported_types/" + t
		name, _ := root.ReadString(base + "/name")
		out = append(out, Type{ID: t, Name: name, Available: readInt(root, base+"/available_instances")})
	}
	return out
}

func readInt(root *host.Root, p string) int {
	s, err := root.ReadString(p)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// ResourceName is the extended resource a vGPU type is advertised as (by
// NVIDIA's sandbox device plugin, and in KubeVirt's mediatedDevices):
// "nvidia.com/" + the type name with white space turned into "_"
// ("NVIDIA A10-12Q" → "nvidia.com/NVIDIA_A10-12Q").
func ResourceName(typeName string) string {
	return "nvidia.com/" + strings.Join(strings.Fields(typeName), "_")
}

// Daemons are the vGPU manager's host daemons.
var Daemons = []string{"nvidia-vgpu-mgr", "nvidia-vgpud"}

// RunningDaemons reports which of Daemons run, from /proc/PID/comm inside
// the root. known is false when the root shows no processes at all (a
// snapshot without /proc), so that absence is not taken for "stopped".
func RunningDaemons(root *host.Root) (running map[string]bool, known bool) {
	running = map[string]bool{}
	for _, pid := range root.Names("/proc") {
		if strings.Trim(pid, "0123456789") != "" {
			continue
		}
		comm, err := root.ReadString("/proc/" + pid + "/comm")
		if err != nil {
			continue
		}
		known = true
		if d := DaemonOf(comm); d != "" {
			running[d] = true
		}
	}
	return running, known
}

// DaemonOf returns the vGPU daemon (of Daemons) a process name is, or "".
func DaemonOf(comm string) string {
	for _, d := range Daemons {
		// comm is cut to 15 characters: "nvidia-vgpu-mgr" fits exactly
		if comm == d || len(d) > 15 && comm == d[:15] {
			return d
		}
	}
	return ""
}
