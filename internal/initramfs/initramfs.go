// Package initramfs finds the distribution's initramfs tool and images: what
// regenerates the initramfs after gpuprep changes a file early boot reads
// (modprobe.d, modules-load.d, udev rules), and whether that was done.
package initramfs

import (
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Command returns the command that regenerates the initramfs on the host
// under root: update-initramfs -u (initramfs-tools), dracut -f or
// mkinitcpio -P, the first found; nil when there is none.
func Command(root *host.Root) []string {
	for _, c := range [][]string{{"update-initramfs", "-u"}, {"dracut", "-f"}, {"mkinitcpio", "-P"}} {
		if root.FindProgram(c[0]) != "" {
			return c
		}
	}
	return nil
}

// Images are the initramfs images the distribution's tools make under
// /boot: initramfs-tools' /boot/initrd.img-KVER, dracut's
// /boot/initramfs-KVER.img (SUSE's /boot/initrd-KVER) for each kernel under
// /lib/modules or /usr/lib/modules, and mkinitcpio's
// /boot/initramfs-NAME.img and -fallback.img for each
// /etc/mkinitcpio.d/NAME.preset. Only these names: an interrupted tool's
// leftover (initrd.img-KVER.new) or a backup (.bak, .old-dkms) is not an
// image the next boot loads. Listed whether they exist or not.
func Images(root *host.Root) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, dir := range []string{"/lib/modules", "/usr/lib/modules"} {
		for _, k := range root.Names(dir) {
			add("/boot/initrd.img-" + k)
			add("/boot/initramfs-" + k + ".img")
			add("/boot/initrd-" + k)
		}
	}
	for _, n := range root.Names("/etc/mkinitcpio.d") {
		if name, ok := strings.CutSuffix(n, ".preset"); ok {
			add("/boot/initramfs-" + name + ".img")
			add("/boot/initramfs-" + name + "-fallback.img")
		}
	}
	return out
}

// OlderThan returns the initramfs images under /boot when every one of them
// is older than t, so that none was made since (a change at t is in none of
// them); nil when an image is as new as t, or none is found.
//
// Every image, not only the running kernel's: update-initramfs -u remakes
// the newest kernel's, dracut -f the running kernel's, mkinitcpio -P every
// preset's; any image made after t carries the change, and one made by the
// command gpuprep runs keeps a re-run from regenerating again.
func OlderThan(root *host.Root, t time.Time) []string {
	var older []string
	for _, img := range Images(root) {
		fi, err := root.Stat(img)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if !fi.ModTime().Before(t) {
			return nil
		}
		older = append(older, img)
	}
	return older
}
