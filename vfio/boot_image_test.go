package vfio

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs/mkimage"
	"github.com/gpuprep/gpuprep/internal/pci"
)

const imgKernel = "6.1.0-18-amd64"

// h100 is an H100 NVL's GPU function as sysfs names it.
var h100 = &pci.Device{Address: "0000:41:00.0", VendorID: "10de", DeviceID: "2335"}

// bootImageRoot is a Debian 12 root running imgKernel with gpuprep's
// modprobe.d file conf (none when ""), the GPU's modalias, and an
// initramfs made by real cpio + zstd from main behind a microcode archive.
func bootImageRoot(t *testing.T, conf string, main map[string]string) *host.Root {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	b.File("/proc/sys/kernel/osrelease", imgKernel+"\n").Mkdir("/lib/modules/" + imgKernel)
	b.File("/sys/bus/pci/devices/"+h100.Address+"/modalias", "pci:v000010DEd00002335sv000010DEsd00001809bc03sc02i00\n")
	if conf != "" {
		b.File(ModprobeConf, conf)
	}
	if main != nil {
		b.Bytes("/boot/initrd.img-"+imgKernel, mkimage.Image(t, mkimage.Microcode, main, "zstd"))
	}
	require.NoError(t, b.Err())
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r
}

// oldDebian is the initramfs of a Debian 12 node before any VFIO setup:
// initramfs-tools with nouveau in it (the plymouth hook copies the DRM
// drivers) and its modules.alias.
func oldDebian(extra map[string]string) map[string]string {
	k := "usr/lib/modules/" + imgKernel + "/"
	m := map[string]string{
		"conf/initramfs.conf":                           "MODULES=most\n",
		"scripts/functions":                             "load_modules()\n{\n\t:\n}\n",
		"etc/modprobe.d/intel-microcode-blacklist.conf": "blacklist microcode\n",
		k + "kernel/drivers/gpu/drm/nouveau/nouveau.ko": "ELF",
		k + "kernel/drivers/vfio/pci/vfio-pci.ko":       "ELF",
		k + "modules.alias":                             "alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau\nalias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n",
	}
	for p, c := range extra {
		m[p] = c
	}
	return m
}

const persisted = "# gpuprep-devices: 0000:41:00.0=vfio-pci\nsoftdep nouveau pre: vfio-pci\nsoftdep nvidia pre: vfio-pci\noptions vfio-pci ids=10de:2335\n"

