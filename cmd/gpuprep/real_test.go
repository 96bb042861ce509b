package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/snapshot"
)

// The real node: an NVIDIA H200 (10de:2335, driver 580.159.04) in a Firecracker microVM (kernel
// 6.18.44-fc-v973-gpu, Ubuntu 24.04), the lent device machine of 2026-11-30. scripts/device-capture.sh ran there:
// gpuprep's read-only commands on the live node (their output is in testdata/device/h200-vm-2026-11-30) and a
// snapshot of what gpuprep reads (testdata/roots/real/h200-vm.tar.gz; the virtio devices' children and the GPU's
// serial number left out). There, `gpuprep check --root SNAPSHOT` printed what the live run printed, but for the
// root's path in one error message (since fixed: TestRootErrorsNameHostPaths).
const (
	realH200Root = "../../testdata/roots/real/h200-vm.tar.gz"
	realH200Live = "../../testdata/device/h200-vm-2026-11-30"
)

func realRoot(t *testing.T, tarball string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, snapshot.Unpack(tarball, dir))
	return dir
}

type verdict struct {
	Check, Status, Subject string
	Modes                  []string
}

// addedSince inserts the findings checks have gained since the live runs:
// vfio.binding judges the GPU's driver for vm-vgpu too (nvidia: a pass),
// before the run's first vfio.binding (or, run for vm-vgpu alone,
// vgpu.manager) finding. mode is the run's --mode.
func addedSince(want []verdict, mode, gpu string) []verdict {
	if mode != "" && mode != "vm-vgpu" {
		return want
	}
	for i, v := range want {
		if v.Check == "vfio.binding" || v.Check == "vgpu.manager" {
			add := verdict{Check: "vfio.binding", Status: "pass", Subject: gpu, Modes: []string{"vm-vgpu"}}
			return append(want[:i:i], append([]verdict{add}, want[i:]...)...)
		}
	}
	return want
}

// intelDefaultUnread is the change since the live runs to iommu.cmdline's
// intel_iommu=on: the node has neither /boot/config-6.18.44-fc-v973-gpu nor
// /proc/config.gz, so whether its kernel turns the Intel IOMMU on by
// default is unknown, a warn saying so (the live run called the argument
// needed, a fail: TestIntelDefaultUnreadableSaysWhatWasMissing); with that
// fail gone iommu.cmdline blocks no mode (its iommu=pt finding is a warn).
func intelDefaultUnread(top map[string]any, want []verdict) {
	for i := range want {
		if want[i].Check == "iommu.cmdline" && want[i].Subject == "intel_iommu=on" && want[i].Status == "fail" {
			want[i].Status = "warn"
		}
	}
	modes, _ := top["modes"].(map[string]any)
	for _, m := range modes {
		mode, _ := m.(map[string]any)
		blockers, _ := mode["blockers"].([]any)
		if i := slices.Index(blockers, any("iommu.cmdline")); i >= 0 {
			mode["blockers"] = slices.Delete(slices.Clone(blockers), i, i+1)
		}
	}
}

func verdicts(t *testing.T, report []byte) (map[string]any, []verdict) {
	t.Helper()
	var r struct {
		Modes map[string]any `json:"modes"`
		GPUs  []struct {
			Address, DeviceID, Driver, IOMMUGroup, Name string
		} `json:"gpus"`
		Findings []verdict `json:"findings"`
	}
	require.NoError(t, json.Unmarshal(report, &r))
	for i := range r.GPUs {
		// the name's wording, not a verdict: the live runs were recorded
		// before the display name gained the vendor ("NVIDIA GH100 […]")
		r.GPUs[i].Name = strings.TrimPrefix(r.GPUs[i].Name, "NVIDIA ")
	}
	return map[string]any{"modes": r.Modes, "gpus": r.GPUs}, r.Findings
}

