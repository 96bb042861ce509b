package vgpu

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

func TestParseCreatable(t *testing.T) {
	got := ParseCreatable("ID    : vGPU Name\n1428  : NVIDIA H200X-141C\n 1429 :NVIDIA H200X-70C\n\ngarbage\n")
	require.Equal(t, []Type{{ID: "1428", Name: "NVIDIA H200X-141C", Available: -1}, {ID: "1429", Name: "NVIDIA H200X-70C", Available: -1}}, got)
	require.Empty(t, ParseCreatable(""))
}

func read(t *testing.T, scenario, addr string) (GPU, Manager) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	return Read(root, addr), ReadManager(root)
}

func TestReadSRIOV(t *testing.T) {
	g, m := read(t, "sriov-vgpu", "0000:41:00.0")
	require.True(t, m.Installed)
	require.Equal(t, "sriov", g.Interface)
	require.Equal(t, 16, g.TotalVFs)
	require.Equal(t, 4, g.NumVFs)
	require.Equal(t, []string{"0000:41:00.4", "0000:41:00.5", "0000:41:00.6", "0000:41:00.7"}, g.VFs)
	require.Len(t, g.Types, 3, "types de-duplicated across VFs")
}

func TestReadMdev(t *testing.T) {
	g, m := read(t, "mdev-vgpu", "0000:21:00.0")
	require.Contains(t, m.Evidence, "module nvidia_vgpu_vfio loaded")
	require.Equal(t, "mdev", g.Interface)
	require.Equal(t, Type{ID: "nvidia-222", Name: "GRID T4-1Q", Available: 16}, g.Types[0])
	require.Equal(t, 0, g.NumVFs, "T4 reports VFs but uses mdev")
}

func TestReadNothing(t *testing.T) {
	g, m := read(t, "hgx-h200", "0000:13:00.0")
	require.False(t, m.Installed)
	require.Equal(t, "", g.Interface)
	require.Empty(t, g.Types)
}

func TestResourceName(t *testing.T) {
	require.Equal(t, "nvidia.com/NVIDIA_A10-12Q", ResourceName("NVIDIA A10-12Q"))
	require.Equal(t, "nvidia.com/GRID_T4-1Q", ResourceName("GRID T4-1Q"))
}

// VF links are looked for only where VFs can be: sriov_numvfs above 0, or
// present but unreadable. Where it says 0, or the GPU has no SR-IOV, a
// listing would find none on a real host; a fixture that has links anyway
// shows that they are not read.
func TestReadLooksForVFsOnlyWhereThereCanBeSome(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("sriov-vgpu", dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	numvfs := dir + "/sys/bus/pci/devices/0000:41:00.0/sriov_numvfs"

	require.Len(t, Read(root, "0000:41:00.0").VFs, 4, "4 enabled")
	require.NoError(t, os.WriteFile(numvfs, []byte("0\n"), 0o644))
	require.Empty(t, Read(root, "0000:41:00.0").VFs, "0 enabled")
	require.NoError(t, os.WriteFile(numvfs, []byte("garbage\n"), 0o644))
	require.Len(t, Read(root, "0000:41:00.0").VFs, 4, "unreadable: looked for")
	require.NoError(t, os.Remove(numvfs))
	require.Empty(t, Read(root, "0000:41:00.0").VFs, "no SR-IOV")
}
