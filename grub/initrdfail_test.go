package grub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// ubuntuCloudMenu is a Linux entry as Ubuntu's grub-mkconfig writes it where
// GRUB_FORCE_PARTUUID is set (its cloud images; the shape as their generated
// /boot/grub/grub.cfg has it): initrdless, with the initramfs only in the
// branch taken after such a boot failed.
const ubuntuCloudMenu = "function initrdfail {\n    if [ -n \"${have_grubenv}\" ]; then if [ -n \"${partuuid}\" ]; then\n      if [ -z \"${initrdfail}\" ]; then\n        set initrdfail=1\n      fi\n      save_env initrdfail\n    fi; fi\n}\n" +
	"set default=\"0\"\n" +
	"menuentry 'Ubuntu' --class ubuntu --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-b993fcf5' {\n" +
	"\trecordfail\n\tload_video\n\tinsmod gzio\n\tif [ x$grub_platform = xxen ]; then insmod xzio; insmod lzopio; fi\n\tinsmod part_gpt\n\tinsmod ext2\n" +
	"\tsearch --no-floppy --fs-uuid --set=root b993fcf5\n" +
	"\tif [ \"${initrdfail}\" = 1 ]; then\n" +
	"\t  echo\t'GRUB_FORCE_PARTUUID set, initrdless boot failed. Attempting with initrd.'\n" +
	"\t  linux\t/boot/vmlinuz-6.1.0-18-amd64 root=PARTUUID=26f22d2b ro  console=tty1 console=ttyS0\n" +
	"\t  echo\t'Loading initial ramdisk ...'\n" +
	"\t  initrd\t/boot/initrd.img-6.1.0-18-amd64\n" +
	"\telse\n" +
	"\t  echo\t'GRUB_FORCE_PARTUUID set, attempting initrdless boot.'\n" +
	"\t  linux\t/boot/vmlinuz-6.1.0-18-amd64 root=PARTUUID=26f22d2b ro  console=tty1 console=ttyS0 panic=-1\n" +
	"\tfi\n\tinitrdfail\n}\n"

// Where grubenv has no initrdfail=1 the next boot loads no initramfs: the
// VFIO verdicts must not judge /boot/initrd.img-K as what it loads.
func TestNextKernelInitrdless(t *testing.T) {
	files := map[string]string{DefaultsFile: debianDefaults, "/boot/grub/grub.cfg": ubuntuCloudMenu}
	nk := FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.Empty(t, nk.Initrd, "the initrdless boot loads none")
	require.True(t, nk.NoInitramfs, "the initrdless boot loads none")
	require.Contains(t, nk.From, "without an initramfs")

	nk = FindNextKernel(nextRoot(t, files, map[string][]byte{"/boot/grub/grubenv": []byte(grubenv("initrdfail=1"))}))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.Equal(t, "/boot/initrd.img-6.1.0-18-amd64", nk.Initrd)
	require.False(t, nk.NoInitramfs)
	require.Contains(t, nk.From, "initrdfail=1")

	// recordfail changes the menu's timeout only
	nk = FindNextKernel(nextRoot(t, files, map[string][]byte{"/boot/grub/grubenv": []byte(grubenv("recordfail=1"))}))
	require.Empty(t, nk.Initrd)
	require.True(t, nk.NoInitramfs)
}
