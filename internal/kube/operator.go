package kube

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/preflight"
)

// OperatorValues are the GPU Operator Helm values a fleet needs.
type OperatorValues struct {
	SandboxWorkloads struct {
		Enabled         bool   `json:"enabled" yaml:"enabled"`
		DefaultWorkload string `json:"defaultWorkload" yaml:"defaultWorkload"`
	} `json:"sandboxWorkloads" yaml:"sandboxWorkloads"`
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
// is vm-vgpu. Notes list the hosts whose label must differ from the default.
func Operator(hosts []Host) (*OperatorValues, []string, error) {
	count := map[string]int{}
	byMode := map[string][]string{}
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
	v.VGPUManager.Enabled = count[string(preflight.VMVGPU)] > 0
	v.VGPUDeviceManager.Enabled = count[string(preflight.VMVGPU)] > 0
	var notes []string
	for _, m := range preflight.Modes {
		hs := byMode[string(m)]
		if string(m) == v.SandboxWorkloads.DefaultWorkload || len(hs) == 0 {
			continue
		}
		sort.Strings(hs)
		notes = append(notes, fmt.Sprintf("label %d node(s) nvidia.com/gpu.workload.config=%s (gpuprep label --mode %s): %s", len(hs), m, m, strings.Join(hs, ", ")))
	}
	if v.VGPUManager.Enabled {
		notes = append(notes, "vgpuManager needs your licensed vGPU manager image: set vgpuManager.repository, image and version (or install the manager on the hosts with gpuprep vgpu install and leave vgpuManager disabled)")
	}
	return v, notes, nil
}
