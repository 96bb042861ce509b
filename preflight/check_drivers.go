package preflight

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/snapshot"
	"github.com/gpuprep/gpuprep/iommu"
	"github.com/gpuprep/gpuprep/vfio"
)

func checkNouveau(e *Env) []Finding {
	var bound []string
	for _, g := range e.GPUs {
		if g.Driver == "nouveau" {
			bound = append(bound, g.Address)
		}
	}
	if vfio.NouveauBuiltin(e.Root) {
		return builtinNouveau(e, bound)
	}
	if len(bound) == 0 && uncaptured(e, "/sys/module") {
		return []Finding{{Status: Error, Subject: "/sys/module/nouveau",
			Message: "the root has no /sys/module: cannot tell whether nouveau is loaded (no selected GPU is bound to it)",
			Remedy:  "run gpuprep on the node itself, or give --root a root that holds /sys/module"}}
	}
	loaded := e.Root.Exists("/sys/module/nouveau")
	blacklisted, where := nouveauBlacklisted(e)
	bl := "not blacklisted"
	if blacklisted {
		bl = "blacklisted in " + where
	}
	switch {
	case len(bound) > 0:
		return nouveauBoundFindings(e, bound, bl)
	case loaded:
		f := Finding{Status: Warn, Subject: "/sys/module/nouveau",
			Message: "nouveau is loaded (" + bl + "), though no selected GPU uses it: it may grab a GPU that another driver releases",
			Remedy:  "blacklist nouveau and regenerate the initramfs, then unload it (modprobe -r nouveau) or reboot"}
		if blacklisted {
			// the blacklist is there: what is left is unloading it, and
			// an initramfs made before the blacklist loads it at boot
			f.Remedy = "unload it: modprobe -r nouveau (or reboot; it drives no selected GPU)"
			if fi, err := e.Root.Stat(where); err == nil && where != "/proc/cmdline" {
				if old := initramfs.OlderThan(e.Root, fi.ModTime()); len(old) > 0 {
					f.Remedy += "; the initramfs (" + strings.Join(old, ", ") + ") predates " + where + ": regenerate it (update-initramfs -u, dracut -f or mkinitcpio -P) or it loads nouveau at boot"
				}
			}
		}
		return []Finding{f}
	}
	return []Finding{nouveauNextBoot(e, bl)}
}

// nouveauNextBoot is driver.nouveau where nouveau is not loaded now: what
// the next boot does with it (vfio.NouveauAtNextBoot: the next kernel's
// modules and modules.alias, the initramfs it loads, the blacklists of the
// initramfs and the root, the next command line). Loaded there for a
// selected GPU it takes it (unless a driver that loads earlier has it), so
// "not loaded now" is true only until the reboot: a warn, as a bind that
// a reboot undoes is; what cannot be read to decide is a warn too.
func nouveauNextBoot(e *Env, bl string) Finding {
	src, err := e.Configured()
	nn := vfio.NouveauAtNextBoot(e.Root, vfio.NextBootArgs(src, err, e.Cmdline), e.GPUs, e.Root.IsLive() || snapshot.OfRunningSystem(e.Root))
	f := Finding{Status: Pass, Subject: "/sys/module/nouveau", Message: "nouveau not loaded (" + bl + ")"}
	switch {
	case len(e.GPUs) == 0:
	case len(nn.Loads) > 0:
		f.Status = Warn
		f.Message += ", but the next boot loads it: " + strings.Join(nn.Loads, "; ") + " (evidence: " + nn.Evidence + ")"
		f.Remedy = blacklistRemedy
		if bl != "not blacklisted" {
			f.Remedy = "regenerate the initramfs of kernel " + nn.Kernel + " (update-initramfs -u -k " + nn.Kernel + ", dracut -f --kver " + nn.Kernel + " or mkinitcpio -P) so that it carries the blacklist"
		}
	case nn.Unknown != "":
		f.Status = Warn
		f.Message += "; whether the next boot loads it cannot be told: " + nn.Unknown
		f.Remedy = "give gpuprep the next boot's kernel modules (/lib/modules/RELEASE: modules.dep, modules.alias), or blacklist nouveau (`blacklist nouveau` in a file under /etc/modprobe.d, then regenerate the initramfs)"
	default:
		f.Message += "; nor does the next boot: " + nn.Kept
		if nn.Evidence != "" {
			f.Message += " (evidence: " + nn.Evidence + ")"
		}
	}
	return f
}

// builtinRemedy is what keeps a built-in nouveau off the GPUs: neither a
// blacklist (modprobe's, and a built-in module is never modprobed) nor
// modprobe -r (it cannot remove what is part of the kernel image) can;
// nouveau.modeset=0 on the kernel command line makes nouveau's init return
// before it registers its PCI driver.
var builtinRemedy = "add " + vfio.NouveauOff.String() + " to the kernel command line (gpuprep grub ensure " + vfio.NouveauOff.String() + ") and reboot: nouveau's init then returns before it registers its driver"

