package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

func TestAgentUsage(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	orig := tree(t, root)
	for _, args := range [][]string{
		{"agent"},
		{"agent", "--node", "n1"},
		{"agent", "--node", "n1", "--mode", "vm"},
		{"agent", "--metrics", ":0", "--once"},
		{"agent", "--feature-file", "default", "--interval", "10ms"},
		{"agent", "--feature-file", "default", "--skip", "no.such.check"},
		{"agent", "--feature-file", "default", "--ignore", "no.such.check", "--once"},
	} {
		_, errs, code := gpuprep(t, append(args, "--root", root)...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errs)
	}
	require.Equal(t, orig, tree(t, root), "a usage error publishes nothing")
}

// --once --feature-file writes the file NFD reads, atomically, and
// rewrites it as the node changes; nothing else is left in the directory.
func TestAgentOnceWritesTheFeatureFile(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	out, errs, code := gpuprep(t, "agent", "--once", "--root", root, "--feature-file", "default", "--nfd-ttl", "20m")
	require.Equal(t, 0, code, out+errs)
	p := filepath.Join(root, NFDFeatureFile)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Contains(t, string(b), "feature.node.kubernetes.io/gpuprep.ready.vm-passthrough=true\n")
	exp, ok := strings.CutPrefix(strings.Split(string(b), "\n")[1], "# +expiry-time=")
	require.True(t, ok, string(b))
	e, err := time.Parse(time.RFC3339, exp)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(20*time.Minute), e, time.Minute)

	require.NoError(t, os.Remove(filepath.Join(root, "dev/kvm")))
	_, errs, code = gpuprep(t, "agent", "--once", "--root", root, "--feature-file", "default")
	require.Equal(t, 0, code, errs)
	b, _ = os.ReadFile(p)
	require.Contains(t, string(b), "gpuprep.ready.vm-passthrough=false\n")
	names, _ := os.ReadDir(filepath.Dir(p))
	require.Len(t, names, 1)

	// a symlink in its place is refused, not followed
	require.NoError(t, os.Remove(p))
	require.NoError(t, os.Symlink("/etc/passwd", p))
	_, errs, code = gpuprep(t, "agent", "--once", "--root", root, "--feature-file", "default")
	require.Equal(t, exitUnknown, code)
	require.Contains(t, errs, "feature file "+NFDFeatureFile)
	target, err := os.Readlink(p)
	require.NoError(t, err)
	require.Equal(t, "/etc/passwd", target, "the link stays as it was")
}

func TestConditionFor(t *testing.T) {
	r := &report.Report{Modes: map[preflight.Mode]*preflight.ModeResult{
		preflight.VMPassthrough: {Blockers: []string{"iommu.cmdline"}},
		preflight.Container:     {Ready: true},
		preflight.VMVGPU:        {Unknown: []string{"vgpu.types"}},
	}, Findings: []preflight.Finding{
		{Check: "iommu.cmdline", Status: preflight.Fail, Subject: "kernel", Message: "intel_iommu=on\nmissing\x1b[31m", Modes: preflight.VMModes},
		{Check: "iommu.cmdline", Status: preflight.Pass, Subject: "grub", Message: "fine", Modes: preflight.VMModes},
	}}
	c := conditionFor(r, preflight.VMPassthrough, nil)
	require.Equal(t, "False", c.Status)
	require.NotContains(t, c.Message, "\x1b")
	require.NotContains(t, c.Message, "\n")
	require.Contains(t, c.Message, "iommu.cmdline (kernel: intel_iommu=on missing")
	require.NotContains(t, c.Message, "fine")
	require.Equal(t, "True", conditionFor(r, preflight.Container, nil).Status)
	require.Equal(t, "Unknown", conditionFor(r, preflight.VMVGPU, nil).Status)
	c = conditionFor(nil, preflight.Container, os.ErrPermission)
	require.Equal(t, "Unknown", c.Status)
	require.Equal(t, "EvaluationFailed", c.Reason)
}

// check -o nfd prints the feature file (exit code as for any format); a
// saved host report renders to it; a fleet report is refused.
func TestCheckAndRenderNFD(t *testing.T) {
	root := fixtureRoot(t, "vfio-bound")
	out, errs, code := gpuprep(t, "check", "--root", root, "-o", "nfd", "--nfd-ttl", "0")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "+expiry-time", "--nfd-ttl 0: no expiry")
	require.Contains(t, out, "\nfeature.node.kubernetes.io/gpuprep.ready.vm-passthrough=true\n")
	require.Contains(t, out, "\nfeature.node.kubernetes.io/gpuprep.version=dev\n")
	_, _, code = gpuprep(t, "check", "--root", root, "-o", "nfd", "--mode", "vm-vgpu")
	require.Equal(t, exitNotReady, code)

	js, _, _ := gpuprep(t, "check", "--root", root, "-o", "json")
	f := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, os.WriteFile(f, []byte(js), 0o644))
	got, errs, code := gpuprep(t, "report", "render", "-o", "nfd", f)
	require.Equal(t, 0, code, errs)
	require.Contains(t, got, "# +expiry-time=")
	require.Contains(t, got, "\nfeature.node.kubernetes.io/gpuprep.ready.vm-passthrough=true\n")

	fleet := filepath.Join(t.TempDir(), "f.json")
	require.NoError(t, os.WriteFile(fleet, []byte(`{"apiVersion":"gpuprep/v1","kind":"FleetReport","hosts":[]}`), 0o644))
	_, errs, code = gpuprep(t, "report", "render", "-o", "nfd", fleet)
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "nfd, for a host's report")
}
