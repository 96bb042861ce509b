package initramfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/initramfs/mkimage"
)

// debianMain is the part of a Debian 12 initramfs (initramfs-tools 0.142,
// linux-image-6.1.0-18-amd64) that says what early boot loads, after
// `vfio bind --persist` and update-initramfs: merged /usr (lib ->
// usr/lib), the module tree under usr/lib/modules, conf/modules from
// /etc/initramfs-tools/modules, and /etc/modprobe.d copied in (the
// initramfs-tools hook "kmod" copies /etc/modprobe.d and
// /lib/modprobe.d).
func debianMain(modprobe string) map[string]string {
	k := "usr/lib/modules/6.1.0-18-amd64/"
	m := map[string]string{
		"init":                "#!/bin/sh\n",
		"conf/initramfs.conf": "MODULES=most\nCOMPRESS=zstd\n",
		"scripts/functions":   "load_modules()\n{\n\t:\n}\n",
		"lib":                 "-> usr/lib",
		"conf/modules":        "# from /etc/initramfs-tools/modules\nvfio_iommu_type1\nvfio-pci ids=10de:2335,10de:22a3\n",
		k + "kernel/drivers/vfio/pci/vfio-pci.ko":        "\x7fELF",
		k + "kernel/drivers/vfio/vfio.ko":                "\x7fELF",
		k + "kernel/drivers/gpu/drm/nouveau/nouveau.ko":  "\x7fELF",
		k + "kernel/drivers/vfio/vfio_iommu_type1.ko.xz": "\xfd7zXZ\x00",
		k + "modules.alias":                              "alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau\nalias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n",
		k + "modules.builtin":                            "kernel/drivers/vfio/vfio_virqfd.ko\n",
	}
	if modprobe != "" {
		m["etc/modprobe.d/gpuprep-vfio.conf"] = modprobe
	}
	return m
}

const gpuprepConf = "# gpuprep-devices: 0000:41:00.0=vfio-pci\nsoftdep nouveau pre: vfio-pci\nsoftdep nvidia pre: vfio-pci\nblacklist nouveau\noptions vfio-pci ids=10de:2335\n"

// Every compression mkinitramfs, dracut and mkinitcpio use, made by the
// real programs, behind an uncompressed early microcode archive: the
// image's modules, early loads and modprobe.d are read from the
// compressed main archive, and the microcode archive's entry is there.
func TestReadMultiSegment(t *testing.T) {
	for _, comp := range []string{"none", "gzip", "xz", "zstd", "lz4"} {
		t.Run(comp, func(t *testing.T) {
			mkimage.Need(t, comp)
			raw := mkimage.Image(t, mkimage.Microcode, debianMain(gpuprepConf), comp)
			img, err := Read(bytes.NewReader(raw), DefaultLimits)
			require.NoError(t, err)
			require.Len(t, img.Segments, 2)
			require.Equal(t, "none", img.Segments[0].Compression)
			require.Equal(t, comp, img.Segments[1].Compression)
			_, ok := img.File("kernel/x86/microcode/GenuineIntel.bin")
			require.False(t, ok, "not a kept file")
			k, found := img.Kind("kernel/x86/microcode/GenuineIntel.bin")
			require.True(t, found)
			require.Equal(t, Regular, k)

			c := img.Contents()
			require.Equal(t, "initramfs-tools", c.Generator)
			require.Equal(t, []string{"6.1.0-18-amd64"}, c.Kernels)
			require.Contains(t, c.Modules, "vfio_pci")
			require.Contains(t, c.Modules, "vfio_iommu_type1")
			require.Equal(t, []Load{
				{Module: "vfio_iommu_type1", Source: "conf/modules:2"},
				{Module: "vfio_pci", Args: "ids=10de:2335,10de:22a3", Source: "conf/modules:3"},
			}, c.Early)
			require.Contains(t, c.Options, Option{Module: "vfio_pci", Value: "ids=10de:2335", Source: "etc/modprobe.d/gpuprep-vfio.conf:5"})
			require.Contains(t, c.Softdeps, Softdep{Module: "nouveau", Pre: []string{"vfio_pci"}, Source: "etc/modprobe.d/gpuprep-vfio.conf:2"})
			require.Equal(t, "etc/modprobe.d/gpuprep-vfio.conf:4", c.Blacklist["nouveau"])
			require.Contains(t, c.Aliases, Alias{Pattern: "pci:v000010DEd*sv*sd*bc03sc*i*", Module: "nouveau"})
			require.True(t, c.Builtin["vfio_virqfd"])
		})
	}
}

