// Package kube turns readiness reports into the Kubernetes-side
// configuration a GPU node needs: the KubeVirt CR's permittedHostDevices and
// feature gates, and the NVIDIA GPU Operator's Helm values.
package kube

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/report"
)

// PCIHostDevice is a KubeVirt permittedHostDevices.pciHostDevices entry.
type PCIHostDevice struct {
	PCIVendorSelector string `json:"pciVendorSelector" yaml:"pciVendorSelector"`
	ResourceName      string `json:"resourceName" yaml:"resourceName"`
	// ExternalResourceProvider: a device plugin other than KubeVirt's
	// (NVIDIA's sandbox device plugin) advertises it; left out when
	// KubeVirt allocates the device itself (vendor-specific vGPU VFs)
	ExternalResourceProvider bool `json:"externalResourceProvider,omitempty" yaml:"externalResourceProvider,omitempty"`
}

// MediatedDevice is a permittedHostDevices.mediatedDevices entry.
type MediatedDevice struct {
	MdevNameSelector         string `json:"mdevNameSelector" yaml:"mdevNameSelector"`
	ResourceName             string `json:"resourceName" yaml:"resourceName"`
	ExternalResourceProvider bool   `json:"externalResourceProvider" yaml:"externalResourceProvider"`
}

// KubeVirtPatch is a merge patch for the KubeVirt CR.
type KubeVirtPatch struct {
	Spec struct {
		Configuration struct {
			// DeveloperConfiguration is nil where the KubeVirt release needs
			// no feature gate: a merge patch's list replaces the CR's whole
			DeveloperConfiguration *DeveloperConfiguration `json:"developerConfiguration,omitempty" yaml:"developerConfiguration,omitempty"`
			// MediatedDevicesConfiguration turns KubeVirt's own mdev
			// handling off where the release has the field (v1.8.0 on)
			MediatedDevicesConfiguration *MediatedDevicesConfiguration `json:"mediatedDevicesConfiguration,omitempty" yaml:"mediatedDevicesConfiguration,omitempty"`
			PermittedHostDevices         struct {
				PCIHostDevices  []PCIHostDevice  `json:"pciHostDevices,omitempty" yaml:"pciHostDevices,omitempty"`
				MediatedDevices []MediatedDevice `json:"mediatedDevices,omitempty" yaml:"mediatedDevices,omitempty"`
			} `json:"permittedHostDevices" yaml:"permittedHostDevices"`
		} `json:"configuration" yaml:"configuration"`
	} `json:"spec" yaml:"spec"`
}

// Host is one node's report, named for messages.
type Host struct {
	Name   string
	Report *report.Report
}

// Unevaluated is a host of a fleet that was not evaluated (unreachable, a
// failed check, ...): a view of the fleet without it is partial.
type Unevaluated struct{ Name, Status, Error string }

// ReadReports reads ReadinessReport or FleetReport JSON files: a fleet
// report contributes every host that was evaluated, and names the others.
// A host whose report holds a value that is not what it can be is refused
// (CheckHost): the error names the file, the host and the field.
func ReadReports(files []string) ([]Host, []Unevaluated, error) {
	var out []Host
	var missing []Unevaluated
	for _, f := range files {
		hs, ms, err := readReport(f)
		if err != nil {
			return nil, nil, err
		}
		out, missing = append(out, hs...), append(missing, ms...)
	}
	return out, missing, nil
}

// readReport reads the report file f ("-": standard input): its hosts
// evaluated, and those of a fleet report that were not.
func readReport(f string) ([]Host, []Unevaluated, error) {
	var b []byte
	var err error
	if f == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(f)
	}
	if err != nil {
		return nil, nil, err
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, nil, fmt.Errorf("%s: not a gpuprep JSON report: %w", f, err)
	}
	if head.APIVersion != report.APIVersion {
		return nil, nil, fmt.Errorf("%s: apiVersion %q, want %q", f, head.APIVersion, report.APIVersion)
	}
	switch head.Kind {
	case report.Kind:
		h, err := readHostReport(f, b)
		if err != nil {
			return nil, nil, err
		}
		return []Host{h}, nil, nil
	case "FleetReport":
		return readFleetReport(f, b)
	}
	return nil, nil, fmt.Errorf("%s: kind %q, want %s or FleetReport", f, head.Kind, report.Kind)
}

