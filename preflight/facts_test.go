package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vgpu"
)

// vgpu.manager's finding carries the installed manager as typed facts: what
// shows it, its files on the host, and its version with the record it came
// from (nvidia-installer's first log line, "1.0-<digits> (<version>)":
// backup.c of github.com/NVIDIA/nvidia-installer, see vgpu.RunRecord); a
// record that is not that line is named, with no version.
func TestVGPUManagerFacts(t *testing.T) {
	for _, c := range []struct {
		name, record         string
		version, source, err string
	}{
		{"run record", "1.0-5509005 (550.90.05)\nNVIDIA Accelerated Graphics Driver for Linux-x86_64\n", "550.90.05", vgpu.RunRecord, ""},
		{"forged record", "550.90.05; rm -rf /\n", "", "", "is not nvidia-installer's version line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, fixture.Build("mdev-vgpu", dir))
			require.NoError(t, fixture.New(dir).File(vgpu.RunRecord, c.record).File("/sys/module/nvidia/version", "550.90.05\n").Err())
			_, res := runRoot(t, dir)
			f := find(res, want{"vgpu.manager", "nvidia vGPU manager", "", ""})
			require.Len(t, f, 1)
			require.NotNil(t, f[0].Facts)
			m := f[0].Facts.VGPUManager
			require.NotNil(t, m, f[0].Message)
			require.Contains(t, m.HostFiles, "/usr/bin/nvidia-vgpu-mgr")
			require.Contains(t, m.Evidence, "/usr/bin/nvidia-vgpu-mgr")
			require.Equal(t, c.version, m.Version)
			require.Equal(t, c.source, m.Source)
			require.Equal(t, "550.90.05", m.Loaded)
			if c.err != "" {
				require.Contains(t, m.SourceError, c.err)
			} else {
				require.Equal(t, vgpu.FormatRun, m.Format)
				require.Empty(t, m.SourceError)
			}
		})
	}
}

// No vGPU manager: no facts say there is one.
func TestVGPUManagerFactsAbsent(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("hgx-h200", dir))
	_, res := runRoot(t, dir)
	f := find(res, want{"vgpu.manager", "nvidia vGPU manager", "", ""})
	require.Len(t, f, 1)
	require.Equal(t, preflight.Fail, f[0].Status)
	// facts that say none was found (a report without facts is an older
	// gpuprep's, which kube.Operator refuses)
	require.Equal(t, &preflight.Facts{VGPUManager: &preflight.VGPUManagerFacts{Evidence: []string{}}}, f[0].Facts)
}

// Each vfio.binding finding about a GPU carries the driver it is on.
func TestVFIOBindingDriverFacts(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("vfio-bound", dir))
	env, res := runRoot(t, dir)
	n := 0
	for _, g := range env.GPUs {
		for _, f := range find(res, want{"vfio.binding", g.Address, "", ""}) {
			require.NotNil(t, f.Facts, "%s %v", g.Address, f.Modes)
			require.NotNil(t, f.Facts.Driver)
			require.Equal(t, g.Driver, f.Facts.Driver.Name)
			n++
		}
	}
	require.NotZero(t, n)
}
