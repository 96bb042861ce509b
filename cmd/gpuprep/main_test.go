package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite golden files")

func fixtureRoot(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(name, dir))
	return dir
}

func gpuprep(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(args, &out, &errb)
	return out.String(), errb.String(), code
}

// gpuprepWith runs gpuprep as gpuprep does, through the deps d.
func gpuprepWith(t *testing.T, d *deps, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := executeWith(args, &out, &errb, &globals{root: os.Getenv("GPUPREP_ROOT"), deps: d})
	return out.String(), errb.String(), code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "missing golden file: run go test ./cmd/gpuprep -update")
	require.Equal(t, string(want), got)
}

func TestGoldenReports(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	t.Setenv("COLUMNS", "80") // as where neither a terminal nor COLUMNS says a width
	for _, sc := range []string{"hgx-h200", "consumer-shared-group", "reboot-pending", "vfio-bound", "sriov-vgpu"} {
		t.Run(sc, func(t *testing.T) {
			root := fixtureRoot(t, sc)
			out, _, _ := gpuprep(t, "check", "--root", root)
			golden(t, sc+".txt", out)
			out, _, _ = gpuprep(t, "check", "--root", root, "-o", "json")
			golden(t, sc+".json", out)
		})
	}
	t.Run("real-h200-vm", func(t *testing.T) {
		root := realRoot(t, realH200Root)
		out, _, _ := gpuprep(t, "check", "--root", root)
		golden(t, "real-h200-vm.txt", out)
		out, _, _ = gpuprep(t, "check", "--root", root, "-o", "json")
		golden(t, "real-h200-vm.json", out)
	})
}

func TestJSONSchema(t *testing.T) {
	out, _, code := gpuprep(t, "check", "--root", fixtureRoot(t, "turing-multifunction"), "-o", "json", "--mode", "vm-passthrough")
	require.Equal(t, 1, code)
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Equal(t, "gpuprep/v1", r["apiVersion"])
	require.Equal(t, "ReadinessReport", r["kind"])
	require.Equal(t, "vm-passthrough", r["mode"])
	require.Equal(t, false, r["ready"])
	for _, k := range []string{"name", "os", "kernel"} {
		require.Contains(t, r["host"], k)
	}
	modes := r["modes"].(map[string]any)
	require.Len(t, modes, 1)
	require.Equal(t, []any{"vfio.binding"}, modes["vm-passthrough"].(map[string]any)["blockers"])
	gpus := r["gpus"].([]any)
	require.Len(t, gpus, 1)
	g := gpus[0].(map[string]any)
	require.Equal(t, "0000:01:00.0", g["address"])
	require.Equal(t, "10de", g["vendorID"])
	require.Equal(t, "1e87", g["deviceID"])
	require.Equal(t, "2", g["iommuGroup"])
	require.Equal(t, true, g["passthroughViable"])
	require.Len(t, g["groupDevices"], 4)
	for _, f := range r["findings"].([]any) {
		for _, k := range []string{"check", "status", "subject", "message", "remedy", "fixable"} {
			require.Contains(t, f, k)
		}
	}
	for _, k := range []string{"pass", "warn", "fail", "skip", "error"} {
		require.Contains(t, r["summary"], k)
	}
}

func TestExitCodes(t *testing.T) {
	hgx := fixtureRoot(t, "hgx-h200")
	vfio := fixtureRoot(t, "vfio-bound")
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"check", "--root", hgx}, 3, ""}, // no --mode, no label: nothing judged
		{[]string{"check", "--root", hgx, "--mode", "container"}, 0, ""},
		{[]string{"check", "--root", hgx, "--mode", "vm-passthrough"}, 1, ""},
		{[]string{"check", "--root", hgx, "--mode", "vm-passthrough", "--ignore", "vfio.binding"}, 0, ""},
		{[]string{"check", "--root", hgx, "--mode", "vm-passthrough", "--ignore", "all"}, 0, ""},
		{[]string{"check", "--root", vfio, "--mode", "vm-passthrough"}, 0, ""},
		{[]string{"check", "--root", hgx, "--mode", "vm"}, 2, `unknown mode "vm"`},
		{[]string{"check", "--root", hgx, "--select", "0000:ff:00.0"}, 2, "--select 0000:ff:00.0: no such PCI device"},
		{[]string{"check", "--root", hgx, "--select", "nvidia"}, 2, `--select "nvidia"`},
		{[]string{"check", "--root", hgx, "--skip", "nope"}, 2, "--skip nope: no such check"},
		{[]string{"check", "--root", hgx, "-o", "yaml"}, 2, "--output"},
		{[]string{"check", "--root", "/nonexistent"}, 2, "--root"},
		{[]string{"check", "--bogus"}, 2, "unknown flag"},
		{[]string{"frobnicate"}, 2, "unknown command"},
	}
	for _, c := range cases {
		_, stderr, code := gpuprep(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		if c.err != "" {
			require.Contains(t, stderr, c.err, "%v", c.args)
		}
	}
}

