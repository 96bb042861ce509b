package initramfs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The committed image made by GNU cpio and zstd (testdata/make-fixture.sh)
// reads without the tools installed, its contents from both segments.
func TestReadCommittedFixture(t *testing.T) {
	r, err := host.NewRoot("testdata")
	require.NoError(t, err)
	_, err = r.Stat("/initrd.img-6.1.0-18-amd64")
	require.NoError(t, err)
	img, err := ReadImage(r, "/initrd.img-6.1.0-18-amd64", DefaultLimits)
	require.NoError(t, err)
	require.Equal(t, []Segment{{0, "none"}, {img.Segments[1].Offset, "zstd"}}, img.Segments)
	require.Positive(t, img.Segments[1].Offset)
	c := img.Contents()
	require.Equal(t, "initramfs-tools", c.Generator)
	require.Equal(t, []string{"6.1.0-18-amd64"}, c.Kernels)
	require.Equal(t, []Load{{Module: "vfio_iommu_type1", Source: "conf/modules:1"}}, c.Early)
	require.Equal(t, []Option{{Module: "vfio_pci", Value: "ids=10de:2335,10de:22a3", Source: "etc/modprobe.d/gpuprep-vfio.conf:8"}}, c.Options)
	require.Len(t, c.Softdeps, 3)
	require.Contains(t, c.Modules, "nouveau")
	require.Equal(t, "usr/lib/modules/6.1.0-18-amd64/kernel/drivers/vfio/pci/vfio-pci.ko", c.Modules["vfio_pci"])
}
