package vfio

import (
	"path"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// Whether systemd-modules-load loads vfio-pci early enough. In the root,
// systemd starts systemd-modules-load.service (modules-load.d,
// modules-load=) and systemd-udev-trigger.service (udev's coldplug) side by
// side: both are DefaultDependencies=no and Before=sysinit.target, and
// neither is ordered after the other (systemd units/
// systemd-modules-load.service.in, units/systemd-udev-trigger.service). At
// the coldplug's add event of each device udev loads the modules its
// modalias matches (rules.d/80-drivers.rules: ENV{MODALIAS}=="?*",
// RUN{builtin}+="kmod load"), and whichever driver registers first takes
// the device: vfio-pci given IDs binds only devices no driver holds when it
// loads. So a modules-load.d line loads vfio-pci in time for a device only
// where udev loads nothing else for it: no module of the next kernel whose
// modules.alias matches it, or each such module kept from loading (a
// blacklist, module_blacklist=) or made to load vfio-pci first (`softdep X
// pre: vfio-pci`: modprobe loads the pre-dependency before X). Proxmox VE's
// passthrough guide gives the same remedy for the same race ("you might
// need to set a soft dependency to load the gpu modules before loading
// vfio-pci", pve-docs qm-pci-passthrough.adoc). The initramfs's own drivers
// come earlier still: the image's verdict (boot_image.go) judges them.

// pciAlias is a `alias pci:… MODULE` line of modules.alias.
type pciAlias struct{ pattern, module string }

// pciAliases reads kernel kver's `alias pci:` lines; nil when unreadable.
func pciAliases(root *host.Root, kver string) []pciAlias {
	b, err := root.ReadFile("/lib/modules/" + kver + "/modules.alias")
	if err != nil {
		return nil
	}
	var out []pciAlias
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "alias" && strings.HasPrefix(f[1], "pci:") {
			out = append(out, pciAlias{f[1], kargs.Norm(f[2])})
		}
	}
	return out
}

// racers are the modules the root's udev loads for d at the boot f
// describes, each of which may take d before systemd-modules-load's
// vfio-pci: matched by modules.alias, a module of the kernel (not built in:
// BuiltinHolds judges those), neither blacklisted nor forbidden, with no
// softdep loading vfio-pci before it.
func (f *bootFacts) racers(d *pci.Device) []string {
	ma := deviceModalias(f.root, d)
	if ma == "" {
		return nil
	}
	var out []string
	for _, a := range f.aliases {
		m := a.module
		if isVFIOPCI(m) || slices.Contains(out, m) || f.builtin[m] || f.modules != nil && !f.modules[m] {
			continue
		}
		if ok, err := path.Match(a.pattern, ma); err != nil || !ok {
			continue
		}
		if f.blacklist(m) != nil || f.forbidden(m) != nil || f.softdepPre(m) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// softdepPre: a modprobe.d `softdep m pre: … vfio-pci …`.
func (f *bootFacts) softdepPre(m string) bool {
	for _, c := range f.modprobe {
		for _, l := range c.lines {
			if w := strings.Fields(l); len(w) >= 3 && w[0] == "softdep" && kargs.Norm(w[1]) == m && softdepPreVFIO(w[2:]) {
				return true
			}
		}
	}
	return false
}

// loadersFor are the early loaders that load vfio-pci in time for d: those
// of systemd-modules-load only where nothing races them for d.
func (v *BootView) loadersFor(d *pci.Device) (in []Evidence, racing []Evidence) {
	var rs []string
	for _, l := range v.early.loaders {
		if l.By != "systemd-modules-load" {
			in = append(in, l)
			continue
		}
		if rs == nil {
			if rs = v.facts.racers(d); len(rs) == 0 {
				rs = []string{}
			}
		}
		if len(rs) == 0 {
			in = append(in, l)
			continue
		}
		l.Says = "not in time for " + d.Address + ": systemd-modules-load runs alongside udev's coldplug (systemd orders neither systemd-modules-load.service nor systemd-udev-trigger.service after the other), and udev loads " +
			strings.Join(rs, ", ") + " for it (the kernel's modules.alias matches its modalias), which may take it first; a `softdep " + rs[0] + " pre: vfio-pci` (or a blacklist of " + rs[0] + ", or loading vfio-pci from the initramfs) makes it certain"
		racing = append(racing, l)
	}
	return in, racing
}
