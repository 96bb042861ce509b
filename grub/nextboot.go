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
	if b.Kind != KindGRUB && b.Kind != KindGRUB2 {
		return "", false
	}
	return MenuLacks(root, req)
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
