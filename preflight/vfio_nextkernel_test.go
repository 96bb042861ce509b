package preflight_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/initramfs/mkimage"
	"github.com/gpuprep/gpuprep/preflight"
)

// The next boot runs the kernel the bootloader's default entry names, not
// necessarily the running one (on Debian GRUB boots the newest installed):
// vfio.binding judges that kernel's initramfs. The bound Turing card runs
// 6.1.0-18-amd64, whose image carries gpuprep's configuration; a newer
// 6.1.0-21-amd64 was installed with an image made before it (nouveau, no
// vfio-pci IDs). The menu is Debian 12's grub-mkconfig output
// (grub/testdata/nextboot/debian12-grub.cfg) for those two kernels.
func TestVFIOBindingReadsTheNextBootsKernel(t *testing.T) {
	mkimage.Need(t, "zstd")
	fresh := mkimage.Image(t, mkimage.Microcode, turingImage(map[string]string{
		"conf/modules": "vfio-pci\n", "etc/modprobe.d/gpuprep-vfio.conf": turingConf}), "zstd")
	stale := mkimage.Image(t, mkimage.Microcode, turingImage(nil), "zstd")
	dir := boundTuring(t, fresh, time.Now())
	cfg, err := os.ReadFile("../grub/testdata/nextboot/debian12-grub.cfg")
	require.NoError(t, err)
	menu := strings.NewReplacer("6.1.0-18", "6.1.0-21", "6.1.0-17", "6.1.0-18", "@DEFAULT@", "0", "@BOOT@", "/boot").Replace(string(cfg))
	write := func(p string, b []byte) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), b, 0o644))
	}
	write("boot/grub/grub.cfg", []byte(menu))
	write("lib/modules/6.1.0-21-amd64/modules.builtin", nil)
	write("boot/vmlinuz-6.1.0-21-amd64", []byte("kernel"))
	write("boot/initrd.img-6.1.0-21-amd64", stale)

	_, res := runRoot(t, dir)
	f := one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "initramfs /boot/initrd.img-6.1.0-21-amd64 carries nouveau")
	require.Contains(t, f.Message, "the next boot runs kernel 6.1.0-21-amd64 (/boot/grub/grub.cfg:106 entry 'Debian GNU/Linux' (default \"0\")), not the running 6.1.0-18-amd64")

	// grub-reboot into the running kernel's entry: its fresh image decides
	write("boot/grub/grubenv", []byte("# GRUB Environment Block\nnext_entry=1>2\n"+strings.Repeat("#", 990)))
	_, res = runRoot(t, dir)
	f = one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "initramfs /boot/initrd.img-6.1.0-18-amd64 loads vfio-pci")

	// no menu to read and two kernels: not a pass on the assumption that
	// the running kernel boots again
	require.NoError(t, os.Remove(filepath.Join(dir, "boot/grub/grub.cfg")))
	_, res = runRoot(t, dir)
	f = one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "which kernel the next boot runs is unknown (the GRUB menu /boot/grub/grub.cfg is not readable")
}

// A udev rule inside the initramfs that sets driver_override to vfio-pci
// (the rule `vfio bind --persist` writes for per-device binding, copied
// into a dracut image by install_items) keeps nouveau off the GPU at early
// boot: the kernel matches only the override's driver
// (drivers/pci/pci-driver.c, pci_match_device). The image is the stale
// Turing one (nouveau, no gpuprep modprobe.d file) plus the rule; with the
// rule for another address, nouveau still takes the GPU.
func TestVFIOBindingReadsUdevRulesInTheImage(t *testing.T) {
	mkimage.Need(t, "zstd")
	rule := func(addr string) []byte {
		return mkimage.Image(t, mkimage.Microcode, turingImage(map[string]string{
			"etc/udev/rules.d/40-gpuprep-vfio.rules": "# Written by `gpuprep vfio bind --persist`; `gpuprep vfio unbind` removes it.\n" +
				"ACTION==\"add\", SUBSYSTEM==\"pci\", KERNEL==\"" + addr + "\", ATTR{driver_override}=\"vfio-pci\"\n"}), "zstd")
	}
	_, res := runRoot(t, boundTuring(t, rule("0000:01:00.0"), time.Now()))
	f := one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "sets its driver_override to vfio-pci (etc/udev/rules.d/40-gpuprep-vfio.rules:2)")

	_, res = runRoot(t, boundTuring(t, rule("0000:02:00.0"), time.Now()))
	f = one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "carries nouveau")
}
