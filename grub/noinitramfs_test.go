package grub

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An entry without an initrd line boots without an initramfs: the kernel
// mounts the root itself. Each shape from the program that writes it:
//
//   - grub-mkconfig's 10_linux writes the initrd line only where it found
//     an initramfs for the kernel (util/grub.d/10_linux.in, linux_entry:
//     `if test -n "${initrd}" ; then ... initrd ${rel_dirname}/${initrd}`),
//     so a kernel installed without one (a custom kernel, an initramfs
//     generator not installed) has a menu entry with its linux line only.
//   - kernel-install's 90-loaderentry.install writes an `initrd` line for
//     each initrd it was given or found (systemd src/kernel-install/
//     90-loaderentry.install.in: `for initrd in ...; do echo "initrd ..."`)
//     and none where there is none.
//
// An entry whose initrd line names a file that is not there is not that: it
// loads an initramfs gpuprep did not find (NoInitramfs false, Initrd "").
func TestNextKernelNoInitrdLine(t *testing.T) {
	menu := debianMenu(t, "0", "/boot")
	require.Contains(t, menu, "initrd\t/boot/initrd.img-6.1.0-18-amd64")
	files := map[string]string{DefaultsFile: debianDefaults, "/boot/grub/grub.cfg": dropLine(menu, "initrd\t/boot/initrd.img-6.1.0-18-amd64")}
	nk := FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.True(t, nk.NoInitramfs, "10_linux wrote no initrd line")
	require.Empty(t, nk.Initrd)
	require.Contains(t, nk.From, "without an initramfs (the entry has no initrd line)")

	// the line there, its file not: an initramfs not found, not none
	files["/boot/grub/grub.cfg"] = strings.ReplaceAll(menu, "initrd.img-6.1.0-18-amd64", "initrd.img-6.1.0-18-amd64.missing")
	nk = FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.False(t, nk.NoInitramfs)
	require.Empty(t, nk.Initrd)

	// a systemd-boot entry without initrd lines
	const mid = "8a6e1c0b2d3f4e5a9b7c6d5e4f3a2b1c"
	sd := map[string]string{
		KernelCmdlineFile:         "root=UUID=3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77 ro quiet\n",
		"/efi/loader/loader.conf": "timeout 3\n",
		"/efi/loader/entries/" + mid + "-6.1.0-18-amd64.conf": dropLine(sdEntry("6.1.0-18-amd64"), "initrd     /"+mid+"/6.1.0-18-amd64/initrd.img-6.1.0-18-amd64"),
	}
	nk = FindNextKernel(nextRoot(t, sd, nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.True(t, nk.NoInitramfs)
	require.Contains(t, nk.From, "without an initramfs")
}

// RHEL's BLS entries (grub2's 20-grub.install) end the initrd line with
// GRUB's $tuned_initrd, empty unless a tuned profile sets it: the
// initramfs is the image before it, not the variable.
func TestNextKernelBLSTunedInitrd(t *testing.T) {
	const mid = "2d1f0c9e8b7a46f5a4e3d2c1b0a99887"
	k := "5.14.0-427.13.1.el9_4.x86_64"
	entry := "title Rocky Linux (" + k + ") 9.4 (Blue Onyx)\nversion " + k + "\nlinux /vmlinuz-" + k + "\ninitrd /initramfs-" + k + ".img $tuned_initrd\n" +
		"options root=/dev/mapper/rl-root ro $tuned_params\ngrub_users $grub_users\ngrub_arg --unrestricted\ngrub_class rocky\n"
	files := map[string]string{
		DefaultsFile: "GRUB_TIMEOUT=5\nGRUB_DEFAULT=saved\nGRUB_CMDLINE_LINUX=\"rhgb quiet\"\nGRUB_ENABLE_BLSCFG=true\n",
		"/boot/loader/entries/" + mid + "-" + k + ".conf": entry,
		"/lib/modules/" + k + "/modules.builtin":          "",
		"/boot/initramfs-" + k + ".img":                   "image",
	}
	nk := FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, k, nk.Release, nk.Missing)
	require.Equal(t, "/boot/initramfs-"+k+".img", nk.Initrd)
	require.False(t, nk.NoInitramfs)
}

// dropLine is s without its line holding l.
func dropLine(s, l string) string {
	var out []string
	for _, x := range strings.Split(s, "\n") {
		if !strings.Contains(x, l) {
			out = append(out, x)
		}
	}
	return strings.Join(out, "\n")
}