// builtinNouveau is driver.nouveau on a kernel with nouveau built in: it
// is "loaded" whenever its driver is registered (/sys/module/nouveau is
// there regardless, holding its parameters), and a blacklist, the
// initramfs or modprobe -r do nothing to it.
func builtinNouveau(e *Env, bound []string) []Finding {
	const subject = "/sys/bus/pci/drivers/nouveau"
	registered := e.Root.Exists(subject)
	off := kargs.Satisfied(e.Cmdline, vfio.NouveauOff)
	what := "nouveau is built into kernel " + e.Host.Kernel + " (modules.builtin), so a blacklist, the initramfs and modprobe -r cannot remove it"
	if len(bound) == 0 {
		switch {
		case off && !registered:
			return []Finding{{Status: Pass, Subject: subject, Message: "nouveau is built into the kernel and kept off by " + vfio.NouveauOff.String() + " (/proc/cmdline): no nouveau driver registered"}}
		case !registered:
			return []Finding{{Status: Pass, Subject: subject, Message: "nouveau is built into the kernel, but no nouveau driver is registered"}}
		}
		f := Finding{Status: Warn, Subject: subject,
			Message: what + ", and its driver is registered, though no selected GPU uses it: it takes every NVIDIA display device at boot, and may grab a GPU that another driver releases",
			Remedy:  builtinRemedy}
		if off {
			f.Message += "; " + vfio.NouveauOff.String() + " is on /proc/cmdline yet nouveau registered its driver: this kernel does not honour it"
			f.Remedy = "this kernel's nouveau ignores " + vfio.NouveauOff.String() + ": boot a kernel with nouveau as a module (then blacklist it) or one that honours the argument"
		}
		return []Finding{f}
	}
	sub := strings.Join(bound, ",")
	msg := fmt.Sprintf("nouveau drives %d selected %s; %s", len(bound), plural.Word(len(bound), "GPU"), what)
	if off {
		msg += "; " + vfio.NouveauOff.String() + " is on /proc/cmdline yet nouveau registered its driver: this kernel does not honour it"
	}
	pt := "gpuprep vfio bind --persist"
	out := []Finding{
		{Status: Fail, Subject: sub, Modes: []Mode{Container},
			Message: msg + ": the GPU Operator's driver container cannot load the NVIDIA driver while nouveau holds them",
			Remedy:  builtinRemedy + "; the GPU Operator's driver container then takes the GPUs (gpuprep apply --mode container does it: it adds the argument through the bootloader configuration and stops for the reboot)"},
		{Status: Fail, Subject: sub, Modes: []Mode{VMPassthrough},
			Message: msg + ": vfio-pci cannot take them while it does, and at every boot nouveau takes them before vfio-pci loads",
			Remedy:  pt + " (binds them to vfio-pci now), and " + builtinRemedy + ", or nouveau has them again after the next boot",
			Fixable: true, FixCommand: pt},
	}
	vg := Finding{Status: Fail, Subject: sub, Modes: []Mode{VMVGPU},
		Message: msg + ": the vGPU manager's nvidia driver cannot take them"}
	if allConsumer(e) {
		vg.Remedy = "none for vm-vgpu: GeForce/TITAN boards cannot host NVIDIA vGPU (see vgpu.support); for containers or vm-passthrough see those modes' remedies"
	} else {
		vg.Remedy = builtinRemedy + "; the vGPU manager's nvidia driver then takes the GPUs (gpuprep vgpu install blacklists nouveau, which does nothing to a built-in one)"
	}
	return append(out, vg)
}

// blacklistRemedy is how to keep nouveau off the GPUs by hand.
const blacklistRemedy = "blacklist nouveau (`blacklist nouveau` and `options nouveau modeset=0` in a file under /etc/modprobe.d), regenerate the initramfs (update-initramfs -u, dracut -f or mkinitcpio -P) and reboot"

// nouveauBoundFindings says, per mode, what takes the GPUs from nouveau:
// vfio-pci for vm-passthrough (gpuprep vfio bind --persist also blacklists
// nouveau), the vGPU manager for vm-vgpu (gpuprep vgpu install blacklists
// nouveau), the GPU Operator's driver container for containers, once
// nouveau is blacklisted. Binding to vfio-pci would serve neither of the
// last two.
func nouveauBoundFindings(e *Env, bound []string, bl string) []Finding {
	subject := strings.Join(bound, ",")
	msg := fmt.Sprintf("nouveau drives %s (%s)", plural.N(len(bound), "selected GPU"), bl)
	manual := blacklistRemedy
	if bl != "not blacklisted" {
		manual = "regenerate the initramfs (update-initramfs -u, dracut -f or mkinitcpio -P) so that it holds the blacklist, and reboot"
	}
	pt := "gpuprep vfio bind --persist"
	out := []Finding{
		{Status: Fail, Subject: subject, Modes: []Mode{Container},
			Message: msg + ": the GPU Operator's driver container cannot load the NVIDIA driver while nouveau holds them",
			Remedy:  manual + "; the GPU Operator's driver container then takes the GPUs (gpuprep apply --mode container does it: it writes the blacklist, regenerates the initramfs and unloads nouveau, and stops for the reboot only when nouveau is in use)"},
		{Status: Fail, Subject: subject, Modes: []Mode{VMPassthrough},
			Message: msg + ": vfio-pci cannot take them while it does",
			Remedy:  pt + " (binds them to vfio-pci persistently and blacklists nouveau; regenerates the initramfs)",
			Fixable: true, FixCommand: pt},
	}
	vg := Finding{Status: Fail, Subject: subject, Modes: []Mode{VMVGPU},
		Message: msg + ": the vGPU manager's nvidia driver cannot take them"}
	if allConsumer(e) {
		vg.Remedy = "none for vm-vgpu: GeForce/TITAN boards cannot host NVIDIA vGPU (see vgpu.support); for containers or vm-passthrough see those modes' remedies"
	} else if e.Manager().Installed {
		vg.Remedy = manual + "; the vGPU manager's nvidia driver then takes the GPUs"
	} else {
		fix := "gpuprep vgpu install --driver " + e.vgpuInstaller()
		vg.Remedy = fix + " (blacklists nouveau, then installs the vGPU manager; reboot if nouveau stays loaded)"
		vg.Fixable, vg.FixCommand = true, fix
	}
	return append(out, vg)
}

var blacklistRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*blacklist\s+nouveau\s*$`) })

func nouveauBlacklisted(e *Env) (bool, string) {
	for _, dir := range []string{"/etc/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"} {
		files, _ := e.Root.Glob(dir + "/*.conf")
		for _, f := range files {
			if b, err := e.Root.ReadFile(f); err == nil && blacklistRe().Match(b) {
				return true, f
			}
		}
	}
	if p, ok := lastArg(e, "modprobe.blacklist"); ok && strings.Contains(","+p+",", ",nouveau,") {
		return true, "/proc/cmdline"
	}
	return false, ""
}

func lastArg(e *Env, key string) (string, bool) {
	for i := len(e.Cmdline) - 1; i >= 0; i-- {
		if e.Cmdline[i].Key == key {
			return e.Cmdline[i].Value, true
		}
	}
	return "", false
}

// moduleState says whether a module is built in, installed or missing for
// the running kernel, from /lib/modules/KVER/modules.{builtin,dep}.
func moduleState(builtin, dep, mod string) string {
	want := strings.ReplaceAll(mod, "-", "_")
	match := func(list string) bool {
		for _, l := range strings.Split(list, "\n") {
			f, _, _ := strings.Cut(l, ":")
			b := f[strings.LastIndexByte(f, '/')+1:]
			if i := strings.Index(b, ".ko"); i > 0 {
				b = b[:i]
			}
			if strings.ReplaceAll(b, "-", "_") == want && b != "" {
				return true
			}
		}
		return false
	}
	switch {
	case match(builtin):
		return "built in"
	case match(dep):
		return "module"
	}
	return ""
}

func checkVFIOModules(e *Env) []Finding {
	k := e.Host.Kernel
	if k == "" {
		what := "/proc/sys/kernel/osrelease not readable"
		var refused *kernelrelease.RefusedError
		if _, err := kernelrelease.Running(e.Root); errors.As(err, &refused) {
			what = "/proc/sys/kernel/osrelease: " + refused.Error()
		}
		return []Finding{{Status: Error, Subject: "/proc/sys/kernel/osrelease",
			Message: fmt.Sprintf("the running kernel's release is unknown (%s): gpuprep cannot tell which /lib/modules/RELEASE holds its modules, so whether vfio-pci can be loaded is unknown", what),
			Remedy:  "run gpuprep on the node itself, or give --root a root that holds /proc/sys/kernel/osrelease and the running kernel's /lib/modules/RELEASE"}}
	}
	run := readModuleIndex(e, k, true)
	fs := run.findings(e)
	nk := grub.FindNextKernel(e.Root)
	if nk.Release == "" || nk.Release == k {
		return fs
	}
	return nextKernelModules(e, fs[0], readModuleIndex(e, nk.Release, false), nk)
}

// vfioModuleNames are the modules a passed-through GPU needs.
var vfioModuleNames = []string{"vfio", "vfio_iommu_type1", "vfio_pci"}

// moduleIndex is what kernel k's module index says of vfioModuleNames.
type moduleIndex struct {
	k, base                string
	missing, unknown, have []string
	errDep, errBuiltin     error
}

// readModuleIndex reads kernel k's modules.dep and modules.builtin for
// the VFIO modules; running: k is the running kernel, whose /sys/module
// counts too (a module loaded, or built in with parameters).
func readModuleIndex(e *Env, k string, running bool) moduleIndex {
	mi := moduleIndex{k: k, base: "/lib/modules/" + k}
	dep, errDep := e.Root.ReadFile(mi.base + "/modules.dep")
	builtin, errBuiltin := e.Root.ReadFile(mi.base + "/modules.builtin")
	mi.errDep, mi.errBuiltin = errDep, errBuiltin
	for _, m := range vfioModuleNames {
		st := moduleState(string(builtin), string(dep), m)
		loaded := running && e.Root.Exists("/sys/module/"+m)
		switch {
		case st == "module" && loaded:
			mi.have = append(mi.have, m+" (module, loaded)")
		case st != "":
			mi.have = append(mi.have, m+" ("+st+")")
		case loaded:
			// in the running kernel (loaded, or built in: a built-in
			// module with parameters has /sys/module/NAME too)
			mi.have = append(mi.have, m+" (in the running kernel: /sys/module/"+m+")")
		case errDep != nil || errBuiltin != nil:
			mi.unknown = append(mi.unknown, m)
		default:
			mi.missing = append(mi.missing, m)
		}
	}
	return mi
}

// findings is vfio.modules' verdict on the running kernel's index.
func (mi moduleIndex) findings(e *Env) []Finding {
	k, base := mi.k, mi.base
	switch {
	case len(mi.missing) > 0:
		return []Finding{{Status: Fail, Subject: base + "/modules.dep",
			Message: "missing for kernel " + k + ": " + strings.Join(mi.missing, ", "),
			Remedy:  "install the kernel's extra modules package (e.g. linux-modules-extra-" + k + ") or a kernel built with CONFIG_VFIO_PCI"}}
	case len(mi.unknown) > 0 && (e.Root.IsLive() || snapshot.OfRunningSystem(e.Root)) && !e.Root.Exists(base):
		// the running system, or a gpuprep snapshot of one (which copies
		// the /sys/module entries and /lib/modules files check read, so an
		// absence there was one on the node): modprobe has nowhere to look
		if f, ok := noModuleTree(e, base, mi.unknown); ok {
			return []Finding{f}
		}
		return []Finding{unreadableModuleIndex(e, base, mi.unknown, mi.errDep, mi.errBuiltin)}
	case len(mi.unknown) > 0:
		return []Finding{unreadableModuleIndex(e, base, mi.unknown, mi.errDep, mi.errBuiltin)}
	}
	return []Finding{{Status: Pass, Subject: base, Message: "available for kernel " + k + ": " + strings.Join(mi.have, ", ")}}
}

// nextKernelModules is vfio.modules where the next boot runs another
// kernel than the running one (nk): a passed-through GPU needs vfio-pci
// now (the running kernel, f) and after the reboot (the next kernel's
// /lib/modules/RELEASE, next), so the finding says both. The running
// kernel's verdict stands where it is not a pass (vfio-pci cannot be
// loaded now, or that cannot be told); a pass with the next kernel
// lacking the modules is a warn (ready until the reboot), and one whose
// next kernel's index cannot be read a warn naming what is missing. A
// fail now that the next kernel mends says so in its remedy (reboot).
func nextKernelModules(e *Env, f Finding, next moduleIndex, nk grub.NextKernel) []Finding {
	which := "kernel " + next.k + ", which the next boot runs (" + nk.From + ")"
	var says string
	switch {
	case len(next.missing) > 0:
		says = which + " lacks " + strings.Join(next.missing, ", ") + " (" + next.base + "/modules.dep, modules.builtin): after the reboot vfio-pci cannot be loaded"
	case len(next.unknown) > 0:
		says = "whether " + which + " has " + strings.Join(next.unknown, ", ") + " cannot be told: its module index cannot be read (" + indexUnread(e, next.base, next.errDep, next.errBuiltin) + ")"
	default:
		says = which + " has them: " + strings.Join(next.have, ", ")
	}
	f.Message = "running kernel " + e.Host.Kernel + ": " + f.Message + "; " + says
	switch {
	case f.Status == Pass && len(next.missing) > 0:
		f.Status, f.Subject = Warn, next.base+"/modules.dep"
		f.Remedy = "install kernel " + next.k + "'s extra modules package (e.g. linux-modules-extra-" + next.k + ") before rebooting, or make the bootloader boot a kernel that has vfio-pci"
	case f.Status == Pass && len(next.unknown) > 0:
		f.Status = Warn
		f.Remedy = "give the root kernel " + next.k + "'s " + next.base + " (modules.dep, modules.builtin), or check it on the node, then run gpuprep check again"
	case f.Status == Fail && len(next.missing) == 0 && len(next.unknown) == 0:
		f.Remedy += "; or reboot into kernel " + next.k + ", which the next boot runs and which has them"
	}
	return []Finding{f}
}

func checkVFIOBinding(e *Env) []Finding {
	var out []Finding
	// what binds the GPUs on VFIO now at the next boot, read once
	atBoot := sync.OnceValue(func() *vfio.BootView {
		src, err := e.Configured()
		return vfio.NewBootView(e.Root, vfio.NextBootArgs(src, err, e.Cmdline), false)
	})
	bootImage := sync.OnceValue(func() *vfio.BootImage {
		src, err := e.Configured()
		return vfio.NewBootImage(e.Root, vfio.NextBootArgs(src, err, e.Cmdline))
	})
	for _, g := range e.GPUs {
		if g.VendorID != pci.VendorNVIDIA {
			// Selected by the user: passthrough can take any device, but
			// neither the GPU Operator's driver nor NVIDIA vGPU can.
			what := fmt.Sprintf("not an NVIDIA device (vendor %s, %s)", g.VendorID, driverOr(g.Driver))
			remedy := "select NVIDIA GPUs only (--select; by default every NVIDIA GPU is selected)"
			out = append(out,
				Finding{Status: Fail, Subject: g.Address, Modes: []Mode{Container}, Remedy: remedy,
					Message: what + ": the GPU Operator's NVIDIA driver cannot drive it for containers"},
				Finding{Status: Fail, Subject: g.Address, Modes: []Mode{VMVGPU}, Remedy: remedy,
					Message: what + ": the NVIDIA vGPU manager cannot host vGPUs on it"})
		} else {
			out = append(out, vgpuBinding(e, g))
		}
		pass := []Mode{VMPassthrough}
		cont := []Mode{Container}
		if pci.DriverIsVFIO(g.Driver) {
			var behind, stub []string
			for _, d := range e.Inv.Devices {
				if d == g || d.Slot() != g.Slot() || d.IsBridge() || pci.DriverIsVFIO(d.Driver) || d.Driver == "" {
					continue
				}
				if d.Driver == "pci-stub" {
					// pci-stub sets driver_managed_dma (before 5.19 VFIO
					// allowed it by name): the group stays viable.
					stub = append(stub, d.Address+" ("+classLabel(d.Class)+")")
					continue
				}
				behind = append(behind, d.Address+" ("+classLabel(d.Class)+", driver "+d.Driver+")")
			}
			binders := atBoot().Binders(g)
			f := Finding{Status: Pass, Subject: g.Address, Modes: pass, Message: "bound to " + g.Driver}
			if len(binders) == 0 && len(behind) == 0 {
				// a live bind (vfio bind without --persist, a
				// driver_override by hand): gone at the next boot
				f.Status = Warn
				f.Message += " until the next boot: nothing binds it to VFIO at boot (gpuprep looks for " + vfio.BootBindersWhat + "), so a reboot puts it back on its host driver"
				if ds := atBoot().DiscountedFor(g); len(ds) > 0 {
					f.Message += "; found, but not loading vfio-pci or giving it IDs at boot: " + evidenceList(ds)
				}
				f.Fixable, f.FixCommand = true, "gpuprep vfio bind --select "+g.Address+" --persist"
				f.Remedy = f.FixCommand + " (keeps it on vfio-pci across reboots)"
			}
			if len(stub) > 0 {
				f.Message += "; " + strings.Join(stub, ", ") + " on pci-stub, which keeps the IOMMU group viable (that function is not given to the VM)"
			}
			if len(behind) > 0 {
				f.Status = Fail
				f.Message += ", but other functions of the card are not on a VFIO driver: " + strings.Join(behind, ", ")
				f.Fixable, f.FixCommand = true, "gpuprep vfio bind --select "+g.Address
				f.Remedy = f.FixCommand + " (binds every endpoint function of the card)"
			}
			c := Finding{Status: Fail, Subject: g.Address, Modes: cont,
				Message: "bound to " + g.Driver + ": the NVIDIA driver cannot use it for containers",
				Fixable: true, FixCommand: unbindFix(e, "--select "+g.Address), Remedy: unbindRemedy(e, "--select "+g.Address)}
			if fb := atBoot().Foreign(g); len(fb) > 0 {
				c.Remedy += "; and remove what binds it to VFIO at boot, which vfio unbind leaves (it removes only gpuprep's configuration): " + strings.Join(fb, ", ") + " (then regenerate the initramfs)"
			}
			if len(binders) == 0 && len(e.NVSwitches) > 0 {
				// vfio unbind --at-boot has run (or it was bound live):
				// on this board it leaves VFIO at the next boot, as wanted
				c.Message += " until the next boot: nothing binds it to VFIO at boot any more, so it goes to the NVIDIA driver then (on a board with NVSwitches GPUs leave vfio-pci at boot, not while the system runs)"
				c.Fixable, c.FixCommand = false, ""
				c.Remedy = "reboot the node (gpuprep apply --mode container continues after the reboot)"
			}
			// the evidence the verdict "it stays at the next boot" rests on:
			// the initramfs the next boot loads, or the root's files (vfio_image.go)
			bootImageEvidence(e, bootImage(), g, binders, atBoot().BindsByAddress(g), &f)
			out = append(out, f, c)
			continue
		}
		out = append(out, bindFinding(e, g, pass))
		if g.Driver != "nouveau" && g.VendorID == pci.VendorNVIDIA { // nouveau: see driver.nouveau
			out = append(out, containerBinding(e, g, cont))
		}
	}
	out = append(out, builtinFindings(e)...)
	out = append(out, forbiddenModuleFindings(e)...)
	if len(e.GPUs) == 0 {
		out = append(out, Finding{Status: Skip, Subject: "/sys/bus/pci/drivers", Message: "no GPU selected"})
	} else if f, ok := nvswitchBinding(e); ok {
		out = append(out, f)
		out = append(out, nvswitchOnHost(e)...)
	}
	return out
}

// evidenceList joins evidence for a message.
func evidenceList(es []vfio.Evidence) string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.String())
	}
	return strings.Join(out, "; ")
}

// builtinFindings warns, for vm-passthrough, of each function of a selected
// GPU's card that a driver built into the kernel takes at every boot (the
// USB controller on a built-in xhci_pci, the GPU on a built-in nouveau):
// whether it is on vfio-pci now or not, gpuprep's persistent configuration
// cannot keep it there across a reboot (vfio.BuiltinWhy), and the group
// then cannot go to a VM. A warn: true now (the node may be ready until the
// next boot), and what holds instead depends on the kernel (vfio.BuiltinFix).
func builtinFindings(e *Env) []Finding {
	var devs []*pci.Device
	gpuOf := map[string]string{}
	for _, g := range e.GPUs {
		for _, d := range e.Inv.Devices {
			if d.Slot() == g.Slot() && gpuOf[d.Address] == "" {
				devs = append(devs, d)
				gpuOf[d.Address] = g.Address
			}
		}
	}
	var out []Finding
	for _, h := range vfio.BuiltinHolds(e.Root, devs) {
		now := "on " + driverOr(h.Dev.Driver)
		out = append(out, Finding{Status: Warn, Subject: h.Dev.Address, Modes: []Mode{VMPassthrough},
			Message: fmt.Sprintf("%s function, %s now: %s", classLabel(h.Dev.Class), now, vfio.BuiltinWhy(h)),
			Remedy:  vfio.BuiltinFix(e.Root, h, gpuOf[h.Dev.Address])})
	}
	return out
}

// bindFinding is vm-passthrough's fail for a GPU not on a VFIO driver. Its
// fix, vfio bind --persist (as plan does: the binding outlives a reboot), is
// offered only where vfio bind would take it: the GPU has an IOMMU group,
// and every other member of it may go too (iommu.groups says why not).
func bindFinding(e *Env, g *pci.Device, modes []Mode) Finding {
	f := Finding{Status: Fail, Subject: g.Address, Modes: modes,
		Message: "on " + driverOr(g.Driver) + ": vm-passthrough needs every function of the GPU on vfio-pci (or its VFIO variant driver)"}
	v := iommu.Viability(e.Inv, g, e.Selected())
	switch {
	case v.Group == "":
		f.Remedy = "enable the IOMMU first (see iommu.kernel): without IOMMU groups vfio-pci cannot take it"
		return f
	case !v.Viable:
		f.Remedy = "its IOMMU group holds devices that cannot go with it (see iommu.groups): vfio bind refuses it until the GPU has a group it can take whole"
		return f
	}
	sel := " --select " + g.Address
	for _, d := range v.Shared { // other selected GPUs of the group go with it
		sel += " --select " + d.Address
	}
	f.Fixable, f.FixCommand = true, "gpuprep vfio bind"+sel+" --persist"
	f.Remedy = f.FixCommand + " (or gpuprep apply --mode vm-passthrough, which also does the rest)"
	return f
}

// unbindFix is the vfio unbind command with args that takes devices off
// VFIO: on a board with NVSwitches --at-boot (vfio unbind refuses the live
// rebind there: NVLink training can hang a GPU), and a reboot then.
func unbindFix(e *Env, args string) string {
	if len(e.NVSwitches) > 0 {
		return "gpuprep vfio unbind --at-boot " + args
	}
	return "gpuprep vfio unbind " + args
}

// unbindRemedy is unbindFix's command as a remedy.
func unbindRemedy(e *Env, args string) string {
	if len(e.NVSwitches) > 0 {
		return unbindFix(e, args) + ", then reboot (on a board with NVSwitches GPUs leave vfio-pci at boot, not while the system runs)"
	}
	return unbindFix(e, args)
}

// containerBinding judges, for containers, an NVIDIA GPU that is not on a
// VFIO driver nor nouveau. Containers need it on the NVIDIA datacenter
// driver (the host's, or the GPU Operator's driver container's). Not on the
// vGPU manager's nvidia driver (vgpu-kvm): it hosts vGPUs for VMs, runs no
// CUDA on the host, and the driver container cannot load its own driver
// while it is loaded (a node runs one GPU workload type). Not on any other
// driver (pci-stub...): a loaded NVIDIA driver never takes a device bound
// elsewhere.
func containerBinding(e *Env, g *pci.Device, modes []Mode) Finding {
	f := Finding{Status: Pass, Subject: g.Address, Modes: modes, Message: "on driver " + g.Driver}
	switch {
	case g.Driver == "":
		return unboundOnHost(e, g.Address, "nvidia", modes)
	case g.Driver == "nvidia":
		if ev := vgpuHostDriver(e, g); len(ev) > 0 {
			f.Status = Fail
			f.Message = "on the NVIDIA vGPU manager's nvidia driver (" + strings.Join(ev, ", ") + "): it hosts vGPUs for VMs and runs no CUDA workloads on the host, and the GPU Operator's driver container cannot load its driver while it is loaded"
			f.Remedy = "a node runs one GPU workload type: use this node for vm-vgpu (gpuprep check --mode vm-vgpu), or uninstall the vGPU manager (its installer's --uninstall) and reboot before using it for containers"
		}
	default:
		f.Status = Fail
		f.Message = "on driver " + g.Driver + ": the NVIDIA driver never takes a device bound to another driver, so containers cannot use it"
		f.Remedy = fmt.Sprintf("unbind it (echo %s > /sys/bus/pci/devices/%s/driver/unbind) and remove whatever binds it to %s at boot (a %s.ids= kernel argument, modprobe.d options, a driverctl override); the GPU Operator's driver container then takes it when it loads the NVIDIA driver (if nvidia is loaded already: echo %s > /sys/bus/pci/drivers_probe)",
			g.Address, g.Address, g.Driver, g.Driver, g.Address)
	}
	return f
}

// vgpuHostDriver is the evidence that the nvidia driver g is on is the vGPU
// manager's (vgpu-kvm): its nvidia_vgpu_vfio module loaded, its daemons
// installed, or the GPU offering vGPU types. Not an mdev bus alone (other
// drivers, i915 GVT-g, make one) nor sriov-manage alone.
func vgpuHostDriver(e *Env, g *pci.Device) []string {
	var ev []string
	for _, x := range e.Manager().Evidence {
		if strings.Contains(x, "nvidia_vgpu_vfio") || strings.HasSuffix(x, "/nvidia-vgpu-mgr") || strings.HasSuffix(x, "/nvidia-vgpud") {
			ev = append(ev, x)
		}
	}
	if s := e.VGPU(g.Address); len(s.Types) > 0 {
		ev = append(ev, fmt.Sprintf("%s offers %s", g.Address, plural.N(len(s.Types), "vGPU type")))
	}
	return ev
}

// unboundOnHost judges, for modes that need the device on the host's
// NVIDIA driver (drv: nvidia for a GPU, nvidia-nvswitch for an NVSwitch), a
// device with no driver. Unbound is fine while that driver is not loaded:
// the GPU Operator's driver container loads it, and it takes every device it
// matches. Not when driver_override names another driver (only that one may
// bind it; "none", none), nor when the driver is loaded already: a loaded
// driver does not take a device unbound after it registered (facts §1:
// drivers_probe, a bind, or reloading the driver does).
func unboundOnHost(e *Env, addr, drv string, modes []Mode) Finding {
	f := Finding{Status: Pass, Subject: addr, Modes: modes, Message: "no driver bound: the GPU Operator's driver container takes it when it loads the NVIDIA driver"}
	ov, _ := e.Root.ReadString("/sys/bus/pci/devices/" + addr + "/driver_override")
	if ov = strings.TrimSpace(ov); ov == "(null)" {
		ov = ""
	}
	switch {
	case ov != "" && ov != drv:
		f.Status = Fail
		f.Message = fmt.Sprintf("no driver bound, and driver_override is %q: only that driver may bind it (\"none\": no driver), so %s cannot take it", ov, drv)
		if pci.DriverIsVFIO(ov) {
			f.Fixable, f.FixCommand = true, "gpuprep vfio unbind --select "+addr // not on VFIO: nothing rebinds live
			f.Remedy = f.FixCommand + " (clears the override and gpuprep's persistent VFIO configuration for it)"
		} else {
			f.Remedy = fmt.Sprintf("clear it (echo > /sys/bus/pci/devices/%s/driver_override), then echo %s > /sys/bus/pci/drivers_probe", addr, addr)
		}
	case e.Root.Exists("/sys/bus/pci/drivers/" + drv):
		f.Status = Fail
		f.Message = fmt.Sprintf("no driver bound while %s is loaded: a loaded driver does not take a device that was unbound after it registered", drv)
		f.Remedy = fmt.Sprintf("echo %s > /sys/bus/pci/drivers_probe (the kernel binds it to %s), or reload the NVIDIA driver (the GPU Operator's driver container does when it starts)", addr, drv)
	}
	return f
}

// nvswitchOnHost: for containers and vGPUs, the NVSwitches stay with the
// host's nvidia driver, where Fabric Manager (the driver container's, or the
// host's service) trains the NVLink fabric. On an NVSwitch system CUDA does
// not start on the GPUs until it has (error 802, "system not yet
// initialized"), and Fabric Manager cannot reach switches on a VFIO driver.
func nvswitchOnHost(e *Env) []Finding {
	var addrs, on []string
	var out []Finding
	modes := []Mode{Container, VMVGPU}
	for _, s := range e.NVSwitches {
		addrs = append(addrs, s.Address)
		switch {
		case pci.DriverIsVFIO(s.Driver):
			on = append(on, s.Address+" ("+s.Driver+")")
		case s.Driver == "":
			if f := unboundOnHost(e, s.Address, nvswitchDriver, modes); f.Status != Pass {
				f.Message += "; Fabric Manager reaches NVSwitches only through it, and until it has trained the NVLink fabric CUDA on the GPUs fails (error 802)"
				out = append(out, f)
			}
		}
	}
	f := Finding{Subject: strings.Join(addrs, ","), Modes: modes}
	if len(on) == 0 {
		return out // on nvidia-nvswitch, or unbound until the driver container's NVIDIA driver takes them
	}
	fix := unbindFix(e, "--nvswitch")
	f.Status = Fail
	f.Message = fmt.Sprintf("%d of %s on a VFIO driver: %s; Fabric Manager on this host cannot train the NVLink fabric without them, and until it has, CUDA on the GPUs fails (error 802, system not yet initialized)", len(on), plural.N(len(addrs), "NVSwitch"), strings.Join(on, ", "))
	f.Fixable, f.FixCommand, f.Remedy = true, fix, unbindRemedy(e, "--nvswitch")+" (gpuprep apply --mode container or vm-vgpu does it too)"
	return append(out, f)
}

// nvswitchDriver is the PCI driver NVIDIA's kernel module registers for
// NVSwitches (lspci: "Kernel driver in use: nvidia-nvswitch").
const nvswitchDriver = "nvidia-nvswitch"

// nvswitchBinding says, for vm-passthrough, whether the NVSwitches go to
// VMs with the GPUs. A VM given every GPU of an HGX board gets the NVLink
// fabric only with the NVSwitches (its own Fabric Manager configures them);
// left on the host, GPUs pass through without that fabric unless the host's
// Fabric Manager serves them. gpuprep cannot tell which is meant: a warn.
func nvswitchBinding(e *Env) (Finding, bool) {
	if len(e.NVSwitches) == 0 {
		return Finding{}, false
	}
	var addrs, off []string
	for _, s := range e.NVSwitches {
		addrs = append(addrs, s.Address)
		if !pci.DriverIsVFIO(s.Driver) {
			off = append(off, s.Address+" ("+driverOr(s.Driver)+")")
		}
	}
	f := Finding{Subject: strings.Join(addrs, ","), Modes: []Mode{VMPassthrough}}
	if len(off) == 0 {
		f.Status, f.Message = Pass, fmt.Sprintf("%s on a VFIO driver: they can go to a VM with the GPUs", plural.N(len(addrs), "NVSwitch"))
		return f, true
	}
	fix := "gpuprep vfio bind --nvswitch --persist"
	f.Status = Warn
	f.Message = fmt.Sprintf("%d of %s not on a VFIO driver: %s; a VM given the GPUs gets no NVLink fabric from them unless Fabric Manager on this host serves it", len(off), plural.N(len(addrs), "NVSwitch"), strings.Join(off, ", "))
	f.Remedy = "to pass the whole board to one VM, bind the NVSwitches too: " + fix + " (then the guest runs Fabric Manager); left on the host, they give VMs NVLink only through Fabric Manager's shared NVSwitch mode on this host (FABRIC_MODE=1), which gpuprep does not set up"
	f.Fixable, f.FixCommand = true, fix
	return f, true
}

// vgpuBinding: vGPUs live on the vGPU manager's nvidia driver (on the PF
// for mdev; the PF and its VFs for SR-IOV): a GPU on vfio-pci, nouveau,
// another driver or none hosts none.
func vgpuBinding(e *Env, g *pci.Device) Finding {
	f := Finding{Subject: g.Address, Modes: []Mode{VMVGPU}}
	if g.Driver == "nvidia" {
		f.Status, f.Message = Pass, vgpuOnNvidia(e, g)
		return f
	}
	f.Status = Fail
	f.Message = "on " + driverOr(g.Driver) + ": vGPUs need the GPU on the vGPU manager's nvidia driver"
	f.Remedy = vgpuDriverRemedy(e, g.Address, g.Driver)
	if pci.DriverIsVFIO(g.Driver) {
		f.Fixable, f.FixCommand = true, "gpuprep vfio unbind --select "+g.Address
	}
	return f
}

// The modules each mode needs loaded, as the programs that load them name
// them: the GPU Operator's driver container loads nvidia, nvidia_uvm and
// nvidia_modeset; the vGPU manager nvidia and nvidia_vgpu_vfio; passthrough
// vfio, vfio_iommu_type1 and vfio_pci.
var modeModules = []struct {
	modes []Mode
	mods  []string
	who   string
}{
	{[]Mode{Container}, []string{"nvidia", "nvidia_uvm", "nvidia_modeset"}, "the GPU Operator's driver container cannot load the NVIDIA driver"},
	{[]Mode{VMVGPU}, []string{"nvidia", "nvidia_vgpu_vfio"}, "the vGPU manager's driver cannot load"},
	{[]Mode{VMPassthrough}, []string{"vfio", "vfio_iommu_type1", "vfio_pci"}, "vfio-pci cannot load"},
}

// forbiddenModuleFindings: module_blacklist= on the kernel command line
// makes the kernel refuse a module however it is loaded, from the host or
// from a container (vfio.ModuleForbidden): a fail where the running kernel
// has it for a module a mode needs (one not built in), a warn where only
// the next boot's configuration does (the node works now and the next boot
// breaks it). modprobe.blacklist= is not this: it is a modprobe blacklist,
// which stops loads by alias (udev) and modprobe -b, not the driver
// container's modprobe by name.
func forbiddenModuleFindings(e *Env) []Finding {
	builtin := vfio.BuiltinModules(e.Root, e.Host.Kernel)
	src, err := e.Configured()
	var next []kargs.Param
	if err == nil && src != nil {
		next = kargs.Parse(src.Cmdline)
	}
	var out []Finding
	for _, mm := range modeModules {
		var now, later []string
		var nowArg, laterArg kargs.Param
		for _, m := range mm.mods {
			if builtin[m] {
				continue // module_blacklist= concerns loadable modules
			}
			if p, ok := vfio.ModuleForbidden(e.Cmdline, m); ok {
				now, nowArg = append(now, m), p
			} else if p, ok := vfio.ModuleForbidden(next, m); ok {
				later, laterArg = append(later, m), p
			}
		}
		if len(now) > 0 {
			f := Finding{Status: Fail, Subject: "/proc/cmdline", Modes: mm.modes,
				Message: fmt.Sprintf("%s on the running kernel's command line: the kernel refuses to load %s however it is asked (module_blacklist), so %s", nowArg, strings.Join(now, ", "), mm.who),
				Remedy:  "remove " + strings.Join(now, ", ") + " from module_blacklist= in the bootloader configuration and reboot"}
			if p, ok := vfio.ModuleForbidden(next, now[0]); ok && src != nil {
				f.Remedy = "remove " + strings.Join(now, ", ") + " from " + p.String() + " (" + src.Locate(p) + ") and reboot"
			} else if src != nil {
				f.Message += "; the next boot's configuration (" + src.File + ") no longer has it: reboot"
				f.Remedy = "reboot"
			}
			out = append(out, f)
		}
		if len(later) > 0 && src != nil {
			out = append(out, Finding{Status: Warn, Subject: src.Locate(laterArg), Modes: mm.modes,
				Message: fmt.Sprintf("%s is configured for the next boot (%s) and not running: after the reboot the kernel refuses to load %s, so %s", laterArg, src.Locate(laterArg), strings.Join(later, ", "), mm.who),
				Remedy:  "remove " + strings.Join(later, ", ") + " from module_blacklist= there before rebooting"})
		}
	}
	return out
}
