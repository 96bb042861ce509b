package grub

import "strings"

// Ubuntu's grub-mkconfig, where GRUB_FORCE_PARTUUID is set (Ubuntu's cloud
// images set it in /etc/default/grub.d/40-force-partuuid.cfg), writes each
// Linux entry to boot without an initramfs, and with one only after such a
// boot failed:
//
//	if [ "${initrdfail}" = 1 ]; then
//	  echo 'GRUB_FORCE_PARTUUID set, initrdless boot failed. Attempting with initrd.'
//	  linux /boot/vmlinuz-K root=PARTUUID=... ro ARGS
//	  initrd /boot/initrd.img-K
//	else
//	  echo 'GRUB_FORCE_PARTUUID set, attempting initrdless boot.'
//	  linux /boot/vmlinuz-K root=PARTUUID=... ro ARGS panic=-1
//	fi
//	initrdfail
//
// The entry's initrdfail function sets initrdfail=1 in grubenv before the
// kernel starts, and a boot that gets as far as the root file system
// unsets it again (grub-initrd-fallback.service). So where grubenv holds
// no initrdfail=1, the next boot loads no initramfs at all: what it loads
// early comes from the root file system, not from /boot/initrd.img-K.
// recordfail, Ubuntu's other grubenv flag, changes only the menu's timeout
// (00_header: GRUB_RECORDFAIL_TIMEOUT), not the entry or its arguments.

// initrdfailIf is the line that opens the branch taken after a failed boot.
const initrdfailIf = `if [ "${initrdfail}" = 1 ]; then`

// initrdfailBranch is an entry's fallback boot: the linux and initrd lines of
// its initrdfail=1 branch.
type initrdfailBranch struct {
	linux, initrd string
}

// initrdfailLine follows a line l of an entry through the if/else/fi of
// initrdfailIf. It reports whether the line is one of those three, and
// into which branch the entry's linux and initrd lines go: the fallback
// (true) or the entry's own.
func (it *menuItem) initrdfailLine(l string) (handled bool) {
	switch {
	case l == initrdfailIf:
		it.fail, it.branch = &initrdfailBranch{}, 't'
	case it.branch == 't' && l == "else":
		it.branch = 'e'
	case it.branch != 0 && l == "fi":
		it.branch = 0
	default:
		return false
	}
	return true
}

// bootLine records a linux or initrd line (w its words) where it belongs.
func (it *menuItem) bootLine(w []string) {
	linux, initrd := &it.linux, &it.initrd
	if it.branch == 't' {
		linux, initrd = &it.fail.linux, &it.fail.initrd
	}
	switch w[0] {
	case "linux", "linuxefi", "linux16":
		*linux = w[1]
	case "initrd", "initrdefi", "initrd16":
		if i := lastImage(w[1:]); i != "" {
			*initrd = i
		}
	}
}

// lastImage is the initramfs of an initrd line's images ws: the last
// (microcode images come first), leaving out variables GRUB expands from
// grubenv, which are extra images or empty (RHEL's BLS entries as
// 20-grub.install writes them: "initrd /initramfs-K.img $tuned_initrd",
// tuned's variable empty unless a profile sets one). "" when none.
func lastImage(ws []string) string {
	for i := len(ws) - 1; i >= 0; i-- {
		if !strings.HasPrefix(ws[i], "$") {
			return ws[i]
		}
	}
	return ""
}

// bootOf is the linux and initrd lines entry it boots with, given grubenv,
// and what the from of a NextKernel adds to say so ("" for an entry
// without the initrdfail branches).
func (it *menuItem) bootOf(env map[string]string, envPath string) (linux, initrd, note string) {
	switch {
	case it.fail == nil:
		return it.linux, it.initrd, ""
	case strings.TrimSpace(env["initrdfail"]) == "1":
		return it.fail.linux, it.fail.initrd, ", with its initramfs: " + envPath + " has initrdfail=1 (the boot without one failed)"
	}
	return it.linux, it.initrd, ", without an initramfs (GRUB_FORCE_PARTUUID's initrdless boot: " + envPath + " has no initrdfail=1)"
}
