package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The typed vGPU and command records write the lines main's gpuprep
// (a32c023) wrote field by field in vgpu.ApplyJournalled, vgpu's upgrade
// steps and InstallPlan.Execute, and read back as they were written.
func TestVGPURecordsKeepTheirLines(t *testing.T) {
	dir := t.TempDir()
	root, _ := host.NewRoot(dir)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	attr := "/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type"
	v := VGPURecord{Attr: attr, GPU: "0000:41:00.0", Value: "557", Before: "0"}
	m := VGPUModeRecord{GPU: "0000:41:00.0", Mode: "Disabled"}
	u := VGPUManagerRecord{From: "550.54.10", To: "550.90.05", Record: "/var/lib/gpuprep/vgpu-upgrade/1.json"}
	c := CommandRecord{What: "run the NVIDIA installer"}
	for _, en := range []Entry{v.Intent("vgpu apply", now), v.Done("vgpu apply", now), m.Entry("apply", now),
		u.Intent("vgpu install", now), u.Done("vgpu install", now), c.Intent("vgpu install", now), c.Ran("vgpu install", now)} {
		require.NoError(t, Append(root, en))
	}
	b, err := os.ReadFile(filepath.Join(dir, Path))
	require.NoError(t, err)
	at := `{"v":1,"time":"2026-01-02T02:04:05Z",`
	require.Equal(t, []string{
		at + `"command":"vgpu apply","kind":"vgpu-intent","path":"` + attr + `","device":"0000:41:00.0","before":"0","after":"557"}`,
		at + `"command":"vgpu apply","kind":"vgpu","path":"` + attr + `","device":"0000:41:00.0","after":"557"}`,
		at + `"command":"apply","kind":"vgpu-mode","device":"0000:41:00.0","before":"Disabled","after":"Enabled"}`,
		at + `"command":"vgpu install","kind":"vgpu-manager-intent","path":"/var/lib/gpuprep/vgpu-upgrade/1.json","before":"550.54.10","after":"550.90.05"}`,
		at + `"command":"vgpu install","kind":"vgpu-manager","path":"/var/lib/gpuprep/vgpu-upgrade/1.json","before":"550.54.10","after":"550.90.05"}`,
		at + `"command":"vgpu install","kind":"command-intent","after":"run the NVIDIA installer"}`,
		at + `"command":"vgpu install","kind":"step","after":"run the NVIDIA installer"}`,
	}, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"))
	es, err := Read(root)
	require.NoError(t, err)
	require.Equal(t, v, es[0].VGPU())
	require.Equal(t, VGPURecord{Attr: attr, GPU: "0000:41:00.0", Value: "557"}, es[1].VGPU())
	require.Equal(t, m, es[2].VGPUMode())
	require.Equal(t, u, es[3].VGPUManager())
	require.Equal(t, u, es[4].VGPUManager())
	require.Equal(t, c, es[5].Ran())
	require.Equal(t, c, es[6].Ran())
}
