package preflight_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vgpu"
)

// The fixture's units are what gpuprep writes.
func TestPersistedFixtureUnitsAreGpuprepsOwn(t *testing.T) {
	require.Equal(t, string(vgpu.ApplyUnitContent(vgpu.InstalledBinary, []string{"vgpu", "apply", "-f", vgpu.PersistedConfig, "-c", "h200-35c"}, nil)), fixture.PersistedApplyUnit)
	require.Equal(t, string(vgpu.SRIOVUnitContent([]string{"0000:41:00.0"})), fixture.PersistedSRIOVUnit)
}

// Vendor-specific VFIO vGPUs that exist now but that nothing recreates at
// the next boot are a warn of vgpu.types naming what is missing; with
// gpuprep's boot units in place (sriov-vgpu-persisted) a pass.
func TestVGPUBootRecreation(t *testing.T) {
	boot := func(t *testing.T, change func(dir string)) preflight.Finding {
		t.Helper()
		dir := t.TempDir()
		require.NoError(t, fixture.Build("sriov-vgpu-persisted", dir))
		if change != nil {
			change(dir)
		}
		_, res := runRoot(t, dir)
		fs := find(res, want{"vgpu.types", vgpu.ApplyUnit, "", ""})
		require.Len(t, fs, 1)
		return fs[0]
	}
	at := func(dir, p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	wantsLink := "/etc/systemd/system/multi-user.target.wants/" + vgpu.ApplyUnitName

	f := boot(t, nil)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "2 vGPUs on the VFs of 0000:41:00.0 (vendor-specific VFIO) are created again at boot")
	require.Contains(t, f.Message, `config "h200-35c" of /etc/gpuprep/vgpu-config.yaml`)

	cases := []struct {
		name, msg string
		change    func(dir string)
	}{
		{"no unit", "there is no /etc/systemd/system/gpuprep-vgpu-apply.service", func(dir string) {
			require.NoError(t, os.Remove(at(dir, vgpu.ApplyUnit)))
			require.NoError(t, os.Remove(at(dir, wantsLink)))
		}},
		{"masked", "is not a regular file", func(dir string) {
			require.NoError(t, os.Remove(at(dir, vgpu.ApplyUnit)))
			require.NoError(t, os.Symlink("/dev/null", at(dir, vgpu.ApplyUnit)))
		}},
		{"not enabled", "gpuprep-vgpu-apply.service is not enabled (no link to it in /etc/systemd/system/multi-user.target.wants)", func(dir string) {
			require.NoError(t, os.Remove(at(dir, wantsLink)))
		}},
		{"another binary", `runs "/home/ops/gpuprep", not the root-owned copy`, func(dir string) {
			rewrite(t, at(dir, vgpu.ApplyUnit), "ExecStart=/usr/local/libexec/gpuprep/gpuprep ", "ExecStart=/home/ops/gpuprep ")
		}},
		{"binary others can write", "which must be a regular file that only root can change", func(dir string) {
			require.NoError(t, os.Chmod(at(dir, vgpu.InstalledBinary), 0o777))
		}},
		{"binary missing", "which must be a regular file that only root can change", func(dir string) {
			require.NoError(t, os.Remove(at(dir, vgpu.InstalledBinary)))
		}},
		{"config lacks them", `creates config "h200-35c" of /etc/gpuprep/vgpu-config.yaml at boot, which does not ask for 2× NVIDIA H200X-35C on 0000:41:00.0 (it asks for 1)`, func(dir string) {
			rewrite(t, at(dir, vgpu.PersistedConfig), `"H200X-35C": 2`, `"H200X-35C": 1`)
		}},
		{"config of other types", "which does not ask for 2× NVIDIA H200X-35C on 0000:41:00.0 (it asks for 0)", func(dir string) {
			rewrite(t, at(dir, vgpu.PersistedConfig), `"H200X-35C": 2`, `"H200X-70C": 2`)
		}},
		{"config gone", "runs gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml, which cannot be read", func(dir string) {
			require.NoError(t, os.Remove(at(dir, vgpu.PersistedConfig)))
		}},
		{"another command", "does not run gpuprep vgpu apply", func(dir string) {
			rewrite(t, at(dir, vgpu.ApplyUnit), "gpuprep vgpu apply -f", "gpuprep vgpu assert -f")
		}},
		{"no VFs at boot", "wants /etc/systemd/system/gpuprep-vgpu-sriov.service, which enables the VFs at boot", func(dir string) {
			require.NoError(t, os.Remove(at(dir, vgpu.SRIOVUnit)))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := boot(t, c.change)
			require.Equal(t, preflight.Warn, f.Status, f.Message)
			require.Contains(t, f.Message, "2 vGPUs on the VFs of 0000:41:00.0 (vendor-specific VFIO) exist now, but nothing gpuprep can see creates them again at the next boot")
			require.Contains(t, f.Message, c.msg)
			require.True(t, f.Fixable)
			require.Equal(t, "gpuprep vgpu apply -f vgpu-config.yaml -c NAME --persist", f.FixCommand)
		})
	}

	// no vGPU on any VF: nothing to recreate, no such finding
	_, res := run(t, "sriov-vgpu")
	require.Empty(t, find(res, want{"vgpu.types", vgpu.ApplyUnit, "", ""}))
	// vGPUs and no unit (the SRIOVVGPULive node): the warn, and the mode
	// stays ready (the node works until its next boot)
	dir := t.TempDir()
	require.NoError(t, fixture.Build("sriov-vgpu", dir))
	b := fixture.New(dir)
	fixture.SRIOVVGPULive(b)
	require.NoError(t, b.Err())
	_, res = runRoot(t, dir)
	fs := find(res, want{"vgpu.types", vgpu.ApplyUnit, "", ""})
	require.Len(t, fs, 1)
	require.Equal(t, preflight.Warn, fs[0].Status)
	require.Contains(t, fs[0].Message, "there is no /etc/systemd/system/gpuprep-vgpu-apply.service")
}

func rewrite(t *testing.T, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}
