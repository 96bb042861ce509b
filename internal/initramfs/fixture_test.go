package initramfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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

// ReadImage reads an image once per size and time: a regenerated image
// (another time) is read again.
func TestReadImageCachedByTime(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/initrd.img-6.1.0-18-amd64")
	require.NoError(t, err)
	p := filepath.Join(dir, "initrd.img")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	first, err := ReadImage(r, "/initrd.img", DefaultLimits)
	require.NoError(t, err)
	again, err := ReadImage(r, "/initrd.img", DefaultLimits)
	require.NoError(t, err)
	require.Same(t, first, again)
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(p, later, later))
	fresh, err := ReadImage(r, "/initrd.img", DefaultLimits)
	require.NoError(t, err)
	require.NotSame(t, first, fresh)
}
