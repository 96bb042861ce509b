package vgputest

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
)

// HeteroDir holds, in the root (under /sys: kernel state, which tests that
// compare trees leave out), the simulated NVIDIA driver's heterogeneous
// vGPU state per GPU (PF address, as sysfs writes it): HeteroDir/mode/ADDR
// exists while the GPU is in heterogeneous mode (nvidia-smi vgpu -shm 1;
// sriov-manage resets it), HeteroDir/unsupported/ADDR makes the GPU lack
// the capability.
const HeteroDir = "/sys/kernel/.fake-nvidia/heterogeneous"

// SetHeterogeneous puts the GPU pf in heterogeneous mode (on) or out of it,
// as nvidia-smi vgpu -shm would, without its checks.
func (h *Host) SetHeterogeneous(pf string, on bool) error {
	if on {
		return h.state(HeteroDir+"/mode/"+pf, "")
	}
	return h.rm(HeteroDir + "/mode/" + pf)
}

// SetHeterogeneousUnsupported makes the GPU pf report no heterogeneous
// vGPU capability.
func (h *Host) SetHeterogeneousUnsupported(pf string) error {
	return h.state(HeteroDir+"/unsupported/"+pf, "")
}

func (h *Host) rm(p string) error {
	err := h.Root.RemoveFile(p)
	if err != nil && !h.Root.Exists(p) {
		return nil
	}
	return err
}

// smiPF turns nvidia-smi's -i PCI address (8 hex digit domain) into the
// sysfs one; "" when it is not one nvidia-smi accepts or no such GPU.
func (h *Host) smiPF(id string) string {
	dom, rest, ok := strings.Cut(id, ":")
	if !ok || len(dom) != 8 || !strings.HasPrefix(dom, "0000") {
		return ""
	}
	a := strings.ToLower(dom[4:] + ":" + rest)
	if !h.Root.Exists("/sys/bus/pci/devices/"+a) || h.Root.Exists("/sys/bus/pci/devices/"+a+"/physfn") {
		return ""
	}
	return a
}

