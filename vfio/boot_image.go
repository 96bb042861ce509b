package vfio

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// BootImage is the initramfs the next boot loads, read: the strongest
// evidence of what binds a device at that boot, since it is what runs
// before the root's files are reached. The next boot's kernel is the one
// the bootloader boots next (grub.FindNextKernel), its image the one its
// entry names (else the one its release names); where the next kernel
// cannot be told, the running one, and KernelUnknown says so.
type BootImage struct {
	Kernel  string
	Booted  *initramfs.Booted // nil when no image of Kernel was found
	Next    grub.NextKernel   // Release "" when the next kernel is unknown
	running string
	cmdline []kargs.Param
	builtin bool // vfio-pci is built into Kernel (the root's modules.builtin)
}

// NewBootImage finds and reads the next boot's initramfs, for a boot with
// cmdline.
func NewBootImage(root *host.Root, cmdline []kargs.Param) *BootImage {
	kver, nk := nextKernel(root)
	running, _ := kernelrelease.Running(root)
	b := &BootImage{Kernel: kver, Next: nk, running: strings.TrimSpace(running), cmdline: cmdline, builtin: BuiltinModules(root, kver)["vfio_pci"]}
	switch {
	case nk.NoInitramfs:
		// no initramfs at all: /boot/initrd.img-K, there or not, is not
		// what this boot loads (NoInitramfs says why)
	case nk.Initrd != "":
		b.Booted = initramfs.ImageAt(root, nk.Initrd)
	default:
		b.Booted = initramfs.ImageFor(root, kver)
	}
	return b
}

// NoInitramfs says, where the next boot loads no initramfs, which
// evidence says so (its boot entry); "" otherwise. Early load at that boot
// is then the kernel's built-in drivers and its command line, then the
// root's own udev, systemd-modules-load and modprobe (with the root's
// modprobe.d): no initramfs generator's configuration applies.
func (b *BootImage) NoInitramfs() string {
	if !b.Next.NoInitramfs {
		return ""
	}
	return "the next boot loads no initramfs (" + b.Next.From + ")"
}

// KernelUnknown says, where the next boot's kernel cannot be told, what
// was missing and that the verdict read the running kernel's instead; ""
// when it is known.
func (b *BootImage) KernelUnknown() string {
	if b.Next.Release != "" || b.Kernel == "" {
		return ""
	}
	return "which kernel the next boot runs is unknown (" + b.Next.Missing + "): the running kernel " + b.Kernel + "'s modules and initramfs were read in its place"
}

// OtherKernel says, where the next boot runs another kernel than the
// running one, which and why; "" otherwise.
func (b *BootImage) OtherKernel() string {
	if b.Next.Release == "" || b.Next.Release == b.running {
		return ""
	}
	return "the next boot runs kernel " + b.Next.Release + " (" + b.Next.From + "), not the running " + b.running
}

// Readable reports whether the image was read whole, so that a verdict
// can rest on it.
func (b *BootImage) Readable() bool { return b.Booted != nil && b.Booted.Contents != nil }

// Unread says why no verdict can rest on the image.
func (b *BootImage) Unread() string {
	switch {
	case b.Kernel == "":
		return "the next boot's kernel is unknown (" + b.Next.Missing + "; /proc/sys/kernel/osrelease not readable), so is its initramfs"
	case b.Next.NoInitramfs:
		return b.NoInitramfs()
	case b.Booted == nil:
		return "no initramfs image of kernel " + b.Kernel + " in /boot"
	case b.Booted.Err != nil:
		return "the initramfs " + b.Booted.Path + " could not be read whole: " + b.Booted.Err.Error()
	}
	return ""
}

