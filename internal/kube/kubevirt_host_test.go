package kube

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// What the KubeVirt patch is made of does not change when a fleet's hosts
// are held as PatchHost: the same patch, notes and unusable GPUs, for every
// mode and release, as from the whole reports.
func TestPatchHostKeepsWhatThePatchReads(t *testing.T) {
	vgpu := sampleReport()
	vgpu.GPUs[0].VGPU = &report.VGPU{Interface: "sriov", Types: []report.VGPUType{{Name: "NVIDIA H200X-70C", ResourceName: "nvidia.com/NVIDIA_H200X-70C"}}}
	blocked := sampleReport()
	blocked.GPUs[1].GroupDevices = []report.GroupDevice{{Address: "0000:00:1f.0"}}
	blocked.GPUs[1].IOMMUGroup = "7"
	blocked.NVSwitches = []report.GPU{{VendorID: "10de", DeviceID: "22a3", Address: "0000:05:00.0"}}
	var full, held []Host
	for i, r := range []*report.Report{sampleReport(), vgpu, blocked} {
		for _, m := range []string{"", string(preflight.Container), string(preflight.VMPassthrough), string(preflight.VMVGPU)} {
			r := *r
			r.Mode = m
			r.Findings = []preflight.Finding{{Check: "vfio.binding", Status: preflight.Fail, Message: "on nvidia"}}
			name := string(rune('a'+i)) + m
			full = append(full, Host{Name: name, Report: &r})
			held = append(held, PatchHost(name, &r))
			require.Nil(t, held[len(held)-1].Report.Findings)
			require.Equal(t, CheckHost(full[len(full)-1]), CheckHost(held[len(held)-1]), name)
		}
	}
	for _, v := range []string{"v1.3.0", "v1.7.0", "v1.9.0"} {
		ver, err := ParseKubeVirtVersion(v)
		require.NoError(t, err)
		for _, nv := range []bool{false, true} {
			o := KubeVirtOptions{Version: ver, NVSwitch: nv}
			p1, n1, u1 := KubeVirt(full, o)
			p2, n2, u2 := KubeVirt(held, o)
			require.Equal(t, p1, p2, v)
			require.Equal(t, n1, n2, v)
			require.Equal(t, u1, u2, v)
		}
	}
}
