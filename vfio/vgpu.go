package vfio

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
)

// VGPUUse is what of NVIDIA vGPU lives on a GPU (a PF): its enabled SR-IOV
// VFs and its live vGPUs. Unbinding nvidia from the PF disables the VFs
// and destroys the vGPUs, under the VMs that use them.
type VGPUUse struct {
	GPU   string
	VFs   []string   // enabled SR-IOV VFs (virtfnN), in VF order
	VGPUs []LiveVGPU // VFs with a vGPU type, mdevs of the GPU or of its VFs
}

// LiveVGPU is one vGPU that exists.
type LiveVGPU struct {
	Device  string // the VF's address, or the mdev's UUID
	Type    string // the VF's current_vgpu_type (with its name where gpuprep recorded it), or the mdev type's name
	Holders []Holder
}

// Empty reports whether nothing of vGPU lives on the GPU.
func (u VGPUUse) Empty() bool { return len(u.VFs) == 0 && len(u.VGPUs) == 0 }

func (v LiveVGPU) String() string {
	kind := "mdev"
	if strings.Contains(v.Device, ":") {
		kind = "VF"
	}
	s := fmt.Sprintf("%s %s (vGPU type %s", kind, v.Device, v.Type)
	if len(v.Holders) > 0 {
		s += ", in use by " + holderList(v.Holders)
	}
	return s + ")"
}

// ReadVGPUUse reads, through the root, the VFs enabled on the GPU at addr
// (sriov_numvfs, virtfnN), the VFs among them with a vendor-specific vGPU
// type (nvidia/current_vgpu_type other than 0), the mdevs whose parent is
// the GPU or one of its VFs, and the processes holding each vGPU's VFIO
// group (/dev/vfio/<group>) or iommufd node (/dev/vfio/devices/vfioN).
func ReadVGPUUse(root *host.Root, addr string) VGPUUse {
	u := VGPUUse{GPU: addr}
	parents := map[string]bool{addr: true}
	var typeNames map[string]string // read at the first VF with a type
	for _, v := range enabledVFs(root, addr) {
		u.VFs = append(u.VFs, v)
		parents[v] = true
		vdev := "/sys/bus/pci/devices/" + v
		cur, err := root.ReadString(vdev + "/nvidia/current_vgpu_type")
		if err != nil || cur == "" || cur == "0" {
			continue
		}
		if typeNames == nil {
			typeNames = ReadVGPUTypeNames(root)
		}
		if n := typeNames[cur]; n != "" {
			cur += " (" + n + ")"
		}
		u.VGPUs = append(u.VGPUs, LiveVGPU{Device: v, Type: cur, Holders: DeviceHolders(root, vdev)})
	}
	u.VGPUs = append(u.VGPUs, mdevsOf(root, parents)...)
	return u
}

// enabledVFs are the addresses of the VFs enabled on the GPU at addr, by
// VF number.
func enabledVFs(root *host.Root, addr string) []string {
	dev := "/sys/bus/pci/devices/" + addr
	type vf struct {
		n    int
		addr string
	}
	var vfs []vf
	// virtfnN links exist for enabled VFs only: the device directory is
	// listed only when sriov_numvfs says some are (a snapshot copies what
	// is listed)
	var names []string
	if n, _ := root.ReadString(dev + "/sriov_numvfs"); n != "" && n != "0" {
		names = root.Names(dev)
	}
	for _, l := range names {
		n, err := strconv.Atoi(strings.TrimPrefix(l, "virtfn"))
		if !strings.HasPrefix(l, "virtfn") || err != nil {
			continue
		}
		if a := root.LinkBase(dev + "/" + l); a != "" {
			vfs = append(vfs, vf{n, a})
		}
	}
	sort.Slice(vfs, func(i, j int) bool { return vfs[i].n < vfs[j].n })
	out := make([]string, 0, len(vfs))
	for _, v := range vfs {
		out = append(out, v.addr)
	}
	return out
}

// mdevsOf are the mdevs whose parent is one of parents, by UUID, with
// their types and holders.
func mdevsOf(root *host.Root, parents map[string]bool) []LiveVGPU {
	var mdevs []string
	for _, m := range root.Names("/sys/bus/mdev/devices") {
		real, err := root.Realpath("/sys/bus/mdev/devices/" + m)
		if err == nil && parents[path.Base(path.Dir(real))] {
			mdevs = append(mdevs, m)
		}
	}
	sort.Strings(mdevs)
	var out []LiveVGPU
	for _, m := range mdevs {
		mdev := "/sys/bus/mdev/devices/" + m
		name, _ := root.ReadString(mdev + "/mdev_type/name")
		if name == "" {
			name = root.LinkBase(mdev + "/mdev_type")
		}
		out = append(out, LiveVGPU{Device: m, Type: name, Holders: DeviceHolders(root, mdev)})
	}
	return out
}

// VGPURefusals are NewPlan's refusals of the devices of ds, not on a VFIO
// driver, that host NVIDIA vGPU (for a caller that plans before the IOMMU
// groups exist, when NewPlan cannot run yet).
func VGPURefusals(root *host.Root, ds []*pci.Device) []string {
	var out []string
	for _, d := range ds {
		if d.Driver == "" || pci.DriverIsVFIO(d.Driver) {
			continue
		}
		if u := ReadVGPUUse(root, d.Address); !u.Empty() {
			out = append(out, vgpuReason(root, u, d.Driver, d.VendorID == pci.VendorNVIDIA))
		}
	}
	return out
}