// The image, not the files, says what the next boot does: an image made
// before gpuprep's files carries nouveau, which takes the GPU; one with
// vfio-pci in conf/modules and gpuprep's options binds it; one where
// gpuprep's blacklist keeps nouveau from loading neither takes nor binds.
func TestBootImageBinding(t *testing.T) {
	mkimage.Need(t, "zstd")
	r := bootImageRoot(t, persisted, oldDebian(nil))
	b := NewBootImage(r, nil)
	require.True(t, b.Readable(), b.Unread())
	ib := b.Binding(r, h100)
	require.False(t, ib.Binds)
	require.Equal(t, "nouveau", ib.Taker)

	// initramfs-tools loads conf/modules after udev's coldplug (init:
	// init-top, then load_modules): nouveau, in the image, is first
	r = bootImageRoot(t, persisted, oldDebian(map[string]string{"conf/modules": "vfio-pci ids=10de:2335\n"}))
	ib = NewBootImage(r, nil).Binding(r, h100)
	require.False(t, ib.Binds)
	require.Equal(t, "nouveau", ib.Taker)
	// without nouveau in the image, conf/modules' vfio-pci finds the GPU free
	noNouveau := oldDebian(map[string]string{"conf/modules": "vfio-pci ids=10de:2335\n"})
	delete(noNouveau, "usr/lib/modules/"+imgKernel+"/kernel/drivers/gpu/drm/nouveau/nouveau.ko")
	r = bootImageRoot(t, persisted, noNouveau)
	ib = NewBootImage(r, nil).Binding(r, h100)
	require.Equal(t, ImageBinding{Binds: true, How: "loads vfio-pci (conf/modules:1) with ids=10de:2335 (conf/modules:1)"}, ib)
	// dracut's rd.driver.pre loads before udev: it beats nouveau
	r = bootImageRoot(t, persisted, oldDebian(map[string]string{
		"etc/cmdline.d/20-force_drivers.conf": "rd.driver.pre=vfio_pci\n", "etc/modprobe.d/vfio.conf": "options vfio_pci ids=10de:2335\n"}))
	ib = NewBootImage(r, nil).Binding(r, h100)
	require.True(t, ib.Binds, "%+v", ib)
	require.Equal(t, "loads vfio-pci (etc/cmdline.d/20-force_drivers.conf:1) with ids=10de:2335 (etc/modprobe.d/vfio.conf:1)", ib.How)

	r = bootImageRoot(t, persisted, oldDebian(map[string]string{"conf/modules": "vfio-pci\n", "etc/modprobe.d/gpuprep-vfio.conf": persisted}))
	b = NewBootImage(r, nil)
	ib = b.Binding(r, h100)
	require.True(t, ib.Binds)
	require.Equal(t, "loads vfio-pci (etc/modprobe.d/gpuprep-vfio.conf:2 (softdep nouveau pre: vfio-pci)) with ids=10de:2335 (etc/modprobe.d/gpuprep-vfio.conf:4)", ib.How)

	// the softdep fires when udev loads nouveau by alias in the initramfs
	r = bootImageRoot(t, persisted, oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": persisted}))
	ib = NewBootImage(r, nil).Binding(r, h100)
	require.True(t, ib.Binds, "%+v", ib)
	require.Contains(t, ib.How, "softdep nouveau pre: vfio-pci")

	// blacklisted, nouveau never loads by alias: its softdep never fires
	bl := persisted + "blacklist nouveau\n"
	r = bootImageRoot(t, bl, oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": bl}))
	ib = NewBootImage(r, nil).Binding(r, h100)
	require.Equal(t, ImageBinding{}, ib)

	// vfio-pci loaded early without the ID: the root's options come too late
	r = bootImageRoot(t, persisted, oldDebian(map[string]string{"conf/modules": "vfio-pci ids=10de:1111\n"}))
	ib = NewBootImage(r, nil).Binding(r, h100)
	require.Equal(t, "nouveau", ib.Taker)
	require.Equal(t, "loads vfio-pci (conf/modules:1) without 10de:2335 in its ids", ib.EarlyNoID)

	r = bootImageRoot(t, persisted, nil)
	b = NewBootImage(r, nil)
	require.False(t, b.Readable())
	require.Equal(t, "no initramfs image of kernel "+imgKernel+" in /boot", b.Unread())
}

// ImageStale and, through it, InitramfsStale judge by the image's copy of
// gpuprep's modprobe.d file where the image has a modprobe.d: an image
// newer than the files but made without them is stale (mtimes alone said
// fresh), and files rewritten unchanged after the image are not (mtimes
// alone said stale).
func TestImageStale(t *testing.T) {
	mkimage.Need(t, "zstd")
	old := time.Now().Add(-24 * time.Hour)

	r := bootImageRoot(t, persisted, oldDebian(nil))
	require.NoError(t, touch(r, ModprobeConf, old))
	why, decided := ImageStale(r)
	require.True(t, decided)
	require.Equal(t, "the initramfs /boot/initrd.img-"+imgKernel+" lacks "+ModprobeConf+": it was made before gpuprep's persistent VFIO configuration was written", why)
	require.Equal(t, why, InitramfsStale(r))

	r = bootImageRoot(t, persisted, oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": persisted}))
	require.NoError(t, touch(r, "/boot/initrd.img-"+imgKernel, old))
	why, decided = ImageStale(r)
	require.True(t, decided)
	require.Empty(t, why)
	require.Empty(t, InitramfsStale(r))

	r = bootImageRoot(t, persisted+"blacklist nouveau\n", oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": persisted}))
	why, _ = ImageStale(r)
	require.Contains(t, why, "carries an older "+ModprobeConf)

	r = bootImageRoot(t, "", oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": persisted}))
	why, _ = ImageStale(r)
	require.Contains(t, why, "still carries "+ModprobeConf)

	// update-initramfs -u remade the newest kernel's image, not the running
	// one's: an image carries the change, so the command has run (a re-run
	// would remake the same one), while the running kernel's image, which
	// check reads as the next boot's, still lacks it
	r = bootImageRoot(t, persisted, oldDebian(nil))
	newer, err := r.Path("/boot")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(newer+"/../lib/modules/6.1.0-20-amd64", 0o755))
	require.NoError(t, os.WriteFile(newer+"/initrd.img-6.1.0-20-amd64", mkimage.Image(t, nil, oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": persisted}), "zstd"), 0o644))
	why, decided = ImageStale(r)
	require.True(t, decided)
	require.Empty(t, why)
	require.Equal(t, "nouveau", NewBootImage(r, nil).Binding(r, h100).Taker)

	// an image without etc/modprobe.d tells nothing: mtimes decide
	noDir := oldDebian(nil)
	delete(noDir, "etc/modprobe.d/intel-microcode-blacklist.conf")
	r = bootImageRoot(t, persisted, noDir)
	_, decided = ImageStale(r)
	require.False(t, decided)
}

func touch(r *host.Root, p string, t time.Time) error {
	rp, err := r.Path(p)
	if err != nil {
		return err
	}
	return os.Chtimes(rp, t, t)
}

// The vfio plan regenerates an initramfs that lacks gpuprep's files even
// when it is newer than them (a bind's update-initramfs killed after it
// wrote a new image from the old files, say), and does not for one that
// carries them though older (files rewritten unchanged): Pending runs the
// initramfs command in the first case only.
func TestPlanPersistRegeneratesByImage(t *testing.T) {
	mkimage.Need(t, "zstd")
	old := time.Now().Add(-24 * time.Hour)
	for _, c := range []struct {
		name  string
		image map[string]string
		age   string // which is older: "files" or "image"
		regen bool
	}{
		{"image newer but without the files", oldDebian(nil), "files", true},
		{"image older but with the files", oldDebian(map[string]string{"etc/modprobe.d/gpuprep-vfio.conf": persisted}), "image", false},
	} {
		r := bootImageRoot(t, persisted, c.image)
		p, err := r.Path("/usr/sbin")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(p, 0o755))
		require.NoError(t, os.WriteFile(p+"/update-initramfs", []byte("#!/bin/sh\n"), 0o755))
		if c.age == "files" {
			require.NoError(t, touch(r, ModprobeConf, old))
		} else {
			require.NoError(t, touch(r, "/boot/initrd.img-"+imgKernel, old))
		}
		pp, err := planPersist(r, &pci.Inventory{}, nil, nil)
		require.NoError(t, err, c.name)
		require.Equal(t, c.regen, pp.Regenerate != "", "%s: %q", c.name, pp.Regenerate)
	}
}
