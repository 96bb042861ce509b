package grub

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// nextRoot is a root with two kernels installed (6.1.0-18 and 6.1.0-17,
// modules and images) and files.
func nextRoot(t *testing.T, files map[string]string, raw map[string][]byte) *host.Root {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	for _, k := range []string{"6.1.0-18-amd64", "6.1.0-17-amd64"} {
		b.File("/lib/modules/"+k+"/modules.builtin", "").File("/boot/vmlinuz-"+k, "kernel").File("/boot/initrd.img-"+k, "image")
	}
	for p, c := range files {
		b.File(p, c)
	}
	for p, c := range raw {
		b.Bytes(p, c)
	}
	require.NoError(t, b.Err())
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r
}

// debianMenu is testdata/nextboot/debian12-grub.cfg with GRUB_DEFAULT def
// and the kernels under boot ("/boot", or "" for a /boot partition).
func debianMenu(t *testing.T, def, boot string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/nextboot/debian12-grub.cfg")
	require.NoError(t, err)
	return strings.NewReplacer("@DEFAULT@", def, "@BOOT@", boot).Replace(string(b))
}

// grubenv is a GRUB environment block as grub-editenv writes it (1024
// bytes, '#' padding).
func grubenv(vars ...string) string {
	s := "# GRUB Environment Block\n"
	for _, v := range vars {
		s += v + "\n"
	}
	return s + strings.Repeat("#", 1024-len(s))
}

const debianDefaults = "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"\"\n"

