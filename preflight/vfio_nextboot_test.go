package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/initramfs/mkimage"
	"github.com/gpuprep/gpuprep/preflight"
)

const cloudKernel = "6.8.0-45-generic"

// cloudImageMenu is the Linux entry Ubuntu's grub-mkconfig writes where
// GRUB_FORCE_PARTUUID is set (10_linux of Ubuntu's grub2 package, as in
// grub/initrdfail_test.go): initrdless unless grubenv has initrdfail=1.
const cloudImageMenu = "menuentry 'Ubuntu' --class ubuntu --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-b993fcf5' {\n" +
	"\trecordfail\n\tload_video\n\tsearch --no-floppy --fs-uuid --set=root b993fcf5\n" +
	"\tif [ \"${initrdfail}\" = 1 ]; then\n" +
	"\t  echo\t'GRUB_FORCE_PARTUUID set, initrdless boot failed. Attempting with initrd.'\n" +
	"\t  linux\t/boot/vmlinuz-" + cloudKernel + " root=PARTUUID=26f22d2b ro  console=tty1 console=ttyS0\n" +
	"\t  initrd\t/boot/initrd.img-" + cloudKernel + "\n" +
	"\telse\n" +
	"\t  echo\t'GRUB_FORCE_PARTUUID set, attempting initrdless boot.'\n" +
	"\t  linux\t/boot/vmlinuz-" + cloudKernel + " root=PARTUUID=26f22d2b ro  console=tty1 console=ttyS0 panic=-1\n" +
	"\tfi\n\tinitrdfail\n}\n"

// cloudImageRoot is an Ubuntu 24.04 cloud image (the grub-dropin-only
// fixture) that boots initrdless (GRUB_FORCE_PARTUUID in
// /etc/default/grub.d/40-force-partuuid.cfg, as livecd-rootfs sets it for
// cloud images), its A100 on vfio-pci, with a /boot/initrd.img-K that
// carries nouveau (the plymouth hook's DRM drivers) and nothing of VFIO:
// the image a boot after a failed initrdless one would load, not the next
// boot's.
func cloudImageRoot(t *testing.T, edit func(*fixture.Builder)) string {
	t.Helper()
	mkimage.Need(t, "zstd")
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.BootChain("grub-dropin-only", fixture.BootRunning)(b)
	b.File("/etc/default/grub.d/40-force-partuuid.cfg", "GRUB_FORCE_PARTUUID=26f22d2b\n")
	b.File("/boot/grub/grub.cfg", cloudImageMenu).File("/boot/vmlinuz-"+cloudKernel, "kernel")
	k := "usr/lib/modules/" + cloudKernel + "/"
	b.Bytes("/boot/initrd.img-"+cloudKernel, mkimage.Image(t, mkimage.Microcode, map[string]string{
		"conf/initramfs.conf": "MODULES=most\n", "scripts/functions": "load_modules()\n{\n\t:\n}\n",
		k + "kernel/drivers/gpu/drm/nouveau/nouveau.ko": "ELF",
		k + "modules.alias":                             "alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau\n",
	}, "zstd"))
	b.File("/usr/sbin/update-initramfs", "#!/bin/sh\n")
	b.IOMMU("dmar0", 0xf020df)
	b.PCI(fixture.PCI{Addr: "0000:00:01.0", Vendor: 0x8086, Device: 0x347a, Class: 0x060400, Driver: "pcieport", Group: 1, PCIeType: fixture.PCIeRootPort})
	b.PCI(fixture.PCI{Addr: "0000:17:00.0", Parent: "0000:00:01.0", Vendor: 0x10de, Device: 0x20b5, Class: 0x030200, Driver: "vfio-pci", Group: 2, PCIeType: fixture.PCIeEndpoint})
	b.Module("vfio", nil).Module("vfio_pci", nil).Module("vfio_iommu_type1", nil)
	edit(b)
	require.NoError(t, b.Err())
	return dir
}

