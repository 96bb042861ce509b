package kube

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// OperatorValues are the GPU Operator Helm values a fleet needs.
type OperatorValues struct {
	SandboxWorkloads struct {
		Enabled         bool   `json:"enabled" yaml:"enabled"`
		DefaultWorkload string `json:"defaultWorkload" yaml:"defaultWorkload"`
	} `json:"sandboxWorkloads" yaml:"sandboxWorkloads"`
	Driver              toggle `json:"driver" yaml:"driver"`
	SandboxDevicePlugin toggle `json:"sandboxDevicePlugin" yaml:"sandboxDevicePlugin"`
	VFIOManager         toggle `json:"vfioManager" yaml:"vfioManager"`
	VGPUManager         toggle `json:"vgpuManager" yaml:"vgpuManager"`
	VGPUDeviceManager   toggle `json:"vgpuDeviceManager" yaml:"vgpuDeviceManager"`
}

type toggle struct {
	Enabled bool `json:"enabled" yaml:"enabled"`
}

// Operator derives the Helm values from each host's mode (the --mode its
// report was made with): sandbox workloads on, the most common mode as the
// default workload (so fewest nodes need a label), the VFIO manager when any
// host is vm-passthrough, the vGPU manager and device manager when any host
// is vm-vgpu. A component the hosts have installed on the host itself is not
// deployed again, where it would conflict with it: the vGPU manager when
// every vm-vgpu host's report shows a host-installed one (vgpu.manager), the
// driver when every container host's report shows a host-installed NVIDIA
// driver (hostDriver); where only some have, a note names the nodes to keep
// the operator's daemonset off. Notes list the hosts whose label must differ
// from the default, and say why a component is off.
func Operator(hosts []Host) (*OperatorValues, []string, error) {
	count, byMode, err := hostModes(hosts)
	if err != nil {
		return nil, nil, err
	}
	v := &OperatorValues{}
	v.SandboxWorkloads.Enabled = true
	v.SandboxWorkloads.DefaultWorkload = string(preflight.Container)
	best := -1
	for _, m := range preflight.Modes { // fixed order breaks ties
		if count[string(m)] > best {
			best, v.SandboxWorkloads.DefaultWorkload = count[string(m)], string(m)
		}
	}
	v.SandboxDevicePlugin.Enabled = count[string(preflight.VMPassthrough)]+count[string(preflight.VMVGPU)] > 0
	v.VFIOManager.Enabled = count[string(preflight.VMPassthrough)] > 0
	v.VGPUDeviceManager.Enabled = count[string(preflight.VMVGPU)] > 0
	// the operator's vGPU manager / driver daemonsets against what the hosts
	// have installed themselves
	inst, err := hostInstalled(hosts)
	if err != nil {
		return nil, nil, err
	}
	nVGPU, nContainer := count[string(preflight.VMVGPU)], count[string(preflight.Container)]
	v.VGPUManager.Enabled = nVGPU > len(inst.mgrHosts)
	v.Driver.Enabled = nContainer == 0 || nContainer > len(inst.drvHosts)
	var notes []string
	for _, m := range preflight.Modes {
		hs := byMode[string(m)]
		if string(m) == v.SandboxWorkloads.DefaultWorkload || len(hs) == 0 {
			continue
		}
		sort.Strings(hs)
		notes = append(notes, fmt.Sprintf("label %s nvidia.com/gpu.workload.config=%s (gpuprep label --mode %s): %s", plural.N(len(hs), "node"), m, m, strings.Join(hs, ", ")))
	}
	notes = append(notes, inst.notes(v)...)
	if v.VGPUManager.Enabled {
		notes = append(notes, "vgpuManager needs your licensed vGPU manager image: set vgpuManager.repository, image and version (or install the manager on the hosts with gpuprep vgpu install and leave vgpuManager disabled)")
	}
	return v, notes, nil
}

// hostModes counts the hosts of each mode and names them; a report
// without a mode, or with one that is none, is refused.
func hostModes(hosts []Host) (count map[string]int, byMode map[string][]string, err error) {
	count, byMode = map[string]int{}, map[string][]string{}
	var unknown []string
	for _, h := range hosts {
		m := h.Report.Mode
		if m == "" {
			unknown = append(unknown, h.Name)
			continue
		}
		if _, err := preflight.ParseMode(m); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", h.Name, err)
		}
		count[m]++
		byMode[m] = append(byMode[m], h.Name)
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("reports of %s have no mode: make them with gpuprep check --mode MODE -o json", strings.Join(unknown, ", "))
	}
	return count, byMode, nil
}