func TestNextKernelGRUBMenu(t *testing.T) {
	base := map[string]string{DefaultsFile: debianDefaults, "/usr/sbin/update-grub": "#!/bin/sh\n"}
	with := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	// GRUB_DEFAULT=0: the top-level entry, the newest kernel
	nk := FindNextKernel(nextRoot(t, with(map[string]string{"/boot/grub/grub.cfg": debianMenu(t, "0", "/boot")}), nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.Equal(t, "/boot/initrd.img-6.1.0-18-amd64", nk.Initrd)
	require.Contains(t, nk.From, "/boot/grub/grub.cfg:106 entry 'Debian GNU/Linux' (default \"0\")")

	// grub-reboot "1>2": the submenu's third entry, the older kernel, once
	nk = FindNextKernel(nextRoot(t, with(map[string]string{"/boot/grub/grub.cfg": debianMenu(t, "0", "/boot"),
		"/boot/grub/grubenv": grubenv("next_entry=1>2")}), nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
	require.Contains(t, nk.From, "(default \"1>2\" from /boot/grub/grubenv)")

	// GRUB_DEFAULT=saved, grub-set-default by ids: saved_entry decides
	saved := "saved_entry=gnulinux-advanced-3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77>gnulinux-6.1.0-17-amd64-advanced-3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77"
	nk = FindNextKernel(nextRoot(t, with(map[string]string{"/boot/grub/grub.cfg": debianMenu(t, "${saved_entry}", "/boot"),
		"/boot/grub/grubenv": grubenv(saved)}), nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
	// ... by title too; with GRUB_DEFAULT=0 saved_entry is not read
	nk = FindNextKernel(nextRoot(t, with(map[string]string{"/boot/grub/grub.cfg": debianMenu(t, "${saved_entry}", "/boot"),
		"/boot/grub/grubenv": grubenv("saved_entry=Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-17-amd64 (recovery mode)")}), nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
	nk = FindNextKernel(nextRoot(t, with(map[string]string{"/boot/grub/grub.cfg": debianMenu(t, "0", "/boot"),
		"/boot/grub/grubenv": grubenv(saved)}), nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)

	// /boot a partition of its own: the menu's paths are relative to it
	nk = FindNextKernel(nextRoot(t, with(map[string]string{"/boot/grub/grub.cfg": debianMenu(t, "1>2", "")}), nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
	require.Equal(t, "/boot/initrd.img-6.1.0-17-amd64", nk.Initrd)

	// no menu and two kernels: unknown, and says what was missing
	nk = FindNextKernel(nextRoot(t, base, nil))
	require.Empty(t, nk.Release)
	require.Contains(t, nk.Missing, "the GRUB menu /boot/grub/grub.cfg is not readable")
}

// kernel-install's entry for kernel k (90-loaderentry.install, systemd
// 252): machine-id/KVER/linux on the ESP.
func sdEntry(k string) string {
	const mid = "8a6e1c0b2d3f4e5a9b7c6d5e4f3a2b1c"
	return "# Boot Loader Specification type#1 entry\n# File created by /usr/lib/kernel/install.d/90-loaderentry.install (systemd 252.22-1~deb12u1)\n" +
		"title      Debian GNU/Linux 12 (bookworm)\nversion    " + k + "\nmachine-id " + mid + "\nsort-key   debian\n" +
		"options    root=UUID=3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77 ro quiet\n" +
		"linux      /" + mid + "/" + k + "/linux\ninitrd     /" + mid + "/" + k + "/initrd.img-" + k + "\n"
}

func TestNextKernelSystemdBoot(t *testing.T) {
	const mid = "8a6e1c0b2d3f4e5a9b7c6d5e4f3a2b1c"
	files := map[string]string{
		KernelCmdlineFile:         "root=UUID=3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77 ro quiet\n",
		"/efi/loader/loader.conf": "timeout 3\n",
		"/efi/loader/entries/" + mid + "-6.1.0-17-amd64.conf":       sdEntry("6.1.0-17-amd64"),
		"/efi/loader/entries/" + mid + "-6.1.0-18-amd64.conf":       sdEntry("6.1.0-18-amd64"),
		"/efi/" + mid + "/6.1.0-17-amd64/initrd.img-6.1.0-17-amd64": "image",
		"/efi/" + mid + "/6.1.0-18-amd64/initrd.img-6.1.0-18-amd64": "image",
	}
	// no default: the first of the sorted entries, the newest version
	nk := FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.Equal(t, "/efi/"+mid+"/6.1.0-18-amd64/initrd.img-6.1.0-18-amd64", nk.Initrd, "the entry's initrd line, on the ESP")

	// loader.conf's default glob
	files["/efi/loader/loader.conf"] = "timeout 3\ndefault *-6.1.0-17-amd64.conf\n"
	nk = FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
	require.Contains(t, nk.From, "/efi/loader/loader.conf default")

	// bootctl set-default (LoaderEntryDefault) wins over loader.conf
	efi := map[string][]byte{"/sys/firmware/efi/efivars/LoaderEntryDefault-" + loaderEFIVendor: efiVarBytes(mid + "-6.1.0-18-amd64.conf")}
	nk = FindNextKernel(nextRoot(t, files, efi))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
	require.Contains(t, nk.From, "EFI variable LoaderEntryDefault")

	files["/efi/loader/loader.conf"] = "default @saved\n"
	nk = FindNextKernel(nextRoot(t, files, nil))
	require.Empty(t, nk.Release)
	require.Contains(t, nk.Missing, "@saved")
}

// efiVarBytes is an efivarfs file of a UTF-16LE string (4 bytes of
// attributes first; systemd.io/BOOT_LOADER_INTERFACE).
func efiVarBytes(s string) []byte {
	out := []byte{0x07, 0, 0, 0}
	for _, c := range s + "\x00" {
		out = append(out, byte(c), 0)
	}
	return out
}

// With one kernel installed the next boot runs it, whatever the
// bootloader; unknown bootloaders with two are unknown.
func TestNextKernelOnlyOneInstalled(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir).File("/lib/modules/6.1.0-18-amd64/modules.builtin", "").File("/boot/initrd.img-6.1.0-18-amd64", "image")
	require.NoError(t, b.Err())
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	nk := FindNextKernel(r)
	require.Equal(t, "6.1.0-18-amd64", nk.Release)
	require.Equal(t, "/boot/initrd.img-6.1.0-18-amd64", nk.Initrd)
	require.Contains(t, nk.From, "the only kernel installed")

	nk = FindNextKernel(nextRoot(t, nil, nil))
	require.Empty(t, nk.Release)
	require.Contains(t, nk.Missing, "no bootloader configuration")
}

func TestVerscmp(t *testing.T) {
	require.Equal(t, 1, verscmp("6.1.0-18-amd64", "6.1.0-9-amd64"))
	require.Equal(t, -1, verscmp("6.1.0-18~rc1", "6.1.0-18"))
	require.Equal(t, 0, verscmp("6.1.0", "6.1.0"))
	require.Equal(t, 1, verscmp("6.10", "6.9"))
}

// fedoraEntry is a BLS entry as Fedora 39's kernel-install
// (20-grub.install / grubby) writes it for kernel k.
func fedoraEntry(k, opts string) string {
	return "title Fedora Linux (" + k + ") 39 (Thirty Nine)\nversion " + k + "\nlinux /vmlinuz-" + k + "\ninitrd /initramfs-" + k + ".img\n" +
		"options " + opts + "\ngrub_users $grub_users\ngrub_arg --unrestricted\ngrub_class fedora\n"
}

// GRUB's blscfg with GRUB_DEFAULT=saved (Fedora's default): grubenv's
// saved_entry (grubby --set-default) picks the entry, and Boot.Source
// reads that entry's options for the next boot, not the running kernel's.
func TestNextKernelBLSSavedEntry(t *testing.T) {
	const mid = "2d1f0c9e8b7a46f5a4e3d2c1b0a99887"
	newer, older := "6.5.6-300.fc39.x86_64", "6.5.5-200.fc39.x86_64"
	files := map[string]string{
		DefaultsFile:                 "GRUB_TIMEOUT=5\nGRUB_DEFAULT=saved\nGRUB_CMDLINE_LINUX=\"rhgb quiet\"\nGRUB_ENABLE_BLSCFG=true\n",
		"/proc/sys/kernel/osrelease": newer + "\n",
		"/boot/loader/entries/" + mid + "-" + newer + ".conf": fedoraEntry(newer, "root=UUID=1 ro rhgb quiet"),
		"/boot/loader/entries/" + mid + "-" + older + ".conf": fedoraEntry(older, "root=UUID=1 ro rhgb quiet intel_iommu=on"),
		"/lib/modules/" + newer + "/modules.builtin":          "",
		"/lib/modules/" + older + "/modules.builtin":          "",
		"/boot/initramfs-" + older + ".img":                   "image",
	}
	r := nextRoot(t, files, map[string][]byte{"/boot/grub2/grubenv": []byte(grubenv("saved_entry=" + mid + "-" + older))})
	nk := FindNextKernel(r)
	require.Equal(t, older, nk.Release, nk.Missing)
	require.Equal(t, "/boot/initramfs-"+older+".img", nk.Initrd, "the entry's initrd line")
	b, err := Detect(r)
	require.NoError(t, err)
	require.Equal(t, KindBLS, b.Kind)
	src, err := b.Source(NextRelease(r, newer))
	require.NoError(t, err)
	require.Equal(t, "/boot/loader/entries/"+mid+"-"+older+".conf", src.File)
	require.Contains(t, src.Cmdline, "intel_iommu=on")

	// no saved_entry: the newest entry
	r = nextRoot(t, files, nil)
	require.Equal(t, newer, FindNextKernel(r).Release)
}

// A menu gpuprep cannot follow is no evidence: the next kernel is unknown
// and the reason names the file and line.
func TestNextKernelHostileMenu(t *testing.T) {
	base := map[string]string{DefaultsFile: debianDefaults}
	for name, menu := range map[string]string{
		"stray brace": "set default=\"0\"\n}\nmenuentry 'x' {\n\tlinux /boot/vmlinuz-6.1.0-18-amd64\n}\n",
		"not closed":  "menuentry 'x' {\n\tlinux /boot/vmlinuz-6.1.0-18-amd64\n",
		"no release":  "menuentry 'x' {\n\tlinux /vmlinuz root=/dev/sda1\n}\n",
		"a variable":  "set default=\"${chosen}\"\nmenuentry 'x' {\n\tlinux /boot/vmlinuz-6.1.0-18-amd64\n}\n",
		"too large":   strings.Repeat("#", maxMenu+1),
		"no entry":    "set default=\"0\"\n",
	} {
		files := map[string]string{"/boot/grub/grub.cfg": menu}
		for k, v := range base {
			files[k] = v
		}
		nk := FindNextKernel(nextRoot(t, files, nil))
		require.Empty(t, nk.Release, name)
		require.Contains(t, nk.Missing, "/boot/grub/grub.cfg", name)
	}
	nk := FindNextKernel(nextRoot(t, map[string]string{DefaultsFile: debianDefaults, "/boot/grub/grub.cfg": "}\n"}, nil))
	require.Contains(t, nk.Missing, "line 1")

	// a long menu (many kernels, os-prober's entries) is still read
	long := debianMenu(t, "1>2", "/boot") + strings.Repeat("# os-prober entry padding\n", 4000)
	nk = FindNextKernel(nextRoot(t, map[string]string{DefaultsFile: debianDefaults, "/boot/grub/grub.cfg": long}, nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
}

// systemd-boot's boot counting (src/boot/boot.c boot_entry_parse_tries,
// boot_entry_compare): an entry NAME+0-3.conf has no tries left and sorts
// last, so the older kernel boots; @saved follows LoaderEntryLastBooted.
func TestNextKernelSystemdBootCountingAndSaved(t *testing.T) {
	const mid = "8a6e1c0b2d3f4e5a9b7c6d5e4f3a2b1c"
	files := map[string]string{
		KernelCmdlineFile:         "root=UUID=3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77 ro quiet\n",
		"/efi/loader/loader.conf": "timeout 3\n",
		"/efi/loader/entries/" + mid + "-6.1.0-17-amd64.conf":     sdEntry("6.1.0-17-amd64"),
		"/efi/loader/entries/" + mid + "-6.1.0-18-amd64+0-3.conf": sdEntry("6.1.0-18-amd64"),
	}
	nk := FindNextKernel(nextRoot(t, files, nil))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)

	id, left, done := parseTries("Fedora+3-1.conf")
	require.Equal(t, "fedora.conf", id)
	require.Equal(t, []int{3, 1}, []int{left, done})

	// @saved: LoaderEntryLastBooted names the entry (its id without the counter)
	files["/efi/loader/entries/"+mid+"-6.1.0-18-amd64+2-1.conf"] = files["/efi/loader/entries/"+mid+"-6.1.0-18-amd64+0-3.conf"]
	delete(files, "/efi/loader/entries/"+mid+"-6.1.0-18-amd64+0-3.conf")
	files["/efi/loader/loader.conf"] = "default @saved\n"
	efi := map[string][]byte{"/sys/firmware/efi/efivars/LoaderEntryLastBooted-" + loaderEFIVendor: efiVarBytes(mid + "-6.1.0-17-amd64.conf")}
	nk = FindNextKernel(nextRoot(t, files, efi))
	require.Equal(t, "6.1.0-17-amd64", nk.Release, nk.Missing)
	require.Contains(t, nk.From, "LoaderEntryLastBooted")
	efi = map[string][]byte{"/sys/firmware/efi/efivars/LoaderEntryLastBooted-" + loaderEFIVendor: efiVarBytes(mid + "-6.1.0-18-amd64.conf")}
	nk = FindNextKernel(nextRoot(t, files, efi))
	require.Equal(t, "6.1.0-18-amd64", nk.Release, nk.Missing)
}
