package kube

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// managerHost is a vm-vgpu host whose vgpu.manager finding has message msg and
// facts facts.
func managerHost(name, msg string, facts *preflight.Facts) Host {
	return Host{Name: name, Report: &report.Report{Mode: string(preflight.VMVGPU), Findings: []preflight.Finding{
		{Check: "vgpu.manager", Status: preflight.Pass, Subject: "nvidia vGPU manager", Message: msg, Facts: facts}}}}
}

// Whether a host has the vGPU manager installed on it is read from the
// finding's typed facts, never from its message: a message that reads like
// one without the facts does not count, and facts with a reworded message
// do.
func TestOperatorReadsVGPUManagerFacts(t *testing.T) {
	files := &preflight.Facts{VGPUManager: &preflight.VGPUManagerFacts{
		Evidence:  []string{"module nvidia_vgpu_vfio loaded", "/usr/bin/nvidia-vgpu-mgr"},
		HostFiles: []string{"/usr/bin/nvidia-vgpu-mgr"}, Version: "550.90.05", Source: "/var/lib/nvidia/log", Format: "run"}}
	moduleOnly := &preflight.Facts{VGPUManager: &preflight.VGPUManagerFacts{Evidence: []string{"module nvidia_vgpu_vfio loaded"}}}

	v, notes, err := Operator([]Host{managerHost("a", "the manager is there (reworded)", files)})
	require.NoError(t, err)
	require.False(t, v.VGPUManager.Enabled, notes)
	require.Contains(t, strings.Join(notes, "\n"), "a: vgpu.manager pass: the manager is there (reworded)")

	v, notes, err = Operator([]Host{managerHost("c", "installed: module nvidia_vgpu_vfio loaded; nvidia-vgpu-mgr running", moduleOnly)})
	require.NoError(t, err)
	require.True(t, v.VGPUManager.Enabled, notes)

	// no facts at all (a report an older gpuprep made, whose message says
	// installed): refused, not guessed either way
	_, _, err = Operator([]Host{managerHost("b", "installed: /usr/bin/nvidia-vgpu-mgr; nvidia-vgpu-mgr running", nil)})
	require.EqualError(t, err, "b: its report's vgpu.manager finding has no facts (an older gpuprep made it): make the report again with gpuprep check --mode vm-vgpu -o json")
}
