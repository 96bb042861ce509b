package vfio

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// What the next boot does with nouveau, a module: udev loads it for every
// device whose modalias matches one of its modules.alias patterns (nouveau's
// PCI table: vendor 10de or 12d2, base class 03, display: nouveau_drm.c,
// nouveau_drm_pci_table), in the initramfs where the image carries it, and
// again in the root (udev's coldplug there), each time with
// KMOD_PROBE_APPLY_BLACKLIST: a `blacklist nouveau` of that stage's
// modprobe.d, or modprobe.blacklist=nouveau on the command line (libkmod's
// kcmdline), keeps it from loading by alias; rd.driver.blacklist=nouveau is
// dracut's, written into the initramfs's modprobe.d at its boot
// (dracut's parse-blacklist). module_blacklist=nouveau makes the kernel
// refuse it however it is asked (kernel/module/main.c: blacklisted()). A
// loaded nouveau takes the GPUs only where its init registers its PCI
// driver: with nouveau.modeset=0 (`options nouveau modeset=0`, or the
// kernel argument), or nomodeset with modeset left at -1
// (drm_firmware_drivers_only()), nouveau_drm_init returns first
// (drivers/gpu/drm/nouveau/nouveau_drm.c, v6.8).

// NouveauNext is what the next boot does with nouveau for the GPUs asked about.
type NouveauNext struct {
	Kernel string // the next boot's kernel release
	// Loads says, for each stage that loads nouveau and lets it take
	// GPUs, where and for which; empty when none does.
	Loads []string
	// Kept is what keeps nouveau off the GPUs at that boot, "" when
	// nothing does (or Loads is not empty).
	Kept string
	// Unknown is what could not be read to decide, "" when decided.
	Unknown string
	// Evidence says what the verdict rests on: the initramfs read, or why
	// it was not.
	Evidence string
}

// NouveauAtNextBoot judges what the next boot (its kernel, its initramfs,
// its command line cmdline) does with nouveau for gpus. onNode says root
// is the node itself (or gpuprep's snapshot of it, which copies the
// /lib/modules files check reads): a kernel without /lib/modules/RELEASE
// there has no module modprobe could load, where on another root the
// directory may be one its capture left out.
func NouveauAtNextBoot(root *host.Root, cmdline []kargs.Param, gpus []*pci.Device, onNode bool) NouveauNext {
	kver, nk := nextKernel(root)
	n := NouveauNext{Kernel: kver}
	switch {
	case kver == "":
		n.Unknown = "the next boot's kernel is unknown (" + nk.Missing + ")"
		return n
	case BuiltinModules(root, kver)["nouveau"]:
		n.Kept = "nouveau is built into kernel " + kver + " (judged as built in)"
		return n
	}
	if p, ok := ModuleForbidden(cmdline, "nouveau"); ok {
		n.Kept = p.String() + " on the next boot's kernel command line: the kernel refuses to load nouveau"
		return n
	}
	if why := modesetOff(cmdline); why != "" {
		n.Kept = why
		return n
	}
	mods := KernelModules(root, kver)
	if mods == nil && onNode && !root.Exists("/lib/modules/"+kver) && !root.Exists("/usr/lib/modules/"+kver) {
		n.Kept = "its kernel " + kver + " has no /lib/modules/" + kver + ", where modprobe looks for modules: udev can load no nouveau module"
		return n
	}
	if mods == nil {
		n.Unknown = "/lib/modules/" + kver + "/modules.dep cannot be read, so whether kernel " + kver + " ships nouveau is unknown"
		return n
	}
	if !mods["nouveau"] {
		n.Kept = "its kernel " + kver + " ships no nouveau module (/lib/modules/" + kver + "/modules.dep)"
		return n
	}
	pats, err := moduleAliases(root, kver, "nouveau")
	if err != nil {
		n.Unknown = err.Error() + ", so which devices nouveau is loaded for is unknown"
		return n
	}
	matched := matching(root, pats, gpus)
	if len(matched) == 0 {
		n.Kept = "the modules.alias of kernel " + kver + " matches none of them to nouveau"
		return n
	}
	imageRead := n.imageStage(root, cmdline, matched)
	n.rootStage(root, cmdline, kver, matched, imageRead)
	if len(n.Loads) > 0 {
		n.Kept = ""
	}
	return n
}

// imageStage judges the initramfs the next boot loads; read reports
// whether its verdict rests on the image (or on there being none).
func (n *NouveauNext) imageStage(root *host.Root, cmdline []kargs.Param, matched []*pci.Device) (read bool) {
	img := NewBootImage(root, cmdline)
	if why := img.NoInitramfs(); why != "" {
		n.Evidence = "the kernel and the root's files: " + why
		return true
	}
	if !img.Readable() {
		n.Evidence = "the root's files only: " + img.Unread()
		return false
	}
	p, c := img.Booted.Path, img.Booted.Contents
	n.Evidence = "the initramfs " + p + " and the root's files"
	if c.Modules["nouveau"] == "" {
		return true
	}
	var ms []string
	for _, d := range matched {
		if imageMatches(root, c, d) {
			ms = append(ms, d.Address)
		}
	}
	if len(ms) == 0 {
		return true
	}
	if imageKept(c, cmdline) == "" {
		n.Loads = append(n.Loads, fmt.Sprintf("the initramfs %s carries nouveau (%s) and does not blacklist it: its udev loads it for %s (modules.alias) before the root is mounted", p, c.Modules["nouveau"], strings.Join(ms, ", ")))
	}
	return true
}