// nvidiaSMI plays nvidia-smi -q -i ID (the vGPU lines of it) and nvidia-smi
// vgpu -shm 0|1 -i ID, which fails while the GPU has a vGPU (exit 19, as
// the driver answers) or lacks the capability.
func (h *Host) nvidiaSMI(args []string) ([]byte, error) {
	id := ""
	for i, a := range args {
		if a == "-i" && i+1 < len(args) {
			id = args[i+1]
		}
	}
	if !h.Root.Exists("/sys/module/nvidia") {
		return nil, errors.New("nvidia-smi: exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
	}
	pf := h.smiPF(id)
	if pf == "" {
		return []byte("No devices were found\n"), fmt.Errorf("nvidia-smi: exit status 6: no GPU %q", id)
	}
	supported := !h.Root.Exists(HeteroDir + "/unsupported/" + pf)
	switch {
	case len(args) == 3 && args[0] == "-q":
		return h.smiQuery(id, pf, supported), nil
	case len(args) == 5 && args[0] == "vgpu" && args[1] == "-shm":
		if out, err, ok := h.smiSetMode(id, pf, args[2], supported); ok {
			return out, err
		}
	}
	return nil, fmt.Errorf("nvidia-smi %v: not simulated", args)
}

// smiQuery is nvidia-smi -q -i id's vGPU lines for the PF pf.
func (h *Host) smiQuery(id, pf string, supported bool) []byte {
	cap, mode := "Supported", "Disabled"
	if !supported {
		cap = "Not Supported"
	}
	if h.Root.Exists(HeteroDir + "/mode/" + pf) {
		mode = "Enabled"
	}
	return []byte(fmt.Sprintf("\n==============NVSMI LOG==============\n\nAttached GPUs                             : 1\nGPU %s\n    Product Name                          : NVIDIA H200 NVL\n    vGPU Device Capability\n        Fractional Multi-vGPU             : Supported\n        Heterogenous Multi-vGPU           : %s\n    vGPU Heterogeneous Mode               : %s\n", id, cap, mode))
}

// smiSetMode plays nvidia-smi vgpu -shm to -i id for the PF pf; ok is
// false for a to other than 0 or 1 (on a GPU that can change its mode).
func (h *Host) smiSetMode(id, pf, to string, supported bool) (out []byte, err error, ok bool) {
	if !supported {
		return []byte("Setting vGPU heterogeneous mode is not supported for GPU " + id + "\n"), errors.New("nvidia-smi: exit status 3"), true
	}
	if len(h.vfTypes(pf)) > 0 {
		return []byte("Failed to set vGPU heterogeneous mode for GPU " + id + ": In use by another client\n"), errors.New("nvidia-smi: exit status 19"), true
	}
	switch to {
	case "1":
		return []byte("Enabled vGPU heterogeneous mode for GPU " + id + "\n"), h.SetHeterogeneous(pf, true), true
	case "0":
		return []byte("Disabled vGPU heterogeneous mode for GPU " + id + "\n"), h.SetHeterogeneous(pf, false), true
	}
	return nil, nil, false
}

// vfTypes returns the VFs of the PF pf that have a vGPU type, and that type
// (VF address → type id).
func (h *Host) vfTypes(pf string) map[string]string {
	out := map[string]string{}
	dev := "/sys/bus/pci/devices/" + pf
	for _, l := range h.Root.Names(dev) {
		if !strings.HasPrefix(l, "virtfn") {
			continue
		}
		vf := h.Root.LinkBase(dev + "/" + l)
		if cur, _ := h.Root.ReadString("/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type"); vf != "" && cur != "" && cur != "0" {
			out[vf] = cur
		}
	}
	return out
}

// fbSize is the framebuffer size in a type's name ("NVIDIA H200X-35C" → 35).
func fbSize(name string) string {
	s := name[strings.LastIndex(name, "-")+1:]
	return strings.TrimRight(s, "ABCQ")
}

// typeLines are the "<id> : <name>" lines of a creatable_vgpu_types text.
func typeLines(creatable string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(creatable, "\n") {
		id, name, ok := strings.Cut(l, ":")
		if id = strings.TrimSpace(id); ok && id != "" && strings.Trim(id, "0123456789") == "" {
			out[id] = strings.TrimSpace(name)
		}
	}
	return out
}

// setVFType plays a write of v to the current_vgpu_type of the VF whose
// device directory is vfDir: a type the VF does not list as creatable is
// refused (EINVAL); a VF with a type lists no creatable type; one set back
// to 0 lists the GPU's types again. Outside heterogeneous mode a GPU hosts
// vGPUs of one framebuffer size: while one of its VFs has a type, its other
// VFs list only the types of that size.
func (h *Host) setVFType(p, vfDir, v string) error {
	nv := path.Dir(p)
	pfDir, err := h.Root.Realpath(vfDir + "/physfn")
	if err != nil {
		// a VF the fixture made without its PF: the old behaviour
		creatable := L40SCreatable
		if v != "0" {
			creatable = "ID    : vGPU Name\n"
		}
		if err := h.attr(p, v+"\n"); err != nil {
			return err
		}
		return h.attr(nv+"/creatable_vgpu_types", creatable)
	}
	pf := path.Base(pfDir)
	all := h.allTypes(pfDir, nv)
	if v != "0" {
		cur, _ := h.Root.ReadFile(nv + "/creatable_vgpu_types")
		if _, ok := typeLines(string(cur))[v]; !ok {
			return fmt.Errorf("write %q to %s: %w", v, p, syscall.EINVAL)
		}
	}
	if err := h.attr(p, v+"\n"); err != nil {
		return err
	}
	// every VF's list follows from the types the GPU's VFs have now
	types := h.vfTypes(pf)
	size := ""
	for _, id := range types {
		size = fbSize(typeLines(all)[id])
		break
	}
	hetero := h.Root.Exists(HeteroDir + "/mode/" + pf)
	for _, l := range h.Root.Names(pfDir) {
		if !strings.HasPrefix(l, "virtfn") {
			continue
		}
		vf := h.Root.LinkBase(pfDir + "/" + l)
		list := "ID    : vGPU Name\n"
		if _, has := types[vf]; !has {
			list += creatableOf(all, size, hetero)
		}
		if err := h.attr("/sys/bus/pci/devices/"+vf+"/nvidia/creatable_vgpu_types", list); err != nil {
			return err
		}
	}
	return nil
}

// creatableOf are the type lines of all (a creatable_vgpu_types text) a VF
// without a type lists: those of framebuffer size, or every one in
// heterogeneous mode or while no VF of the GPU has a type (size "").
func creatableOf(all, size string, hetero bool) string {
	var list string
	for _, x := range strings.Split(all, "\n") {
		id, name, ok := strings.Cut(x, ":")
		if id = strings.TrimSpace(id); !ok || id == "" || strings.Trim(id, "0123456789") != "" {
			continue
		}
		if hetero || size == "" || fbSize(strings.TrimSpace(name)) == size {
			list += x + "\n"
		}
	}
	return list
}

// allTypes returns the types the GPU (device directory pfDir) offers with
// no vGPU on it: kept in HeteroDir/types/PF from the first write on, read
// then from the VF (nvidia dir nv) being written, else L40SCreatable.
func (h *Host) allTypes(pfDir, nv string) string {
	keep := HeteroDir + "/types/" + path.Base(pfDir)
	if b, err := h.Root.ReadFile(keep); err == nil {
		return string(b)
	}
	all := L40SCreatable
	if b, _ := h.Root.ReadFile(nv + "/creatable_vgpu_types"); offersTypes(string(b)) {
		all = string(b)
	}
	_ = h.state(keep, all)
	return all
}
