package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

func a16ConfigFile(t *testing.T, n int) string {
	t.Helper()
	return writeConfig(t, "a16-4q", "A16-4Q", n)
}

// Ampere SR-IOV with mdev (an A16 GPU, vGPU 16, kernel 5.15): apply
// installs the manager, enables the VFs (which become the mdev parents),
// creates the vGPUs on the VFs, one each, and persists them; check passes;
// rollback removes them.
func TestApplyVMVGPUFreshVFMdev(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-vfmdev")
	withTools(t, root)
	withoutIOMMUArgs(t, root)
	n, d := simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "535.183.04", "vgpu-kvm")
	require.NoError(t, err)
	cfg := a16ConfigFile(t, 4)
	orig := tree(t, root)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "a16-4q", "--driver", run}

	out, errs, code := gpuprepWith(t, d, append([]string{"plan"}, args...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "run: modprobe nvidia_vgpu_vfio")
	require.Contains(t, out, "run: /usr/lib/nvidia/sriov-manage -e "+fixture.A16)
	require.Contains(t, out, `create the vGPUs of config "a16-4q" (4× A16-4Q on `+fixture.A16+`)`)
	require.Equal(t, orig, tree(t, root), "plan changes nothing")

	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, exitNeedReboot, code, out+errs)
	simulateReboot(t, root)
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes", "-o", "json"}, args...)...)
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, []struct{ ID, Status string }{{"vgpu-install", "done"}, {"vgpu-devices", "done"}, {"label", "done"}}, a.Outcome.Steps, out+errs)
	require.Equal(t, 0, code, out+errs)
	require.True(t, a.Report.Ready, out)
	for _, c := range []string{"vgpu.manager", "vgpu.types"} {
		require.Equal(t, "pass", findingStatus(a, c, ""), "%s: %s", c, out)
	}

	// one A16-4Q on each of the first four VFs; none on the PF
	ms := mdevsOf(t, root)
	require.Len(t, ms, 4, "%v", ms)
	want := map[string]bool{}
	for _, vf := range fixture.A16VFs[:4] {
		want[vf+" nvidia-713"] = true
	}
	for u, m := range ms {
		require.True(t, want[m], "%s on %s", u, m)
		delete(want, m)
	}
	created := journalVGPUs(t, root)
	require.Len(t, created, 4)
	require.FileExists(t, filepath.Join(root, vgpu.SRIOVUnit))
	unit, err := os.ReadFile(filepath.Join(root, vgpu.ApplyUnit))
	require.NoError(t, err)
	require.Contains(t, string(unit), "After="+vgpu.SRIOVUnitName+" ", "created once the VFs are")
	require.Contains(t, string(unit), "Wants="+vgpu.SRIOVUnitName+" ")
	require.Contains(t, string(unit), "ExecStartPre=/bin/sh -c 'for i in", "and waits for the VFs to be mdev parents")
	require.Contains(t, string(unit), "[ -d /sys/bus/pci/devices/"+fixture.A16+"/virtfn0/mdev_supported_types ]")

	// the GPU is full: vgpu types says so, per GPU
	out, errs, code = gpuprepWith(t, d, "vgpu", "types", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Regexp(t, fixture.A16+`\s+mdev\s+nvidia-713\s+NVIDIA A16-4Q\s+0\s`, out)

	// check on its own: ready
	out, errs, code = gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-vgpu")
	require.Equal(t, 0, code, out+errs)

	// a re-run is a no-op
	jl, after := journalLen(t, root), tree(t, root)
	out, errs, _ = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Contains(t, out, "Nothing to do", errs)
	require.Equal(t, jl, journalLen(t, root))
	require.Equal(t, after, tree(t, root))

	// rollback: the vGPUs gone from the VFs, the files back, the manager stays
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "the vGPU manager stays installed")
	require.Empty(t, mdevsOf(t, root))
	require.Empty(t, journalVGPUs(t, root))
	require.Equal(t, exceptManager(orig), exceptManager(tree(t, root)), "every file but the manager's as before")
	require.NoFileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))
	require.Contains(t, n.h.Commands(), "/usr/lib/nvidia/sriov-manage -e "+fixture.A16)

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to roll back.")
}