// gpuprep check against the snapshot of the real node gives the verdicts the live run gave there, check by check
// and subject by subject, but for the changes made since from what that run showed, each named here.
func TestRealH200SnapshotGivesTheLiveVerdicts(t *testing.T) {
	root := realRoot(t, realH200Root)
	changed := map[string]string{
		// /dev/kvm there came from kvm_pvm (a paravirtual KVM) with no vmx flag: not the hardware virtualization
		// KubeVirt's guests need. The live run passed it.
		"kvm.device /dev/kvm": "warn",
	}
	for _, tc := range []struct{ file, mode string }{
		{"check.json", ""}, {"check-container.json", "container"}, {"check-vm-passthrough.json", "vm-passthrough"}, {"check-vm-vgpu.json", "vm-vgpu"},
	} {
		live, err := os.ReadFile(filepath.Join(realH200Live, tc.file))
		require.NoError(t, err)
		args := []string{"check", "--root", root, "-o", "json"}
		if tc.mode != "" {
			args = append(args, "--mode", tc.mode)
		}
		out, errs, _ := gpuprep(t, args...)
		require.Empty(t, withoutJudged(errs))
		liveTop, want := verdicts(t, live)
		gotTop, got := verdicts(t, []byte(out))
		unreadOnSnapshot(liveTop, want, "vfio.modules")
		nouveauUnreadOnSnapshot(want)
		intelDefaultUnread(liveTop, want)
		require.Equal(t, liveTop, gotTop, tc.file)
		for i := range want {
			if s, ok := changed[want[i].Check+" "+want[i].Subject]; ok {
				want[i].Status = s
			}
		}
		require.Equal(t, addedSince(want, tc.mode, "0000:00:06.0"), got, tc.file)
	}

	// vfio status: the same, and now says why the GPU is not viable (it once blamed a foreign endpoint).
	live, err := os.ReadFile(filepath.Join(realH200Live, "vfio-status.json"))
	require.NoError(t, err)
	out, errs, code := gpuprep(t, "vfio", "status", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var want, got map[string]any
	require.NoError(t, json.Unmarshal(live, &want))
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	g := got["gpus"].([]any)[0].(map[string]any)
	require.Equal(t, "no IOMMU group: the IOMMU is not active in the kernel (see gpuprep check --mode vm-passthrough)", g["notViable"])
	delete(g, "notViable")
	// one display name for a GPU everywhere now (pci.DisplayName): the
	// vendor's short name, not "NVIDIA Corporation" as vfio status once said
	require.Equal(t, "NVIDIA GH100 [H200 SXM 141GB]", g["name"])
	w := want["gpus"].([]any)[0].(map[string]any)
	require.Equal(t, "NVIDIA Corporation GH100 [H200 SXM 141GB]", w["name"])
	w["name"] = g["name"]
	require.Equal(t, want, got)
}

// The same kind of node snapshotted by `gpuprep snapshot` itself (on the lent machine, with this session's last
// binary: "Reproduced", and check against the snapshot printed the live report byte for byte there): check against
// it gives the verdicts, GPUs and readiness the live run gave. (Verdicts, not text: a later wording change must
// not need a device to re-record this.)
func TestRealH200GpuprepSnapshotGivesTheLiveReport(t *testing.T) {
	root := realRoot(t, "../../testdata/roots/real/h200-vm-gpuprep-snapshot.tar.gz")
	live, err := os.ReadFile(filepath.Join(realH200Live, "check-live-at-gpuprep-snapshot.json"))
	require.NoError(t, err)
	out, errs, _ := gpuprep(t, "check", "--root", root, "-o", "json")
	require.Empty(t, withoutJudged(errs))
	liveTop, want := verdicts(t, live)
	gotTop, got := verdicts(t, []byte(out))
	unreadOnSnapshot(liveTop, want, "vfio.modules")
	nouveauUnreadOnSnapshot(want)
	intelDefaultUnread(liveTop, want)
	require.Equal(t, liveTop, gotTop)
	require.Equal(t, addedSince(want, "", "0000:00:06.0"), got)
	require.NotEmpty(t, want)
}

// withoutJudged is check's stderr without its "judged:" line, which check
// without --mode prints on a node with no workload label (these snapshots).
func withoutJudged(errs string) string {
	var out []string
	for _, l := range strings.SplitAfter(errs, "\n") {
		if !strings.HasPrefix(l, "gpuprep: judged: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
