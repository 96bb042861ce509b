// Package report turns a preflight run into gpuprep's outputs: the stable
// JSON ReadinessReport (apiVersion gpuprep/v1) and the terminal report.
package report

import (
	"encoding/json"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/deviceplugin"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
	"github.com/gpuprep/gpuprep/preflight"
)

// APIVersion and Kind identify the JSON document.
const (
	APIVersion = "gpuprep/v1"
	Kind       = "ReadinessReport"
)

// Report is the ReadinessReport. Field names and meanings are stable; new
// fields may be added.
type Report struct {
	APIVersion string                                   `json:"apiVersion"`
	Kind       string                                   `json:"kind"`
	Host       preflight.HostInfo                       `json:"host"`
	Mode       string                                   `json:"mode"`
	Ready      bool                                     `json:"ready"`
	Modes      map[preflight.Mode]*preflight.ModeResult `json:"modes"`
	Selection  string                                   `json:"selection"`
	GPUs       []GPU                                    `json:"gpus"`
	NVSwitches []GPU                                    `json:"nvswitches"`
	// HostDriver is set when an NVIDIA driver is installed on the host
	// itself.
	HostDriver *HostDriver         `json:"hostDriver,omitempty"`
	Findings   []preflight.Finding `json:"findings"`
	Summary    preflight.Summary   `json:"summary"`
}

// GPU describes one selected GPU (or NVSwitch).
type GPU struct {
	Address  string `json:"address"`
	VendorID string `json:"vendorID"`
	DeviceID string `json:"deviceID"`
	Class    string `json:"class"`
	Name     string `json:"name"`
	// ResourceName is what NVIDIA's sandbox device plugin advertises for the
	// GPU once it is on vfio-pci (NVIDIA devices only).
	ResourceName      string        `json:"resourceName,omitempty"`
	Driver            string        `json:"driver"`
	IOMMUGroup        string        `json:"iommuGroup"`
	PassthroughViable bool          `json:"passthroughViable"`
	GroupDevices      []GroupDevice `json:"groupDevices"`
	// VGPU is the GPU's vGPU state, when a vGPU interface is set up.
	VGPU *VGPU `json:"vgpu,omitempty"`
}

// VGPU is what a GPU offers for vGPU.
type VGPU struct {
	// Interface is "mdev" (mediated devices) or "sriov" (the vendor-specific
	// VFIO framework of vGPU 17+ on kernel 6.8+: VFs with nvidia/creatable_vgpu_types).
	Interface string     `json:"interface"`
	TotalVFs  int        `json:"totalVFs,omitempty"`
	NumVFs    int        `json:"numVFs,omitempty"`
	Types     []VGPUType `json:"types"`
	// Parents are the devices vGPUs are created on, with their own free
	// instances (omitted when not known)
	Parents []VGPUParent `json:"parents,omitempty"`
	// Instances are the vGPUs that exist (omitted when none)
	Instances []VGPUInstance `json:"instances,omitempty"`
}

// VGPUType is a vGPU type; ResourceName is what KubeVirt's mediated-device
// resource is called (nvidia.com/ + the type name with spaces as "_").
type VGPUType struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Available is the GPU's free instances of the type; null when not
	// known (a parent's count could not be read): never a number that is
	// not a count (see FreeCount)
	Available    *int   `json:"available"`
	ResourceName string `json:"resourceName"`
}

// GroupDevice is a member of a GPU's IOMMU group.
type GroupDevice struct {
	Address string `json:"address"`
	Class   string `json:"class"`
	Driver  string `json:"driver"`
	Role    string `json:"role"`
}

