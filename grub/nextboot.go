package grub

import (
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// What check and grub show both ask of a boot setup to tell "configured,
// reboot pending" from "configured, but the boot menu lacks it" and from
// "configured, yet the last boot did not get it": asked here, once, so that
// their verdicts cannot part.

// BootMenuLacks is MenuLacks where a generated GRUB menu is what boots
// (GRUB kinds): on other kinds the menu under /boot is not read at boot
// (BLS entries, systemd-boot's; a proxmox-boot-tool node boots the
// grub.cfg on its ESPs) and lacks nothing.
func (b *Boot) BootMenuLacks(root *host.Root, req Request) (menu string, lacks bool) {
	switch b.Kind {
	case KindGRUB, KindGRUB2:
		return MenuLacks(root, req)
	case KindSystemdBoot, KindKernelstub:
		// kernel-install makes the entry from /etc/kernel/cmdline,
		// kernelstub from its kernel_options
		if b.entryLacks(req) {
			return b.Entry.Path, true
		}
	}
	return "", false
}

// MenuEntry says which entry of the menu BootMenuLacks judges.
func (b *Boot) MenuEntry() string {
	switch b.Kind {
	case KindSystemdBoot:
		return "the running kernel's entry"
	case KindKernelstub:
		return "kernelstub's entry"
	}
	return "its first entry"
}

// MenuRegenerate is the command that gives the boot menu BootMenuLacks
// named what the files have: the GRUB menu's (RegenerateCommand), or
// kernel-install add for each kernel (systemd-boot).
func (b *Boot) MenuRegenerate(root *host.Root, menu string) string {
	if b.Kind == KindKernelstub {
		return "kernelstub" // writes the entry again from its configuration
	}
	if b.Kind == KindSystemdBoot {
		var s []string
		for _, c := range b.kernelInstall() {
			s = append(s, host.ShellQuote(c))
		}
		if len(s) == 0 {
			return "kernel-install add KVER /lib/modules/KVER/vmlinuz for each kernel"
		}
		return strings.Join(s, "; ")
	}
	return RegenerateCommand(root, menu)
}

// ChangedSince reports whether a file the next boot's arguments come from
// (those src names, and the GRUB defaults files where they are read)
// changed after t, the last boot; true when t is zero (unknown).
func (b *Boot) ChangedSince(root *host.Root, src *Source, t time.Time) bool {
	if t.IsZero() {
		return true
	}
	var files []string
	if src != nil {
		for _, f := range strings.Split(src.File, " + ") {
			files = append(files, strings.Fields(f + " ")[0])
		}
	}
	if src == nil || src.Kind == "grub" || src.Kind == KindProxmox && b.ESPMode == ESPGRUB {
		for _, f := range b.Files {
			files = append(files, f.Path)
		}
	}
	if len(files) == 0 {
		return true
	}
	for _, f := range files {
		fi, err := root.Stat(f)
		if err != nil || fi.ModTime().After(t) {
			return true // unreadable: not known to be older
		}
	}
	return false
}