// installed are the hosts that have the vGPU manager (vm-vgpu) or the
// NVIDIA driver (container) installed on the host itself, with the
// evidence of each.
type installed struct {
	mgrHosts, mgrEvidence, drvHosts, drvEvidence []string
}

// hostInstalled reads from the reports what the hosts installed
// themselves.
func hostInstalled(hosts []Host) (installed, error) {
	var in installed
	for _, h := range hosts {
		switch preflight.Mode(h.Report.Mode) {
		case preflight.VMVGPU:
			if err := managerFactsKnown(h); err != nil {
				return in, err
			}
			if ev, ok := hostVGPUManager(h.Report); ok {
				in.mgrHosts = append(in.mgrHosts, h.Name)
				in.mgrEvidence = append(in.mgrEvidence, h.Name+": "+ev)
			}
		case preflight.Container:
			if d := h.Report.HostDriver; d != nil {
				in.drvHosts = append(in.drvHosts, h.Name)
				in.drvEvidence = append(in.drvEvidence, h.Name+": "+strings.Join(d.Evidence, ", "))
			}
		}
	}
	return in, nil
}

// notes say why v's vGPU manager or driver is off, or which nodes to keep
// its daemonset off.
func (in installed) notes(v *OperatorValues) []string {
	var notes []string
	switch {
	case len(in.mgrHosts) > 0 && !v.VGPUManager.Enabled:
		notes = append(notes, "vgpuManager is disabled: every vm-vgpu host has the vGPU manager installed on the host itself, which the operator's vGPU manager daemonset would conflict with ("+strings.Join(in.mgrEvidence, "; ")+")")
	case len(in.mgrHosts) > 0:
		notes = append(notes, fmt.Sprintf("label %s nvidia.com/gpu.deploy.vgpu-manager=false: the vGPU manager is installed on the host, which the operator's vGPU manager daemonset would conflict with: %s", plural.N(len(in.mgrHosts), "node"), strings.Join(in.mgrEvidence, "; ")))
	}
	switch {
	case len(in.drvHosts) > 0 && !v.Driver.Enabled:
		notes = append(notes, "driver is disabled: every container host has the NVIDIA driver installed on the host itself, which the operator's driver daemonset would conflict with ("+strings.Join(in.drvEvidence, "; ")+")")
	case len(in.drvHosts) > 0:
		notes = append(notes, fmt.Sprintf("label %s nvidia.com/gpu.deploy.driver=false: the NVIDIA driver is installed on the host, which the operator's driver daemonset would conflict with: %s", plural.N(len(in.drvHosts), "node"), strings.Join(in.drvEvidence, "; ")))
	}
	return notes
}

// hostVGPUManager is the evidence, in a report's vgpu.manager finding, of a
// vGPU manager installed on the host itself: its files (facts.vgpuManager
// hostFiles; the operator's vGPU manager container loads the module too,
// but leaves no files on the host).
func hostVGPUManager(r *report.Report) (string, bool) {
	for _, f := range r.Findings {
		if f.Check != "vgpu.manager" || f.Facts == nil || f.Facts.VGPUManager == nil || len(f.Facts.VGPUManager.HostFiles) == 0 {
			continue
		}
		return "vgpu.manager " + string(f.Status) + ": " + f.Message, true
	}
	return "", false
}

// managerFactsKnown refuses a vm-vgpu report whose vgpu.manager finding has
// no facts: an older gpuprep made it, and its vGPU manager (on the host or
// not) can only be told from its message, which is not read.
func managerFactsKnown(h Host) error {
	for _, f := range h.Report.Findings {
		if f.Check == "vgpu.manager" && (f.Facts == nil || f.Facts.VGPUManager == nil) {
			return fmt.Errorf("%s: its report's vgpu.manager finding has no facts (an older gpuprep made it): make the report again with gpuprep check --mode vm-vgpu -o json", h.Name)
		}
	}
	return nil
}