// VGPUTypeNames is where gpuprep vgpu apply keeps the names of the
// vendor-specific type ids it has written (vgpu.TypeNames): a VF that has a
// type lists no creatable types any more, so once every VF has one,
// nothing in sysfs names the ids.
const VGPUTypeNames = "/var/lib/gpuprep/vgpu-type-names"

// ReadVGPUTypeNames reads VGPUTypeNames: type id → name.
func ReadVGPUTypeNames(root *host.Root) map[string]string {
	out := map[string]string{}
	b, _ := root.ReadFile(VGPUTypeNames)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "#") {
			continue // the header, which holds " : " too
		}
		if id, name, ok := strings.Cut(l, " : "); ok {
			out[strings.TrimSpace(id)] = strings.TrimSpace(name)
		}
	}
	return out
}

// DeviceHolders returns the processes holding the VFIO group or iommufd
// node of the device (a VF, an mdev) whose sysfs directory is dev.
func DeviceHolders(root *host.Root, dev string) []Holder {
	nodes := map[string]bool{}
	if g := root.LinkBase(dev + "/iommu_group"); g != "" {
		nodes["/dev/vfio/"+g] = true
	}
	for _, c := range root.Names(dev + "/vfio-dev") {
		nodes["/dev/vfio/devices/"+c] = true
	}
	if len(nodes) == 0 {
		return nil
	}
	return Holders(root, func(n string) bool { return nodes[n] })
}

// The units `gpuprep vgpu install` and `gpuprep vgpu apply --persist` write
// (vgpu.SRIOVUnitName, vgpu.ApplyUnitName: package vgpu imports this one).
const (
	VGPUSRIOVUnitName = "gpuprep-vgpu-sriov.service"
	VGPUApplyUnitName = "gpuprep-vgpu-apply.service"
)

// vgpuReason is why a bind must not take the GPU of u from its driver (u
// not Empty), and how to proceed. --force does not override it: it is the
// way past processes holding /dev/nvidia*, which on a vGPU host the vGPU
// manager's own daemons do, so it would get past this every time.
func vgpuReason(root *host.Root, u VGPUUse, driver string, nvidia bool) string {
	if !nvidia && len(u.VGPUs) == 0 {
		// another vendor's SR-IOV device (a NIC): its VFs, not vGPUs
		return fmt.Sprintf("%s has %s enabled (%s); unbinding %s from it would disable them, under whatever uses them. To give it to VFIO: disable the VFs (echo 0 > /sys/bus/pci/devices/%s/sriov_numvfs), then bind again (--force does not override this)",
			u.GPU, plural.N(len(u.VFs), "SR-IOV VF"), vfRange(u.VFs), driver, u.GPU)
	}
	var what, todo []string
	if len(u.VGPUs) > 0 {
		var vs []string
		held := false
		for _, v := range u.VGPUs {
			vs = append(vs, v.String())
			held = held || len(v.Holders) > 0
		}
		what = append(what, fmt.Sprintf("%s: %s", plural.N(len(u.VGPUs), "live vGPU"), strings.Join(vs, ", ")))
		if held {
			todo = append(todo, "shut down the VMs that use them")
		}
		var rm []string
		for _, v := range u.VGPUs {
			if strings.Contains(v.Device, ":") {
				rm = append(rm, "echo 0 > /sys/bus/pci/devices/"+v.Device+"/nvidia/current_vgpu_type")
			} else {
				rm = append(rm, "echo 1 > /sys/bus/mdev/devices/"+v.Device+"/remove")
			}
		}
		todo = append(todo, "remove the vGPUs ("+strings.Join(rm, "; ")+"; gpuprep vgpu apply --prune removes those not in its config and not in use)")
	}
	if len(u.VFs) > 0 {
		what = append(what, fmt.Sprintf("%s enabled (%s)", plural.N(len(u.VFs), "SR-IOV VF"), vfRange(u.VFs)))
		todo = append(todo, "disable the VFs: /usr/lib/nvidia/sriov-manage -d "+u.GPU)
	}
	var units []string
	for _, un := range []string{VGPUSRIOVUnitName, VGPUApplyUnitName} {
		if root.Exists("/etc/systemd/system/" + un) {
			units = append(units, un)
		}
	}
	if len(units) > 0 {
		todo = append(todo, "systemctl disable "+strings.Join(units, " ")+" (they enable the VFs and create the vGPUs again at boot)")
	}
	var harm []string
	if len(u.VGPUs) > 0 {
		harm = append(harm, "destroy the vGPUs (under the VMs that use them)")
	}
	if len(u.VFs) > 0 {
		harm = append(harm, "disable the VFs")
	}
	return fmt.Sprintf("%s hosts NVIDIA vGPU: %s; unbinding %s from it would %s. To give the whole GPU to VFIO: %s; then bind again (--force does not override this)",
		u.GPU, strings.Join(what, "; "), driver, strings.Join(harm, " and "), strings.Join(todo, ", then "))
}

// vfRange names a list of VFs briefly: all of them up to three, else the
// first and the last.
func vfRange(vfs []string) string {
	if len(vfs) <= 3 {
		return strings.Join(vfs, ", ")
	}
	return vfs[0] + " … " + vfs[len(vfs)-1]
}
