package kube

import "github.com/gpuprep/gpuprep/report"

// PatchHost is the host as the KubeVirt patch reads it (KubeVirt,
// CheckHost): its report's host, mode, GPUs and NVSwitches, without the
// findings, which are most of a report. `kubevirt config -i INVENTORY`
// holds this much per host while the fleet streams in, not every host's
// whole report.
func PatchHost(name string, r *report.Report) Host {
	return Host{Name: name, Report: &report.Report{
		APIVersion: r.APIVersion, Kind: r.Kind, Host: r.Host, Mode: r.Mode,
		GPUs: r.GPUs, NVSwitches: r.NVSwitches,
	}}
}