// A segment that ends where its data ends (an uncompressed archive, a
// gzip member, a legacy lz4 stream) is followed by NUL padding and the
// next segment, as the kernel reads them; a later file of the same name
// replaces the earlier one.
func TestReadSegmentsAfterGzipAndLz4(t *testing.T) {
	for _, comp := range []string{"gzip", "lz4"} {
		t.Run(comp, func(t *testing.T) {
			mkimage.Need(t, comp)
			first := mkimage.Compress(t, comp, mkimage.Archive(t, debianMain("options vfio-pci ids=1111:2222\n")))
			second := mkimage.Archive(t, map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": gpuprepConf})
			raw := append(append(append([]byte{}, first...), make([]byte, 512)...), second...)
			img, err := Read(bytes.NewReader(raw), DefaultLimits)
			require.NoError(t, err)
			require.Len(t, img.Segments, 2)
			require.Equal(t, "none", img.Segments[1].Compression)
			require.Equal(t, int64(len(first)+512), img.Segments[1].Offset)
			b, ok := img.File("etc/modprobe.d/gpuprep-vfio.conf")
			require.True(t, ok)
			require.Equal(t, gpuprepConf, string(b))
		})
	}
}

// dracut (dracut.sh: force_drivers → etc/cmdline.d/20-force_drivers.conf,
// rd.driver.pre= a line) and mkinitcpio (/config's MODULES, loaded by
// init before any hook) name their early modules in the image; a
// modules-load.d file in the image loads too.
func TestContentsDracutAndMkinitcpio(t *testing.T) {
	mkimage.Need(t, "zstd")
	dracut := map[string]string{
		"usr/lib/dracut/modules.txt":              "kernel-modules\n",
		"etc/cmdline.d/20-force_drivers.conf":     "rd.driver.pre=vfio_pci\nrd.driver.pre=vfio_iommu_type1\n",
		"etc/cmdline.d/01-blacklist.conf":         "rd.driver.blacklist=nouveau\n",
		"etc/modules-load.d/vfio.conf":            "; systemd comment\nvfio\n",
		"usr/lib/modprobe.d/gpuprep-vfio.conf":    "options vfio-pci ids=10de:aaaa\n",
		"etc/modprobe.d/gpuprep-vfio.conf":        "options vfio-pci ids=10de:2335\n",
		"usr/lib/modules/6.6.9-200.fc39.x86_64/x": "",
		// 90kernel-modules' parse-kernel.sh loads rd.driver.pre from a variable
		"usr/lib/dracut/hooks/cmdline/01-parse-kernel.sh": "for i in $(getargs rd.driver.pre); do\n    modprobe -b $i\ndone\n",
		"usr/lib/dracut/hooks/pre-udev/30-vfio.sh":        "#!/bin/sh\nmodprobe -b vfio-pci ids=10de:2335\n",
		"usr/lib/dracut/hooks/pre-mount/10-late.sh":       "modprobe nouveau\n",
	}
	img, err := Read(bytes.NewReader(mkimage.Image(t, nil, dracut, "zstd")), DefaultLimits)
	require.NoError(t, err)
	c := img.Contents()
	require.Equal(t, "dracut", c.Generator)
	require.Equal(t, []string{"vfio_pci", "vfio_iommu_type1", "vfio_pci", "vfio"}, modulesOf(c.Early))
	require.Equal(t, Load{Module: "vfio_pci", Args: "ids=10de:2335", Source: "usr/lib/dracut/hooks/pre-udev/30-vfio.sh:2", BeforeUdev: true}, c.Early[2])
	require.True(t, c.Early[0].BeforeUdev, "rd.driver.pre runs in the cmdline hook, before udev")
	require.False(t, c.Early[3].BeforeUdev, "modules-load.d is not ordered before udev's trigger")
	require.Equal(t, "etc/cmdline.d/01-blacklist.conf:1", c.Blacklist["nouveau"])
	// /etc hides the same name in /usr/lib (kmod's conf_files_list)
	require.Equal(t, []Option{{Module: "vfio_pci", Value: "ids=10de:2335", Source: "etc/modprobe.d/gpuprep-vfio.conf:1"}}, c.Options)

	arch := map[string]string{
		"init_functions": "#!/usr/bin/ash\n",
		"config":         "EARLYHOOKS='udev'\nHOOKS='udev'\nMODULES='vfio_pci vfio vfio_iommu_type1'\n",
	}
	img, err = Read(bytes.NewReader(mkimage.Image(t, nil, arch, "zstd")), DefaultLimits)
	require.NoError(t, err)
	c = img.Contents()
	require.Equal(t, "mkinitcpio", c.Generator)
	require.Equal(t, []string{"vfio_pci", "vfio", "vfio_iommu_type1"}, modulesOf(c.Early))
}

func modulesOf(ls []Load) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Module)
	}
	return out
}