// ImageBinding is what the next boot's initramfs does with one device.
type ImageBinding struct {
	Binds bool   // it loads vfio-pci early with the device's ID
	How   string // for Binds: "loads vfio-pci with ids=10de:2335 (conf/modules:3)"
	// Taker is a module of the image whose modules.alias entry matches
	// the device (and that the image does not blacklist): udev loads it
	// in the initramfs and it takes the device unless vfio-pci has it.
	Taker string
	// EarlyNoID: the image loads vfio-pci early without the device's ID;
	// modprobe does not load a loaded module again, so the root's
	// `options vfio-pci ids=` are not applied after the switch to the
	// root.
	EarlyNoID string
	NoAliases bool // the image has modules but no modules.alias: which of them take it is unknown
}

// Binding reads what the image does with d; call only when Readable.
func (b *BootImage) Binding(root *host.Root, d *pci.Device) ImageBinding {
	c := b.Booted.Contents
	var ib ImageBinding
	id := d.VendorID + ":" + d.DeviceID
	modalias, _ := root.ReadString("/sys/bus/pci/devices/" + d.Address + "/modalias")
	takers := imageTakers(c, modalias)
	ib.Taker = takers.first
	ib.NoAliases = len(c.Aliases) == 0 && len(c.Modules) > 0
	if o := b.override(d); o != "" {
		ib.Binds, ib.How = true, "sets its driver_override to vfio-pci ("+o+"), so no other driver takes it at early boot and vfio-pci binds it when it loads"
		return ib
	}
	builtin := b.builtin || c.Builtin["vfio_pci"]
	have := builtin || c.Modules["vfio_pci"] != ""
	early, loaded := vfioLoads(c, takers.all)
	ids := ""
	if IDsOnCmdline(b.cmdline, d) {
		ids = "vfio-pci.ids= on the kernel command line"
	} else if !builtin {
		ids = imageIDs(c, id)
	}
	if have {
		ib.verdict(builtin, early, loaded, ids, id)
	}
	return ib
}

// verdict sets whether an image that has vfio-pci (builtin, or a module
// loaded early and loaded at all, "" none) binds the device of id, given
// the ids= that name it ("" none), or loads vfio-pci without it.
func (ib *ImageBinding) verdict(builtin bool, early, loaded, ids, id string) {
	switch {
	case builtin && ids != "":
		ib.Binds, ib.How = true, "has vfio-pci built into the kernel, with "+ids
	case early != "" && ids != "":
		ib.Binds, ib.How = true, "loads vfio-pci ("+early+") with "+ids
	case loaded != "" && !builtin && ids == "":
		ib.EarlyNoID = "loads vfio-pci (" + loaded + ") without " + id + " in its ids"
	}
}

// takers are the modules of an image whose modules.alias entry matches a
// device (not vfio-pci, nor one the image lacks or blacklists): first, the
// first of them in alias order.
type takers struct {
	all   map[string]bool
	first string
}

// imageTakers are the takers of the device of modalias in c.
func imageTakers(c *initramfs.Contents, modalias string) takers {
	t := takers{all: map[string]bool{}}
	for _, a := range c.Aliases {
		if a.Module == "vfio_pci" || c.Modules[a.Module] == "" || c.Blacklist[a.Module] != "" {
			continue
		}
		if ok, err := path.Match(a.Pattern, modalias); err == nil && ok && !t.all[a.Module] {
			t.all[a.Module] = true
			if t.first == "" {
				t.first = a.Module
			}
		}
	}
	return t
}

// vfioLoads says where c loads vfio-pci in time (early: before udev's
// coldplug, or, with no taker, at all; else by a softdep on every taker:
// udev's modprobe of the taker loads it first), and where it loads it at
// all (loaded; early when that is all there is); "" for none.
func vfioLoads(c *initramfs.Contents, takers map[string]bool) (early, loaded string) {
	for _, l := range c.Early {
		if l.Module != "vfio_pci" {
			continue
		}
		if early == "" && (l.BeforeUdev || len(takers) == 0) {
			early = l.Source
		}
		if loaded == "" {
			loaded = l.Source
		}
	}
	if early == "" && len(takers) > 0 {
		early = softdepLoads(c, takers)
	}
	if loaded == "" {
		loaded = early
	}
	return early, loaded
}