// The next boot of an initrdless cloud image loads no initramfs: the
// image under /boot (carrying nouveau) is not what it loads, so it is no
// evidence that the GPU comes back on nouveau; what the root loads decides
// (systemd-modules-load, with the root's modprobe.d), and what only an
// initramfs acts on (/etc/initramfs-tools/modules) does nothing then.
func TestVFIOBindingInitrdlessBoot(t *testing.T) {
	dir := cloudImageRoot(t, func(b *fixture.Builder) {
		b.File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:20b5\n").File("/etc/modules-load.d/vfio.conf", "vfio_pci\n")
	})
	_, res := runRoot(t, dir)
	f := find(res, want{"vfio.binding", "0000:17:00.0", "", preflight.VMPassthrough})
	require.Len(t, f, 1, "%+v", res.Findings)
	require.Equal(t, preflight.Pass, f[0].Status, f[0].Message)
	require.Contains(t, f[0].Message, "the next boot loads no initramfs (/boot/grub/grub.cfg:1 entry 'Ubuntu'")
	require.Contains(t, f[0].Message, "evidence: the kernel's built-in modules, its command line and the root's files")
	require.NotContains(t, f[0].Message, "nouveau")

	// vfio-pci loaded only by the initramfs-tools modules file: nothing
	// loads it at an initrdless boot
	dir = cloudImageRoot(t, func(b *fixture.Builder) {
		b.File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:20b5\n").File("/etc/initramfs-tools/modules", "vfio_pci\n")
	})
	_, res = runRoot(t, dir)
	f = find(res, want{"vfio.binding", "0000:17:00.0", "", preflight.VMPassthrough})
	require.Len(t, f, 1, "%+v", res.Findings)
	require.Equal(t, preflight.Warn, f[0].Status, f[0].Message)
	require.Contains(t, f[0].Message, "nothing binds it to VFIO at boot")
	require.Contains(t, f[0].Message, "does nothing at the next boot: it loads no initramfs")
}

// driver.nouveau judges the next boot: nouveau not loaded now and not
// blacklisted is a warn where the next kernel ships it and its
// modules.alias matches a selected GPU (an Ubuntu node whose GPUs are on
// vfio-pci by a live bind, nouveau unloaded by hand).
func TestNouveauNextBoot(t *testing.T) {
	for _, c := range []struct {
		name   string
		edit   func(*fixture.Builder)
		status preflight.Status
		text   string
	}{
		{"ships nouveau, nothing blacklists it", func(*fixture.Builder) {}, preflight.Warn, "but the next boot loads it: the root's udev loads nouveau for 0000:17:00.0"},
		{"blacklisted", func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\noptions nouveau modeset=0\n")
		}, preflight.Pass, "nor does the next boot: blacklisted for the root's udev (/etc/modprobe.d/blacklist-nouveau.conf:1"},
		{"the kernel ships none", func(b *fixture.Builder) {
			b.File("/lib/modules/"+cloudKernel+"/modules.dep", "kernel/drivers/vfio/pci/vfio-pci.ko:\n")
		}, preflight.Pass, "ships no nouveau module"},
	} {
		dir := cloudImageRoot(t, func(b *fixture.Builder) {
			base := "/lib/modules/" + cloudKernel
			b.File(base+"/modules.dep", "kernel/drivers/gpu/drm/nouveau/nouveau.ko:\nkernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\nkernel/drivers/vfio/pci/vfio-pci.ko:\n")
			b.File(base+"/modules.alias", "alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau\nalias pci:v000012D2d*sv*sd*bc03sc*i* nouveau\n")
			c.edit(b)
		})
		_, res := runRoot(t, dir)
		f := find(res, want{"driver.nouveau", "/sys/module/nouveau", "", ""})
		require.Len(t, f, 1, "%s: %+v", c.name, res.Findings)
		require.Equal(t, c.status, f[0].Status, "%s: %s", c.name, f[0].Message)
		require.Contains(t, f[0].Message, c.text, c.name)
	}
}