// Build assembles the report of a run.
func Build(e *preflight.Env, res *preflight.Result, mode preflight.Mode) *Report {
	r := &Report{
		APIVersion: APIVersion, Kind: Kind, Host: e.Host, Mode: string(mode),
		Modes: map[preflight.Mode]*preflight.ModeResult{}, Selection: e.Selector.String(),
		GPUs: []GPU{}, NVSwitches: []GPU{}, Findings: res.Findings, Summary: res.Summarize(),
	}
	if r.Findings == nil {
		r.Findings = []preflight.Finding{}
	}
	r.Ready = true
	for _, m := range preflight.Modes {
		if mode != "" && m != mode {
			continue
		}
		r.Modes[m] = res.Modes[m]
		r.Ready = r.Ready && res.Modes[m].Ready
	}
	sel := e.Selected()
	for _, g := range e.GPUs {
		r.GPUs = append(r.GPUs, gpu(e, g, sel))
	}
	for _, s := range e.NVSwitches {
		r.NVSwitches = append(r.NVSwitches, gpu(e, s, sel))
	}
	resourceNames(r.GPUs)
	resourceNames(r.NVSwitches)
	r.HostDriver = hostDriver(e.Root, e.Host.Kernel)
	return r
}

// HostDriver is the evidence of an NVIDIA driver (or vGPU manager, which is
// one) installed on the host itself, not by the GPU Operator's driver
// container, whose files stay in its own root (/run/nvidia/driver): the
// host's nvidia-smi, and nvidia.ko among the running kernel's modules.
type HostDriver struct {
	Evidence []string `json:"evidence"`
}

func hostDriver(root *host.Root, kernel string) *HostDriver {
	var ev []string
	if root.Exists("/usr/bin/nvidia-smi") {
		ev = append(ev, "/usr/bin/nvidia-smi")
	}
	if kernel != "" {
		dir := "/lib/modules/" + kernel
		dep, _ := root.ReadFile(dir + "/modules.dep")
		for _, l := range strings.Split(string(dep), "\n") {
			mod, _, _ := strings.Cut(l, ":")
			if b := path.Base(mod); b == "nvidia.ko" || strings.HasPrefix(b, "nvidia.ko.") {
				ev = append(ev, dir+"/"+mod)
				break
			}
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return &HostDriver{Evidence: ev}
}

// resourceNames fills in the resource names of the sandbox device plugin
// release the GPU Operator deploys (deviceplugin.Default).
func resourceNames(gs []GPU) {
	rel, err := deviceplugin.Lookup(deviceplugin.Default)
	if err != nil {
		return // the embedded table is tested to parse
	}
	nameResources(gs, rel)
}

// NameResources names the report's NVIDIA GPUs and NVSwitches as sandbox
// device plugin release rel advertises them. A device kubelet would refuse
// the plugin's name for gets none (the plugin cannot advertise it): the
// returned notes say which, once per device ID.
func (r *Report) NameResources(rel deviceplugin.Release) []string {
	return append(nameResources(r.GPUs, rel), nameResources(r.NVSwitches, rel)...)
}

func nameResources(gs []GPU, rel deviceplugin.Release) []string {
	var notes []string
	for i := range gs {
		if gs[i].VendorID != pci.VendorNVIDIA {
			continue
		}
		n, err := rel.ResourceName(gs[i].DeviceID)
		if err != nil {
			n = ""
			if !slices.Contains(notes, err.Error()) {
				notes = append(notes, err.Error())
			}
		}
		gs[i].ResourceName = n
	}
	return notes
}

func gpu(e *preflight.Env, d *pci.Device, sel []*pci.Device) GPU {
	v := iommu.Viability(e.Inv, d, sel)
	g := GPU{Address: d.Address, VendorID: d.VendorID, DeviceID: d.DeviceID, Class: d.Class, Name: d.DisplayName(),
		Driver: d.Driver, IOMMUGroup: d.IOMMUGroup, PassthroughViable: v.Viable, GroupDevices: []GroupDevice{}}
	for _, m := range v.Members {
		g.GroupDevices = append(g.GroupDevices, GroupDevice{Address: m.Dev.Address, Class: m.Dev.Class, Driver: m.Dev.Driver, Role: string(m.Role)})
	}
	g.VGPU = NewVGPU(e.Root, e.Inv, e.VGPU(d.Address))
	return g
}

// JSON writes the report as indented JSON.
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// CompactJSON writes the report as JSON on one line: the same document as
// JSON without its indentation (a third of the bytes for a fleet client to
// read, or for a log shipper).
func CompactJSON(w io.Writer, r *Report) error {
	return json.NewEncoder(w).Encode(r)
}
