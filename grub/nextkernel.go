package grub

import (
	"errors"
	"path"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// NextKernel is the kernel the next boot runs, as the bootloader's own
// configuration says: its release (the /lib/modules/RELEASE whose
// modules.builtin, modules.dep and config the persistence verdicts read)
// and the initramfs the entry loads. Release is "" when it cannot be told;
// Missing then says what was missing.
type NextKernel struct {
	Release string
	// Initrd is the initramfs of the entry, as a path in the root ("" when
	// the entry names none, or no file of that name exists).
	Initrd string
	// NoInitramfs: the entry loads no initramfs at all (it has no initrd
	// line: a BLS or systemd-boot entry without one, a grub.cfg entry
	// whose linux line has no initrd after it, Ubuntu's initrdless boot
	// under GRUB_FORCE_PARTUUID, see initrdfail.go). The kernel then
	// mounts the root itself: what loads early at that boot is the
	// kernel's built-in drivers and the root's own udev, systemd and
	// modprobe, never an initramfs generator's configuration. False where
	// an initrd line names a file not found (Initrd ""), and where the
	// entry is not known.
	NoInitramfs bool
	// From is the evidence: "/boot/grub/grub.cfg entry 'Debian GNU/Linux'
	// (default \"0\")".
	From    string
	Missing string
}

// FindNextKernel reads which kernel the next boot runs: the default entry
// of the generated GRUB menu (with grubenv's next_entry and saved_entry),
// of the BLS entries (GRUB's blscfg, or systemd-boot with loader.conf's
// default and its EFI variables), and where no bootloader says it, the one
// kernel installed. On a proxmox-boot-tool node the menu is on its ESPs,
// usually not mounted: read from the pin files and kernels refresh writes
// it from (proxmox_next.go).
func FindNextKernel(root *host.Root) NextKernel {
	b, err := Detect(root)
	var nk NextKernel
	switch {
	case errors.Is(err, ErrUnsupported):
		nk.Missing = "no bootloader configuration gpuprep reads (GRUB, BLS entries, systemd-boot, kernelstub, proxmox-boot-tool)"
	case err != nil:
		nk.Missing = err.Error()
	default:
		nk = b.nextKernel(root)
	}
	if nk.Release == "" {
		if k, ok := onlyKernel(root); ok {
			return NextKernel{Release: k, Initrd: imageOf(root, k), From: "the only kernel installed (/lib/modules/" + k + "), whatever the bootloader picks"}
		}
	}
	return nk
}

func (b *Boot) nextKernel(root *host.Root) NextKernel {
	switch b.Kind {
	case KindGRUB, KindGRUB2:
		return grubMenuKernel(root, b.Kind)
	case KindBLS, KindRpmOstree:
		return blsGRUBKernel(root)
	case KindSystemdBoot, KindKernelstub:
		return sdBootKernel(root)
	case KindProxmox:
		return proxmoxNextKernel(root, b)
	}
	return NextKernel{Missing: b.Kind + ": which kernel it boots next is not read"}
}

// onlyKernel is the one kernel release with a modules directory, when there
// is exactly one.
func onlyKernel(root *host.Root) (string, bool) {
	var ks []string
	for _, dir := range []string{"/lib/modules", "/usr/lib/modules"} {
		for _, k := range root.Names(dir) {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	if len(ks) != 1 {
		return "", false
	}
	return ks[0], true
}

// imageOf is the initramfs image of release k the distributions' tools
// name (initramfs-tools, dracut, SUSE), "" when none exists.
func imageOf(root *host.Root, k string) string {
	for _, p := range []string{"/boot/initrd.img-" + k, "/boot/initramfs-" + k + ".img", "/boot/initrd-" + k} {
		if root.Exists(p) {
			return p
		}
	}
	return ""
}

// kernelOfImage is the release in a kernel image's path: vmlinuz-RELEASE
// (Debian, RHEL: /boot/vmlinuz-6.1.0-18-amd64), or /RELEASE/linux as
// kernel-install lays out the ESP (/<machine-id>/6.8.0-45-generic/linux),
// the release a directory of /lib/modules in either case. "" when neither.
func kernelOfImage(root *host.Root, p string) string {
	if k, ok := strings.CutPrefix(path.Base(p), "vmlinuz-"); ok && k != "" {
		return k
	}
	if d := path.Base(path.Dir(p)); d != "." && d != "/" && (root.Exists("/lib/modules/"+d) || root.Exists("/usr/lib/modules/"+d)) {
		return d
	}
	return ""
}

// bootPath maps a path a bootloader reads, relative to the partition it
// reads it from, to the root: /boot/vmlinuz-K as it is where /boot is on
// the root file system, /vmlinuz-K as /boot/vmlinuz-K where /boot is a
// partition of its own (grub-mkconfig's 10_linux strips the mount point:
// make_system_path_relative_to_its_root). "" when neither exists.
func bootPath(root *host.Root, p string) string {
	if p == "" {
		return ""
	}
	for _, c := range []string{p, "/boot" + p, "/efi" + p, "/boot/efi" + p} {
		if root.Exists(c) {
			return c
		}
	}
	return ""
}

// NextBoot is the one reading of what the next boot gets, which check (its
// kernel-argument and VFIO verdicts, through NextRelease) and grub show
// (which prints it) both serve from: the next boot's kernel
// (FindNextKernel), and the release whose configuration Boot.Source reads
// for it: that kernel's, else running's where it is unknown.
func NextBoot(root *host.Root, running string) (NextKernel, string) {
	nk := FindNextKernel(root)
	if nk.Release != "" {
		return nk, nk.Release
	}
	return nk, strings.TrimSpace(running)
}

// NextRelease is NextBoot's release.
func NextRelease(root *host.Root, running string) string {
	_, k := NextBoot(root, running)
	return k
}
