package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vgpu"
)

// vfModel is the vendor-specific VFIO vGPUs of one VF model (one
// pciVendorSelector) across the hosts: each type its VFs hold, with the
// hosts that have it.
type vfModel struct {
	types map[string][]string // type name → hosts
}

// unknownTypeName reports whether a vGPU's type name is not known (the
// placeholder vgpu.Existing gives a type id it cannot name).
func unknownTypeName(in report.VGPUInstance) bool { return in.Type == "type "+in.TypeID }

// vgpuHost reports whether the GPU g of a host's report counts as a vGPU
// GPU in its report's mode (KubeVirt's rule).
func vgpuHost(mode string, g report.GPU) bool {
	return mode == "vm-vgpu" || mode == "" && g.VGPU != nil
}

// vendorVGPUs permits the vGPUs of the vendor-specific VFIO interface (vGPU
// 17+ on kernel 6.8+): the VFs that hold a type (on driver nvidia, with a
// non-zero nvidia/current_vgpu_type). KubeVirt ≥ 1.9 allocates them itself
// as PCI host devices (VendorVGPUSince): a pciHostDevices entry per VF
// model, selected by the VF's own vendor:device, without
// externalResourceProvider (KubeVirt's device plugin serves only the
// entries without it: device_controller.go at v1.9.0), and no NVIDIA device
// plugin advertises them (kubevirt-gpu-device-plugin v1.6.0, commit
// d26f2374, reads no nvidia/current_vgpu_type). resourceName is
// nvidia.com/ + the type's name with white space as "_" (vgpu.ResourceName),
// the name the mdev vGPUs of the same type have. KubeVirt keys its PCI
// resources by selector alone, so one selector is one resource: a VF model
// whose VFs hold different types across the hosts cannot be told apart by
// KubeVirt (a VM asking for one type could get another) and is left out
// with a note, as is a selector that pciHostDevices already permits for
// passthrough (taken). Older KubeVirt (v) cannot allocate these VFs at all:
// nothing is permitted, and a note says which version it takes.
func vendorVGPUs(hosts []Host, v KubeVirtVersion, taken map[string]PCIHostDevice) (out []PCIHostDevice, notes []string) {
	vf := vfModels{models: map[string]*vfModel{}}
	for _, h := range hosts {
		if h.Report.Mode == "container" {
			continue
		}
		for _, g := range h.Report.GPUs {
			if g.VendorID != "10de" || !vgpuHost(h.Report.Mode, g) || g.VGPU == nil || g.VGPU.Interface != "sriov" {
				continue
			}
			vf.gpu(h, g)
		}
	}
	models := vf.models
	if len(vf.none) > 0 {
		notes = append(notes, fmt.Sprintf("no vGPU exists yet on the vendor-specific VFIO GPUs %s (every VF's nvidia/current_vgpu_type is 0): KubeVirt allocates only VFs that hold a type; create them (gpuprep vgpu apply -f CONFIG -c NAME --persist) and run kubevirt config again", strings.Join(vf.none, ", ")))
	}
	if len(vf.unnamed) > 0 {
		notes = append(notes, fmt.Sprintf("vGPUs whose type is not named on their host are left out of pciHostDevices (their resourceName is made of the type's name): %s", strings.Join(vf.unnamed, ", ")))
	}
	if len(models) == 0 {
		return nil, notes
	}
	if !v.AtLeast(VendorVGPUSince) {
		notes = append(notes, fmt.Sprintf("vendor-specific VFIO vGPUs (VFs %s on driver nvidia) are left out of pciHostDevices: KubeVirt %s allocates PCI host devices on vfio-pci only; KubeVirt ≥ %s allocates these VFs itself (kubevirt/kubevirt PR #16890): run kubevirt config --kubevirt-version %s once the cluster runs it",
			strings.Join(slices.Sorted(maps.Keys(models)), ", "), v, VendorVGPUSince, VendorVGPUSince))
		return nil, notes
	}
	for _, sel := range slices.Sorted(maps.Keys(models)) {
		d, note := vfEntry(sel, models[sel], taken)
		if d != nil {
			out = append(out, *d)
		}
		notes = append(notes, note)
	}
	return out, notes
}

// vfModels are the VF models of the vendor-specific VFIO GPUs that hold a
// type (by selector), the vGPUs whose type is not named on their host, and
// the GPUs with no vGPU yet.
type vfModels struct {
	models        map[string]*vfModel
	unnamed, none []string
}

// gpu takes in the vGPU VFs of g, a vendor-specific VFIO GPU of h.
func (vf *vfModels) gpu(h Host, g report.GPU) {
	vfs := 0
	for _, in := range g.VGPU.Instances {
		if in.VendorID == "" || in.DeviceID == "" {
			continue
		}
		vfs++
		if unknownTypeName(in) {
			vf.unnamed = appendOnce(vf.unnamed, h.Name+" "+in.Device+" (type "+in.TypeID+")")
			continue
		}
		sel := strings.ToUpper(in.VendorID + ":" + in.DeviceID)
		m := vf.models[sel]
		if m == nil {
			m = &vfModel{types: map[string][]string{}}
			vf.models[sel] = m
		}
		m.types[in.Type] = appendOnce(m.types[in.Type], h.Name)
	}
	if vfs == 0 {
		vf.none = appendOnce(vf.none, h.Name+" "+g.Address)
	}
}

// vfEntry is the pciHostDevices entry of the VF model sel (m), nil when it
// is left out (its selector taken for passthrough, or its VFs of several
// types), with the note that says so.
func vfEntry(sel string, m *vfModel, taken map[string]PCIHostDevice) (*PCIHostDevice, string) {
	types := slices.Sorted(maps.Keys(m.types))
	if d, ok := taken[sel]; ok {
		return nil, fmt.Sprintf("the vGPU VFs %s (%s) are left out of pciHostDevices: the selector is permitted for passthrough already (%s, externalResourceProvider), and KubeVirt takes one resource per selector", sel, strings.Join(types, ", "), d.ResourceName)
	}
	if len(types) > 1 {
		var per []string
		for _, t := range types {
			per = append(per, t+" on "+strings.Join(m.types[t], ", "))
		}
		return nil, fmt.Sprintf("the vGPU VFs %s hold different types (%s) and are left out of pciHostDevices: KubeVirt's PCI device plugin gives one resource per vendor:device, so a VM could not choose the type; give the VFs of one model one type across these hosts, or permit them by hand", sel, strings.Join(per, "; "))
	}
	return &PCIHostDevice{PCIVendorSelector: sel, ResourceName: vgpu.ResourceName(types[0])},
		fmt.Sprintf("%s: the VFs that hold vGPU type %s (hosts %s), allocated by KubeVirt ≥ %s itself (no externalResourceProvider; PR #16890), not by NVIDIA's sandbox device plugin; a VF is a VM's vGPU only while its nvidia/current_vgpu_type is set, which does not survive a reboot (gpuprep vgpu apply --persist)",
			sel, types[0], strings.Join(m.types[types[0]], ", "), VendorVGPUSince)
}