// A modprobe.d file linked to /dev/null masks its name; a symlink is never
// read through.
func TestContentsSymlinkNotRead(t *testing.T) {
	mkimage.Need(t, "gzip")
	img, err := Read(bytes.NewReader(mkimage.Image(t, nil, map[string]string{
		"conf/modules":                     "vfio-pci\n",
		"etc/modprobe.d/gpuprep-vfio.conf": "-> /dev/null",
		"etc/passwd":                       "root:x:0:0\n",
		"etc/modules-load.d/x.conf":        "-> ../passwd",
	}, "gzip")), DefaultLimits)
	require.NoError(t, err)
	c := img.Contents()
	require.Empty(t, c.Options)
	require.Equal(t, []string{"vfio_pci"}, modulesOf(c.Early))
	_, ok := img.File("etc/modprobe.d/gpuprep-vfio.conf")
	require.False(t, ok)
}

// newc writes one record as GNU cpio does (for hostile and seed inputs).
func newc(name string, mode uint32, data string, nameSize int) []byte {
	if nameSize < 0 {
		nameSize = len(name) + 1
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", 1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, nameSize, 0)
	b.WriteString(name + "\x00")
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.WriteString(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

func archiveOf(recs ...[]byte) []byte {
	return append(bytes.Join(recs, nil), newc(trailer, 0, "", -1)...)
}

// Hostile images stop at a bound with an error that says so, never
// allocate what a header claims, and never pass for a whole read.
func TestReadBounds(t *testing.T) {
	small := Limits{MaxBytes: 1 << 20, MaxEntries: 10, MaxFile: 64, MaxKept: 128}
	many := make([][]byte, 0, 20)
	for i := range 20 {
		many = append(many, newc(fmt.Sprintf("f%d", i), 0o100644, "", -1))
	}
	_, err := Read(bytes.NewReader(archiveOf(many...)), small)
	require.ErrorIs(t, err, ErrTooLarge)

	_, err = Read(bytes.NewReader(newc("x", 0o100644, "", 0x7fffffff)), small)
	require.ErrorContains(t, err, "name length")

	// a kept file over MaxFile is named, not kept, and Contents says so
	big := strings.Repeat("options vfio-pci ids=10de:2335\n", 10)
	img, err := Read(bytes.NewReader(archiveOf(newc("etc/modprobe.d/a.conf", 0o100644, big, -1))), small)
	require.NoError(t, err)
	_, ok := img.File("etc/modprobe.d/a.conf")
	require.False(t, ok)
	require.Len(t, img.Contents().Notes, 1)

	_, err = Read(bytes.NewReader([]byte("BZh91AY&SY")), small)
	require.ErrorContains(t, err, "bzip2, which gpuprep does not read")
	_, err = Read(bytes.NewReader(append(archiveOf(newc("a", 0o100644, "x", -1)), 'Q', 'Q', 'Q', 'Q')), small)
	require.ErrorContains(t, err, "neither a cpio archive")
	_, err = Read(bytes.NewReader(archiveOf(newc("a", 0o100644, "x", -1))[:50]), small)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = Read(bytes.NewReader(nil), small)
	require.Error(t, err)
}

// A decompression bomb stops at MaxBytes.
func TestReadDecompressedCap(t *testing.T) {
	mkimage.Need(t, "zstd")
	raw := mkimage.Compress(t, "zstd", archiveOf(newc("big", 0o100644, strings.Repeat("A", 3<<20), -1)))
	require.Less(t, len(raw), 1<<20)
	_, err := Read(bytes.NewReader(raw), Limits{MaxBytes: 1 << 20, MaxEntries: 10, MaxFile: 64, MaxKept: 64})
	require.True(t, errors.Is(err, ErrTooLarge), "%v", err)
	require.ErrorContains(t, err, "stopped after 1 MiB decompressed")
}

// FuzzRead: any bytes end in an Image or an error, within the limits.
func FuzzRead(f *testing.F) {
	f.Add(archiveOf(newc("conf/modules", 0o100644, "vfio-pci ids=10de:2335\n", -1)))
	f.Add(append(archiveOf(newc("kernel/x86/microcode/GenuineIntel.bin", 0o100644, "x", -1)), 0x1f, 0x8b, 8, 0))
	f.Add(append(append([]byte{}, lz4LegacyMagic...), 5, 0, 0, 0, 0x50, 'h', 'e', 'l', 'l', 'o'))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0})
	f.Add([]byte{0xfd, '7', 'z', 'X', 'Z', 0, 0, 0})
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 100, MaxFile: 4096, MaxKept: 16384}
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := Read(bytes.NewReader(b), lim)
		if img == nil {
			t.Fatal("nil image")
		}
		if img.Entries > lim.MaxEntries || img.Bytes > lim.MaxBytes || img.kept > lim.MaxKept {
			t.Fatalf("over the limits: %d entries, %d bytes, %d kept", img.Entries, img.Bytes, img.kept)
		}
		if err == nil {
			img.Contents()
		}
	})
}