// imageKept is what keeps the nouveau of image c off the GPUs at a boot
// with cmdline, "" when nothing does.
func imageKept(c *initramfs.Contents, cmdline []kargs.Param) string {
	switch {
	case c.Blacklist["nouveau"] != "":
		return "blacklisted in the initramfs (" + c.Blacklist["nouveau"] + ")"
	case cmdlineBlacklists(cmdline, "modprobe.blacklist"):
		return "modprobe.blacklist=nouveau on the next boot's kernel command line"
	case c.Generator == "dracut" && cmdlineBlacklists(cmdline, "rd.driver.blacklist"):
		return "rd.driver.blacklist=nouveau on the next boot's kernel command line (dracut's initramfs blacklists it)"
	}
	for _, o := range c.Options {
		if o.Module == "nouveau" && o.Value == "modeset=0" {
			return "loaded with modeset=0 (" + o.Source + "), so it registers no driver"
		}
	}
	return ""
}

// rootStage judges the root's udev, with the root's modprobe.d.
func (n *NouveauNext) rootStage(root *host.Root, cmdline []kargs.Param, kver string, matched []*pci.Device, imageRead bool) {
	f := &bootFacts{root: root, cmdline: cmdline, modprobe: modprobeFiles(root)}
	if bl := f.blacklist("nouveau"); bl != nil {
		n.Kept = "blacklisted for the root's udev (" + bl.Where() + " " + strings.TrimSpace(bl.Text) + ")"
		if fi, err := root.Stat(bl.Source); err == nil && !imageRead && bl.Source != NextCmdline {
			// an image not read, made before the blacklist: it may
			// carry nouveau without it
			if old := initramfs.OlderThan(root, fi.ModTime()); len(old) > 0 {
				n.Loads = append(n.Loads, "the initramfs ("+strings.Join(old, ", ")+") predates "+bl.Source+", so it may carry nouveau without the blacklist and load it before the root is mounted")
			}
		}
		return
	}
	for _, c := range f.modprobe {
		for i, l := range c.lines {
			if w := strings.Fields(l); len(w) >= 3 && w[0] == "options" && kargs.Norm(w[1]) == "nouveau" && containsWord(w[2:], "modeset=0") {
				n.Kept = fmt.Sprintf("loaded with modeset=0 (%s:%d), so it registers no driver", c.path, i+1)
				return
			}
		}
	}
	n.Loads = append(n.Loads, "the root's udev loads nouveau for "+addresses(matched)+" (kernel "+kver+" ships it, its modules.alias matches them, and no modprobe.d file or modprobe.blacklist= blacklists it)")
}

func containsWord(ws []string, w string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// modesetOff says why nouveau's init registers no driver at a boot with
// cmdline ("" when it does): nouveau.modeset=0, or nomodeset with
// nouveau.modeset not given.
func modesetOff(cmdline []kargs.Param) string {
	if p, ok := kargs.Last(cmdline, "nouveau.modeset"); ok {
		if p.Value == "0" {
			return p.String() + " on the next boot's kernel command line: nouveau's init returns before it registers its driver"
		}
		return ""
	}
	if _, ok := kargs.Last(cmdline, "nomodeset"); ok {
		return "nomodeset on the next boot's kernel command line: nouveau's init returns before it registers its driver (drm_firmware_drivers_only)"
	}
	return ""
}

func cmdlineBlacklists(cmdline []kargs.Param, key string) bool {
	for _, p := range cmdline {
		if kargs.Norm(p.Key) == kargs.Norm(key) && listHas(p.Value, "nouveau") {
			return true
		}
	}
	return false
}

// moduleAliases are the patterns of kernel kver's modules.alias for module m.
func moduleAliases(root *host.Root, kver, m string) ([]string, error) {
	p := "/lib/modules/" + kver + "/modules.alias"
	b, err := root.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read", p)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "alias" && kargs.Norm(f[2]) == m {
			out = append(out, f[1])
		}
	}
	return out, nil
}

// deviceModalias is d's modalias from sysfs, else built from its IDs and
// class as the kernel writes it (pci-sysfs.c, modalias_show; the
// subsystem IDs unknown, so only patterns with * there match).
func deviceModalias(root *host.Root, d *pci.Device) string {
	if s, err := root.ReadString("/sys/bus/pci/devices/" + d.Address + "/modalias"); err == nil && strings.HasPrefix(s, "pci:") {
		return strings.TrimSpace(s)
	}
	if len(d.Class) != 6 {
		return ""
	}
	return fmt.Sprintf("pci:v0000%sd0000%ssv*sd*bc%ssc%si%s", strings.ToUpper(d.VendorID), strings.ToUpper(d.DeviceID), strings.ToUpper(d.Class[0:2]), strings.ToUpper(d.Class[2:4]), strings.ToUpper(d.Class[4:6]))
}

// matching are the gpus whose modalias one of pats matches.
func matching(root *host.Root, pats []string, gpus []*pci.Device) []*pci.Device {
	var out []*pci.Device
	for _, d := range gpus {
		ma := deviceModalias(root, d)
		for _, p := range pats {
			if ok, err := path.Match(p, ma); err == nil && ok {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func addresses(ds []*pci.Device) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Address)
	}
	return strings.Join(out, ", ")
}

// imageMatches reports whether the image's modules.alias matches d to
// nouveau.
func imageMatches(root *host.Root, c *initramfs.Contents, d *pci.Device) bool {
	ma := deviceModalias(root, d)
	for _, a := range c.Aliases {
		if a.Module != "nouveau" {
			continue
		}
		if ok, err := path.Match(a.Pattern, ma); err == nil && ok {
			return true
		}
	}
	return false
}