// readHostReport reads b, the ReadinessReport in file f: a report without
// a host name is named after its file.
func readHostReport(f string, b []byte) (Host, error) {
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Host{}, fmt.Errorf("%s: %w", f, err)
	}
	h, check := Host{Name: r.Host.Name, Report: &r}, CheckHost
	if h.Name == "" {
		h.Name, check = f, checkReport
	}
	if err := check(h); err != nil {
		return Host{}, fmt.Errorf("%s: %w", f, err)
	}
	return h, nil
}

// readFleetReport reads b, the FleetReport in file f.
func readFleetReport(f string, b []byte) ([]Host, []Unevaluated, error) {
	var fr struct {
		Hosts []struct {
			Name   string         `json:"name"`
			Status string         `json:"status"`
			Error  string         `json:"error"`
			Report *report.Report `json:"report"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(b, &fr); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f, err)
	}
	var out []Host
	var missing []Unevaluated
	for _, h := range fr.Hosts {
		if h.Report == nil {
			if err := checkHostName(h.Name); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, &RefusedError{Host: h.Name, Field: "name", Value: h.Name, Why: err.Error()})
			}
			missing = append(missing, Unevaluated{h.Name, h.Status, h.Error})
			continue
		}
		host := Host{Name: h.Name, Report: h.Report}
		if err := CheckHost(host); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, host)
	}
	return out, missing, nil
}

// KubeVirtOptions change what KubeVirt permits.
type KubeVirtOptions struct {
	// NVSwitch permits the NVSwitches of passthrough hosts, as gpuprep
	// plan/apply --nvswitch gives them to VMs with the GPUs. Without it,
	// only NVSwitches already on a VFIO driver are permitted: gpuprep
	// otherwise leaves them with the host's Fabric Manager.
	NVSwitch bool
	// Version is the cluster's KubeVirt (zero: DefaultKubeVirtVersion):
	// the vGPUs of the vendor-specific VFIO interface are permitted from
	// VendorVGPUSince on (vendorVGPUs)
	Version KubeVirtVersion
	// VersionFrom says where Version came from, for the note
	// ("" : --kubevirt-version)
	VersionFrom string
}

// KubeVirt builds the KubeVirt CR patch for the GPUs of hosts, permitting
// only what can be allocated in the mode each report was made for (--mode;
// a report without one is judged per GPU: a GPU set up for vGPU counts as
// vm-vgpu, any other as vm-passthrough): for vm-passthrough, one
// pciHostDevices entry per NVIDIA GPU model, with the resource name NVIDIA's
// sandbox device plugin advertises, and per NVSwitch model where NVSwitches
// go to VMs (o.NVSwitch, or already on a VFIO driver); for vm-vgpu, one
// mediatedDevices entry per mdev vGPU type and no entry for the GPU itself (a
// vGPU node's GPUs are not passed whole; on the vendor-specific VFIO
// framework the PF never is); nothing for container. The feature gates and
// the mdev switch the KubeVirt release wants (configureFor). A GPU (or NVSwitch) whose IOMMU group holds
// devices outside it (passthroughViable false in its report) cannot be passed
// through: its model is permitted when another GPU of it can be (an entry is
// per model, cluster-wide), and left out when none can; unusable names such
// GPUs ("host address (why)"). Notes tell what was left out and why, naming them.
func KubeVirt(hosts []Host, o KubeVirtOptions) (p *KubeVirtPatch, notes, unusable []string) {
	p = &KubeVirtPatch{}
	b := &kvBuild{o: o, models: map[string]*kvModel{}, mdevs: map[string]MediatedDevice{}, sriov: map[string][]string{}}
	for _, h := range hosts {
		b.host(h)
	}
	pcis, notes, unusable := b.pciModels()
	vfs, vfNotes := vendorVGPUs(hosts, o.Version.orDefault(), pcis)
	for _, d := range vfs {
		pcis[d.PCIVendorSelector] = d
	}
	for _, k := range slices.Sorted(maps.Keys(pcis)) {
		p.Spec.Configuration.PermittedHostDevices.PCIHostDevices = append(p.Spec.Configuration.PermittedHostDevices.PCIHostDevices, pcis[k])
	}
	for _, k := range slices.Sorted(maps.Keys(b.mdevs)) {
		p.Spec.Configuration.PermittedHostDevices.MediatedDevices = append(p.Spec.Configuration.PermittedHostDevices.MediatedDevices, b.mdevs[k])
	}
	notes = append(notes, p.configureFor(o.Version.orDefault(), o.VersionFrom, len(b.mdevs) > 0)...)
	if len(b.sriov) > 0 {
		notes = append(notes, fmt.Sprintf("%s on SR-IOV GPUs (vendor-specific VFIO, vGPU 17+ on kernel 6.8+; hosts %s) are not mediated devices: NVIDIA's sandbox device plugin cannot advertise them yet, so they are left out of mediatedDevices; KubeVirt ≥ %s allocates the VFs that hold one as PCI host devices (--kubevirt-version, now %s)",
			plural.N(len(b.sriov), "vGPU type"), strings.Join(b.sriov[slices.Sorted(maps.Keys(b.sriov))[0]], ", "), VendorVGPUSince, o.Version.orDefault()))
	}
	notes = append(notes, vfNotes...)
	notes = append(notes, b.hostNotes()...)
	if len(pcis) == 0 && len(b.mdevs) == 0 {
		notes = append(notes, "no NVIDIA GPU for VMs in the reports: permittedHostDevices is empty")
	}
	lists := "the permittedHostDevices lists in this patch replace those"
	if p.Spec.Configuration.DeveloperConfiguration != nil {
		lists = "the featureGates and permittedHostDevices lists in this patch replace those"
	}
	notes = append(notes, "a merge patch replaces lists whole: "+lists+" in the KubeVirt CR: add the feature gates and devices you already use before applying (or use --apply, which adds to them)")
	return p, notes, unusable
}

// kvModel is one GPU or NVSwitch model KubeVirt may permit as a PCI host
// device: the hosts that can pass it through (or may: IOMMU groups not
// known yet), and those that cannot ("host address (why)").
type kvModel struct {
	dev     PCIHostDevice
	ok      []string
	blocked []string
}

// kvBuild is what KubeVirt gathers from the hosts' reports.
type kvBuild struct {
	o      KubeVirtOptions
	models map[string]*kvModel
	mdevs  map[string]MediatedDevice
	sriov  map[string][]string // vGPU type on SR-IOV GPUs → hosts
	// the hosts left out, each for its note
	containerHosts, vgpuPFHosts, noTypesHosts, switchHosts []string
}

// host takes in the GPUs and NVSwitches of h's report.
func (b *kvBuild) host(h Host) {
	mode := h.Report.Mode
	if mode == "container" {
		b.containerHosts = appendOnce(b.containerHosts, h.Name)
		return
	}
	for _, g := range h.Report.GPUs {
		if g.VendorID != "10de" || g.ResourceName == "" {
			continue
		}
		if mode == "vm-vgpu" || mode == "" && g.VGPU != nil {
			b.vgpuTypes(h, g)
			continue
		}
		b.permit(h, g)
	}
	if mode == "vm-vgpu" {
		return // NVSwitches stay with the host's Fabric Manager
	}
	for _, s := range h.Report.NVSwitches {
		if s.VendorID != "10de" || s.ResourceName == "" {
			continue
		}
		if !b.o.NVSwitch && !pci.DriverIsVFIO(s.Driver) {
			b.switchHosts = appendOnce(b.switchHosts, h.Name)
			continue
		}
		b.permit(h, s)
	}
}

// vgpuTypes takes in the vGPU types of g, a GPU of the vGPU host h: mdev
// types as mediated devices, those of SR-IOV GPUs for their note.
func (b *kvBuild) vgpuTypes(h Host, g report.GPU) {
	b.vgpuPFHosts = appendOnce(b.vgpuPFHosts, h.Name)
	if g.VGPU == nil {
		b.noTypesHosts = appendOnce(b.noTypesHosts, h.Name)
		return
	}
	for _, t := range g.VGPU.Types {
		if g.VGPU.Interface == "mdev" {
			b.mdevs[t.Name] = MediatedDevice{MdevNameSelector: t.Name, ResourceName: t.ResourceName, ExternalResourceProvider: true}
		} else {
			b.sriov[t.Name] = appendOnce(b.sriov[t.Name], h.Name)
		}
	}
}

// permit counts g's model as passed through by h, or blocked there by its
// IOMMU group.
func (b *kvBuild) permit(h Host, g report.GPU) {
	sel := strings.ToUpper(g.VendorID + ":" + g.DeviceID)
	m := b.models[sel]
	if m == nil {
		m = &kvModel{dev: PCIHostDevice{PCIVendorSelector: sel, ResourceName: g.ResourceName, ExternalResourceProvider: true}}
		b.models[sel] = m
	}
	if g.IOMMUGroup == "" || g.PassthroughViable {
		m.ok = appendOnce(m.ok, h.Name)
		return
	}
	var foreign []string
	for _, d := range g.GroupDevices {
		if d.Role == "foreign" {
			foreign = append(foreign, d.Address)
		}
	}
	why := "IOMMU group " + g.IOMMUGroup + " not viable"
	if len(foreign) > 0 {
		why = "IOMMU group " + g.IOMMUGroup + " shared with " + strings.Join(foreign, ", ")
	}
	m.blocked = append(m.blocked, h.Name+" "+g.Address+" ("+why+")")
}

// pciModels are the models permitted (by selector), with notes on those
// some hosts or all cannot pass through, and those GPUs.
func (b *kvBuild) pciModels() (pcis map[string]PCIHostDevice, notes, unusable []string) {
	pcis = map[string]PCIHostDevice{}
	for _, sel := range slices.Sorted(maps.Keys(b.models)) {
		m := b.models[sel]
		unusable = append(unusable, m.blocked...)
		switch {
		case len(m.ok) > 0:
			pcis[sel] = m.dev
			if len(m.blocked) > 0 {
				notes = append(notes, fmt.Sprintf("%s (%s) is permitted for the hosts that can pass it through (%s), but these cannot: %s: a VM given one would not start (its IOMMU group holds devices outside the GPU; see check's iommu.groups): fix the grouping or label those nodes for another mode",
					sel, m.dev.ResourceName, strings.Join(m.ok, ", "), strings.Join(m.blocked, "; ")))
			}
		default:
			notes = append(notes, fmt.Sprintf("%s (%s) is left out of pciHostDevices: no host can pass it through: %s (its IOMMU group holds devices outside the GPU; see check's iommu.groups)",
				sel, m.dev.ResourceName, strings.Join(m.blocked, "; ")))
		}
	}
	return pcis, notes, unusable
}

// hostNotes say which hosts' GPUs or NVSwitches were left out, and why.
func (b *kvBuild) hostNotes() []string {
	var notes []string
	if len(b.vgpuPFHosts) > 0 {
		notes = append(notes, "the GPUs of vGPU hosts ("+strings.Join(b.vgpuPFHosts, ", ")+") are left out of pciHostDevices: a vm-vgpu node's GPUs are not passed to VMs whole (the PF of an SR-IOV vGPU GPU never is)")
	}
	if len(b.noTypesHosts) > 0 {
		notes = append(notes, "hosts "+strings.Join(b.noTypesHosts, ", ")+" (vm-vgpu) show no vGPU types yet (no vGPU manager set up): run kubevirt config again with reports made once it is")
	}
	if len(b.switchHosts) > 0 {
		notes = append(notes, "the NVSwitches of hosts "+strings.Join(b.switchHosts, ", ")+" are left out of pciHostDevices: they stay with the host's Fabric Manager, as gpuprep plan/apply leaves them without --nvswitch (give --nvswitch when VMs get whole boards with their NVLink fabric)")
	}
	if len(b.containerHosts) > 0 {
		notes = append(notes, "hosts "+strings.Join(b.containerHosts, ", ")+": reports made for --mode container, whose GPUs go to no VM: left out")
	}
	return notes
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