// vgpu types, apply, assert, --persist and --prune on an A16 GPU whose VFs
// are its mdev parents; and what the boot unit runs recreates the vGPUs.
func TestVGPUApplyVFMdev(t *testing.T) {
	root := fixtureRoot(t, "vfmdev-vgpu")
	n, d := simulatedVGPUApply(t, root)
	d.vgpuApplyRunner = func(*host.Root) host.Runner { return n }
	typesFree := func(typ string) string {
		t.Helper()
		out, errs, code := gpuprepWith(t, d, "vgpu", "types", "--root", root)
		require.Equal(t, 0, code, errs)
		m := regexp.MustCompile(fixture.A16 + `\s+mdev\s+` + typ + `\s+\S+ \S+\s+(\S+)\s`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		return m[1]
	}
	require.Equal(t, "4", typesFree("nvidia-713"), "4 A16-4Q fit the GPU, though each of its 16 VFs says 1")
	require.Equal(t, "16", typesFree("nvidia-711"))

	out, errs, code := gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", a16ConfigFile(t, 5), "-c", "a16-4q")
	require.NotEqual(t, 0, code, out+errs)
	require.Contains(t, errs, `0000:b2:00.0: 5 more "NVIDIA A16-4Q" wanted, 4 available (the GPU takes 4 more; 16 of its 16 VFs, the mdev parents, have one free)`)
	require.Empty(t, mdevsOf(t, root))

	cfg := a16ConfigFile(t, 4)
	out, errs, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "a16-4q", "--persist")
	require.Equal(t, 0, code, out+errs)
	onVFs := func() []string {
		var on []string
		for _, m := range mdevsOf(t, root) {
			on = append(on, m)
		}
		sort.Strings(on)
		return on
	}
	want := []string{}
	for _, vf := range fixture.A16VFs[:4] {
		want = append(want, vf+" nvidia-713")
	}
	require.Equal(t, want, onVFs())
	require.Equal(t, "0", typesFree("nvidia-713"))
	unit, err := os.ReadFile(filepath.Join(root, vgpu.ApplyUnit))
	require.NoError(t, err)
	require.Contains(t, string(unit), "do [ -d /sys/bus/pci/devices/"+fixture.A16+"/virtfn0/mdev_supported_types ] && exit 0; sleep 2; done;",
		"at boot it waits for the VFs sriov-manage makes to be mdev parents")
	_, _, code = gpuprepWith(t, d, "vgpu", "assert", "--root", root, "-f", cfg, "-c", "a16-4q")
	require.Equal(t, 0, code)

	// a reboot loses the vGPUs; what the unit runs makes them again
	for u := range mdevsOf(t, root) {
		require.NoError(t, n.WriteAttr("/sys/bus/mdev/devices/"+u+"/remove", "1"))
	}
	_, _, code = gpuprepWith(t, d, "vgpu", "assert", "--root", root, "-f", cfg, "-c", "a16-4q")
	require.Equal(t, 1, code)
	out, errs, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", filepath.Join(root, vgpu.PersistedConfig), "-c", "a16-4q")
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, want, onVFs())

	// --prune: the four A16-4Q go, two A16-8Q take the freed VFs
	out, errs, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", writeConfig(t, "a16-4q", "A16-8Q", 2), "-c", "a16-4q", "--prune")
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, []string{fixture.A16VFs[0] + " nvidia-714", fixture.A16VFs[1] + " nvidia-714"}, onVFs())
	require.Equal(t, "0", typesFree("nvidia-714"))
	require.Equal(t, "0", typesFree("nvidia-713"), "one type at a time")
}

func writeConfig(t *testing.T, name, typ string, n int) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("version: v1\nvgpu-configs:\n  %s:\n    - devices: all\n      vgpu-devices:\n        %q: %d\n", name, typ, n)), 0o644))
	return cfg
}
