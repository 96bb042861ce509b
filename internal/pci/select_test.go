package pci

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

func inventory(t *testing.T, scenario string) *Inventory {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	inv, err := Discover(root)
	require.NoError(t, err)
	return inv
}

func addrs(ds []*Device) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Address)
	}
	return out
}

func TestDiscoverReadsDriverGroupParentClass(t *testing.T) {
	inv := inventory(t, "turing-multifunction")
	d := inv.Get("0000:01:00.3")
	require.NotNil(t, d)
	require.Equal(t, "10de", d.VendorID)
	require.Equal(t, "1ad9", d.DeviceID)
	require.Equal(t, "0c8000", d.Class)
	require.Equal(t, "nvidia-gpu", d.Driver)
	require.Equal(t, "2", d.IOMMUGroup)
	require.Equal(t, "0000:00:01.0", d.Parent)
	require.Equal(t, []string{"0000:01:00.0", "0000:01:00.1", "0000:01:00.2", "0000:01:00.3"}, addrs(inv.Group("2")))
	require.Equal(t, []string{"0000:00:01.0"}, addrs(inv.Upstream(d)))
}

func TestSelect(t *testing.T) {
	inv := inventory(t, "sriov-vgpu")
	cases := []struct {
		sel  []string
		want []string
		err  string
	}{
		{nil, []string{"0000:41:00.0"}, ""}, // VFs are not GPUs of their own
		{[]string{"10de"}, []string{"0000:41:00.0"}, ""},
		{[]string{"10DE:2335"}, []string{"0000:41:00.0"}, ""},
		{[]string{"41:00.0"}, []string{"0000:41:00.0"}, ""},
		{[]string{"0000:41:00.5"}, []string{"0000:41:00.5"}, ""}, // an address selects even a VF
		{[]string{"0000:41:00.0,0000:40:01.0"}, []string{"0000:40:01.0", "0000:41:00.0"}, ""},
		{[]string{"8086"}, []string{}, "--select 8086: no such PCI device on this host"}, // Intel has no display controller here
		{[]string{"0000:41:00.0", "1234:1111"}, []string{"0000:41:00.0"}, "--select 1234:1111: no such PCI device on this host"},
	}
	for _, c := range cases {
		s, err := ParseSelector(c.sel)
		require.NoError(t, err, "%v", c.sel)
		got, err := s.Select(inv)
		if c.err != "" {
			require.EqualError(t, err, c.err)
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, c.want, addrs(got), "%v", c.sel)
	}
	for _, bad := range []string{"nvidia", "0000:41:00", "10de:", "10de:2335:1", "g000"} {
		_, err := ParseSelector([]string{bad})
		require.ErrorContains(t, err, "want a PCI address", bad)
	}
}

func TestNVSwitchesAreReportedApart(t *testing.T) {
	inv := inventory(t, "hgx-h200")
	gpus, err := Selector{}.Select(inv)
	require.NoError(t, err)
	require.Len(t, gpus, 8)
	require.Len(t, NVSwitches(inv), 4)
	root, _ := host.NewRoot("../../testdata/roots/hgx-h200")
	inv.Name(root, gpus)
	require.Equal(t, "GH100 [H200 SXM 141GB]", gpus[0].Name)
	require.Equal(t, "/usr/share/misc/pci.ids", inv.IDsSource)
}

func TestDriverIsVFIO(t *testing.T) {
	for d, want := range map[string]bool{"vfio-pci": true, "vfio_pci": true, "nvgrace_gpu_vfio_pci": true, "nvidia": false, "": false, "pci-stub": false} {
		require.Equal(t, want, DriverIsVFIO(d), d)
	}
}
