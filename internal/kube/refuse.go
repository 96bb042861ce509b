package kube

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vgpu"
)

// RefusedError is a host's report refused: one of its values, which would
// go into an emitted document or its notes, is not what it can be.
type RefusedError struct {
	Host  string // the host's name, as given
	Field string // where in the report: "gpus[0].resourceName"
	Value string
	Why   string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("host %s: report refused: %s %s: %s; make the report again with gpuprep check -o json on the host",
		quoteValue(e.Host), e.Field, quoteValue(e.Value), e.Why)
}

// quoteValue shows a host's value in a message: quoted, its controls
// escaped (sanitize.Terminal), cut to 64 characters.
func quoteValue(s string) string {
	more := ""
	if r := []rune(s); len(r) > 64 {
		s, more = string(r[:64]), "…"
	}
	return `"` + sanitize.Terminal(s) + more + `"`
}

// CheckHost refuses a host whose report holds a value that is not what it
// can be: its name, its mode, and its GPUs' and NVSwitches' IDs,
// addresses, IOMMU groups, resource names and vGPU types (the values
// KubeVirt and Operator put into the documents, or name in their notes).
func CheckHost(h Host) error {
	if err := checkHostName(h.Name); err != nil {
		return &RefusedError{Host: h.Name, Field: "name", Value: h.Name, Why: err.Error()}
	}
	return checkReport(h)
}

// checkReport is CheckHost but for the host's name (where it is not the
// report's: a file's name).
func checkReport(h Host) error {
	refuse := func(field, value string, err error) error {
		if err == nil {
			return nil
		}
		return &RefusedError{Host: h.Name, Field: field, Value: value, Why: err.Error()}
	}
	if m := h.Report.Mode; m != "" {
		if _, err := preflight.ParseMode(m); err != nil {
			return refuse("mode", m, err)
		}
	}
	for _, l := range []struct {
		name string
		gs   []report.GPU
	}{{"gpus", h.Report.GPUs}, {"nvswitches", h.Report.NVSwitches}} {
		for i, g := range l.gs {
			if err := checkGPU(g, func(field, value string, err error) error {
				return refuse(fmt.Sprintf("%s[%d].%s", l.name, i, field), value, err)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGPU checks a GPU's (or NVSwitch's) values; refuse names the first
// that is not what it can be.
func checkGPU(g report.GPU, refuse func(field, value string, err error) error) error {
	type field struct {
		name, value string
		check       func(string) error
	}
	fields := []field{
		{"vendorID", g.VendorID, checkPCIID},
		{"deviceID", g.DeviceID, checkPCIID},
		{"address", g.Address, checkPCIAddress},
		{"iommuGroup", g.IOMMUGroup, checkIOMMUGroup},
	}
	if g.ResourceName != "" {
		fields = append(fields, field{"resourceName", g.ResourceName, checkResourceName})
	}
	for _, f := range fields {
		if err := refuse(f.name, f.value, f.check(f.value)); err != nil {
			return err
		}
	}
	for j, d := range g.GroupDevices {
		if err := refuse(fmt.Sprintf("groupDevices[%d].address", j), d.Address, checkPCIAddress(d.Address)); err != nil {
			return err
		}
	}
	if g.VGPU == nil {
		return nil
	}
	return checkVGPU(g.VendorID, g.VGPU, func(field, value string, err error) error { return refuse("vgpu."+field, value, err) })
}

// checkVGPU checks a GPU's vGPU interface and types.
func checkVGPU(vendor string, v *report.VGPU, refuse func(field, value string, err error) error) error {
	if v.Interface != "mdev" && v.Interface != "sriov" {
		return refuse("interface", v.Interface, fmt.Errorf("not a vGPU interface (mdev or sriov)"))
	}
	for k, t := range v.Types {
		at := fmt.Sprintf("types[%d].", k)
		if err := refuse(at+"id", t.ID, checkVGPUTypeID(v.Interface, vendor, t.ID)); err != nil {
			return err
		}
		if err := refuse(at+"name", t.Name, checkVGPUTypeName(t.Name)); err != nil {
			return err
		}
		if err := refuse(at+"resourceName", t.ResourceName, checkResourceName(t.ResourceName)); err != nil {
			return err
		}
		if want := vgpu.ResourceName(t.Name); t.ResourceName != want {
			return refuse(at+"resourceName", t.ResourceName, fmt.Errorf("not the resource name of type %s (%s)", quoteValue(t.Name), want))
		}
	}
	return checkVGPUInstances(v, refuse)
}

// checkVGPUInstances checks the vGPUs a GPU's report says exist: a VF's
// address and PCI IDs (pciVendorSelector is made of them), its type's id
// and name (resourceName is made of it).
func checkVGPUInstances(v *report.VGPU, refuse func(field, value string, err error) error) error {
	for k, in := range v.Instances {
		at := fmt.Sprintf("instances[%d].", k)
		if v.Interface != "sriov" {
			continue // mdevs: KubeVirt selects them by type name (types[])
		}
		checks := []struct {
			field, value string
			check        func(string) error
		}{
			{"device", in.Device, checkPCIAddress},
			{"vendorID", in.VendorID, checkPCIID},
			{"deviceID", in.DeviceID, checkPCIID},
			{"typeID", in.TypeID, func(s string) error { return checkVGPUTypeID("sriov", in.VendorID, s) }},
		}
		if !unknownTypeName(in) {
			checks = append(checks, struct {
				field, value string
				check        func(string) error
			}{"type", in.Type, checkVGPUTypeName})
		}
		for _, c := range checks {
			if err := refuse(at+c.field, c.value, c.check(c.value)); err != nil {
				return err
			}
		}
	}
	return nil
}