// softdepLoads are the softdeps of c that load vfio-pci before each of
// takers, "" unless every taker has one.
func softdepLoads(c *initramfs.Contents, takers map[string]bool) string {
	var via []string
	for t := range takers {
		for _, s := range c.Softdeps {
			if s.Module == t && slices.Contains(s.Pre, "vfio_pci") {
				via = append(via, s.Source+" (softdep "+s.Module+" pre: vfio-pci)")
				break
			}
		}
	}
	if len(via) != len(takers) {
		return ""
	}
	slices.Sort(via)
	return strings.Join(via, ", ")
}

// imageIDs is the first ids= of vfio-pci (a module) in c naming id: on
// the line that loads it early, or in its modprobe options; "" for none.
func imageIDs(c *initramfs.Contents, id string) string {
	for _, l := range c.Early {
		if v, ok := strings.CutPrefix(fieldWith(l.Args, "ids="), "ids="); ok && l.Module == "vfio_pci" && idListHas(v, id) {
			return "ids=" + v + " (" + l.Source + ")"
		}
	}
	for _, o := range c.Options {
		if v, ok := strings.CutPrefix(o.Value, "ids="); ok && o.Module == "vfio_pci" && idListHas(v, id) {
			return "ids=" + v + " (" + o.Source + ")"
		}
	}
	return ""
}

// override is the source of a udev rule of the image that sets d's
// driver_override to vfio-pci at its add event, "" when none does.
func (b *BootImage) override(d *pci.Device) string {
	if b.Booted.Image == nil {
		return ""
	}
	for _, o := range b.Booted.Image.DriverOverrides() {
		if o.Driver == "vfio-pci" && o.Matches(d.Address, d.VendorID, d.DeviceID) {
			return o.Source
		}
	}
	return ""
}

// fieldWith is the first space-separated field of s with prefix p.
func fieldWith(s, p string) string {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, p) {
			return f
		}
	}
	return ""
}

// ImageStale says whether the initramfs images carry gpuprep's modprobe.d
// file as it is on the root, where an image can tell: one read whole with
// an etc/modprobe.d (a generator that does not copy modprobe.d says
// nothing by lacking the file). Like initramfs.OlderThan it asks whether
// any image was made since the change, not only the running kernel's:
// update-initramfs -u remakes the newest kernel's, dracut -f the running
// one's, so an image that carries the root's file is the command having
// run (and a re-run then has nothing to do). decided is false when no
// image can tell. Every image that can tell lacking it, or carrying
// another copy, is an image made before gpuprep's last change (a bind
// killed during update-initramfs, an unbind whose initramfs command
// failed, a hand edit not regenerated): why says so.
func ImageStale(root *host.Root) (why string, decided bool) {
	onRoot, err := root.ReadFile(ModprobeConf)
	present := err == nil
	if !present && root.Exists(ModprobeConf) {
		return "", false // there but unreadable: nothing to compare
	}
	for _, p := range initramfs.Images(root) {
		if !root.Exists(p) {
			continue
		}
		b, err := initramfs.ReadImage(root, p, initramfs.DefaultLimits)
		if err != nil {
			continue
		}
		if k, ok := b.Kind("etc/modprobe.d"); !ok || k != initramfs.Dir {
			continue
		}
		inImage, inOK := b.File(ModprobeConf)
		var w string
		switch {
		case present && !inOK:
			w = fmt.Sprintf("the initramfs %s lacks %s: it was made before gpuprep's persistent VFIO configuration was written", p, ModprobeConf)
		case present && string(inImage) != string(onRoot):
			w = fmt.Sprintf("the initramfs %s carries an older %s than the root's: it was not regenerated after gpuprep's persistent VFIO configuration changed", p, ModprobeConf)
		case !present && inOK:
			w = fmt.Sprintf("the initramfs %s still carries %s, which the root no longer has: it was not regenerated after gpuprep's persistent VFIO configuration was removed", p, ModprobeConf)
		default:
			return "", true // this image carries the root's state
		}
		if why == "" {
			why = w
		}
		decided = true
	}
	return why, decided
}