func TestUnevaluableCheckExits3(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	require.NoError(t, os.Remove(filepath.Join(root, "proc/interrupts")))
	out, _, code := gpuprep(t, "check", "--root", root, "--mode", "vm-vgpu", "--skip", "vgpu.manager,vgpu.types")
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "UNKNOWN")
	// A definite failure outranks an unevaluated check.
	_, _, code = gpuprep(t, "check", "--root", root, "--mode", "vm-vgpu")
	require.Equal(t, 1, code)
}

func TestChecksListsEveryCheckWithModes(t *testing.T) {
	out, _, code := gpuprep(t, "checks")
	require.Equal(t, 0, code)
	for _, id := range []string{"gpu.present", "cpu.virtualization", "kvm.device", "iommu.firmware", "iommu.kernel", "iommu.cmdline",
		"iommu.interrupt-remapping", "iommu.groups", "driver.nouveau", "vfio.modules", "vfio.binding", "vgpu.manager", "vgpu.types", "node.label"} {
		require.Contains(t, out, id)
	}
	require.True(t, strings.Contains(out, "vm-passthrough"))
}

func TestRootFromEnvironment(t *testing.T) {
	t.Setenv("GPUPREP_ROOT", fixtureRoot(t, "no-gpu"))
	out, _, code := gpuprep(t, "check", "--mode", "container")
	require.Equal(t, 1, code)
	require.Contains(t, out, "plain-server")
}

func TestSelectQEMUStyleDevice(t *testing.T) {
	out, _, code := gpuprep(t, "check", "--root", fixtureRoot(t, "turing-multifunction"), "--select", "10de:10f8", "-o", "json")
	require.Equal(t, exitUnknown, code, "no mode named or labelled: nothing judged")
	require.Contains(t, out, `"address": "0000:01:00.1"`)
}

// --skip of failing checks does not make a node ready: the mode is not
// evaluated (ready false, the skipped checks listed, exit 3) in every
// format; --ignore is how to accept a failure (or an unevaluable result)
// and still be ready.
func TestSkipIsNotReadyIgnoreAccepts(t *testing.T) {
	root := fixtureRoot(t, "consumer-shared-group")
	args := []string{"check", "--root", root, "--mode", "vm-passthrough"}
	_, _, code := gpuprep(t, args...)
	require.Equal(t, exitNotReady, code, "the GPU shares its group and is on nvidia")

	skip := append(slices.Clone(args), "--skip", "iommu.groups,vfio.binding")
	out, _, code := gpuprep(t, skip...)
	require.Equal(t, exitUnknown, code, out)
	require.Contains(t, out, "vm-passthrough  NOT EVALUATED  skipped (--skip): iommu.groups, vfio.binding\n")
	require.NotContains(t, out, "READY  \n")
	out, _, code = gpuprep(t, append(skip, "-o", "json")...)
	require.Equal(t, exitUnknown, code, out)
	var rep struct {
		Ready bool                                  `json:"ready"`
		Modes map[string]map[string]json.RawMessage `json:"modes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.False(t, rep.Ready)
	m := rep.Modes["vm-passthrough"]
	require.JSONEq(t, `false`, string(m["ready"]))
	require.JSONEq(t, `[]`, string(m["blockers"]))
	require.JSONEq(t, `["iommu.groups","vfio.binding"]`, string(m["skipped"]))
	out, _, code = gpuprep(t, append(skip, "-o", "junit")...)
	require.Equal(t, exitUnknown, code, out)
	require.Contains(t, out, `<property name="verdict" value="unknown"></property>`)
	require.Contains(t, out, `<property name="skipped" value="iommu.groups,vfio.binding"></property>`)
	out, _, code = gpuprep(t, append(skip, "-o", "markdown")...)
	require.Equal(t, exitUnknown, code, out)
	require.Contains(t, out, "iommu.groups (skipped), vfio.binding (skipped)")
	require.NotContains(t, out, "✅")

	// --ignore: the checks run, their fails are warnings, and it is ready
	out, _, code = gpuprep(t, append(slices.Clone(args), "--ignore", "iommu.groups,vfio.binding")...)
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "(ignored)")

	// an unevaluable check checked by hand: --ignore, as its remedy says
	root = fixtureRoot(t, "hgx-h200")
	require.NoError(t, os.Remove(filepath.Join(root, "proc/interrupts")))
	out, _, code = gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "--ignore", "vfio.binding,iommu.interrupt-remapping")
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "cannot read /proc/interrupts (ignored)")
}
