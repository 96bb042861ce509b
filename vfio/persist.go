package vfio

import (
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// The files gpuprep owns for a persistent binding.
const (
	ModprobeConf = "/etc/modprobe.d/gpuprep-vfio.conf"
	ModulesLoad  = "/etc/modules-load.d/gpuprep-vfio.conf"
	UdevRule     = "/etc/udev/rules.d/40-gpuprep-vfio.rules"
)

const devicesHeader = "# gpuprep-devices:"

// Persist is the persistent configuration after a bind or unbind.
type Persist struct {
	Devices   map[string]string // address → VFIO driver, every device bound at boot
	IDs       []string          // vendor:device bound by `options vfio-pci ids=` (every device of the ID is in Devices)
	PerDevice []string          // addresses bound by the udev rule (driver_override at device add)
	Files     []change.File     // each against the file as planning read it
	Initramfs []string          // the distro's initramfs command; nil when none was found
	// Regenerate says why the initramfs is regenerated even when no file
	// changes ("" when it is not): planPersist sets it when the initramfs is
	// older than gpuprep's files (InitramfsStale); a caller that knows more
	// (apply, from its journal) may set it too.
	Regenerate string
	// Cmdline is the kernel-command-line part where vfio-pci is built in
	// (vfio-pci.ids=; see cmdline_ids.go); nil when there is none.
	Cmdline  *CmdlineIDs
	Warnings []string
}

// Pending is what applying p would change under root, as applyPersist does
// it: the files whose content differs (or, to remove, that exist), and
// whether the initramfs command runs (a file changes, or Regenerate says
// why it must).
func (p *Persist) Pending(root *host.Root) (files []change.File, initramfs bool) {
	for _, f := range p.Files {
		if f := persistFile(root, f.Path, f.New); f.Pending() {
			files = append(files, f)
		}
	}
	return files, p.Initramfs != nil && (len(files) > 0 || p.Regenerate != "")
}

// CmdlinePending is the bootloader edit applying p makes (vfio-pci.ids=
// where vfio-pci is built in), or nil.
func (p *Persist) CmdlinePending() *CmdlineIDs {
	if p.Cmdline == nil || p.Cmdline.Plan == nil {
		return nil
	}
	return p.Cmdline
}

// Persisted reads the devices recorded in gpuprep's modprobe.d file.
func Persisted(root *host.Root) map[string]string {
	out := map[string]string{}
	b, err := root.ReadFile(ModprobeConf)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, devicesHeader) {
			continue
		}
		for _, f := range strings.Fields(strings.TrimPrefix(l, devicesHeader)) {
			if a, d, ok := strings.Cut(f, "="); ok {
				out[a] = d
			}
		}
	}
	return out
}

// planPersist computes gpuprep's persistent files for the devices already
// persisted plus add, minus remove.
func planPersist(root *host.Root, inv *pci.Inventory, add []*Target, remove []string) (*Persist, error) {
	p := &Persist{Devices: Persisted(root)}
	softdeps := persistSoftdeps(root, add)
	for _, t := range add {
		p.Devices[t.Dev.Address] = t.VFIO
	}
	for _, a := range remove {
		delete(p.Devices, a)
	}
	p.planInitramfs(root)
	if len(p.Devices) == 0 {
		p.planNone(root)
		return p, nil
	}
	addrs := slices.Sorted(maps.Keys(p.Devices))
	nvidia, modules := p.sortDevices(inv, addrs)
	if nvidia {
		softdeps["nvidia"], softdeps["nouveau"] = true, true
	}
	var ws []string
	p.Cmdline, ws = planCmdlineIDs(root, p.IDs)
	p.Warnings = append(p.Warnings, ws...)
	p.Files = append(p.Files, persistFile(root, ModprobeConf, []byte(p.modprobeConf(root, addrs, softdeps, modules, nvidia))))
	ml := "# Written by `gpuprep vfio bind --persist`; `gpuprep vfio unbind` removes it.\nvfio\nvfio_iommu_type1\n" +
		strings.Join(uniq(append([]string{"vfio_pci"}, modules...)), "\n") + "\n"
	p.Files = append(p.Files, persistFile(root, ModulesLoad, []byte(ml)))
	if len(p.PerDevice) > 0 {
		p.Files = append(p.Files, persistFile(root, UdevRule, []byte(p.udevRule())))
	} else if _, err := root.Lstat(UdevRule); err == nil {
		p.Files = append(p.Files, persistFile(root, UdevRule, nil))
	}
	return p, nil
}

// persistSoftdeps are the modules gpuprep's modprobe.d file makes wait for
// vfio-pci: those it names now, and the drivers add takes devices from.
func persistSoftdeps(root *host.Root, add []*Target) map[string]bool {
	softdeps := map[string]bool{}
	if b, err := root.ReadFile(ModprobeConf); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "softdep" {
				softdeps[f[1]] = true
			}
		}
	}
	for _, t := range add {
		if t.Driver == "" || pci.DriverIsVFIO(t.Driver) {
			continue
		}
		if m := root.LinkBase("/sys/bus/pci/drivers/" + t.Driver + "/module"); m != "" {
			softdeps[m] = true
		} else if t.Driver == "nvidia" || t.Driver == "nouveau" {
			softdeps[t.Driver] = true
		}
	}
	return softdeps
}

// planInitramfs sets the initramfs command p runs, and why the image is
// regenerated although no file changes.
func (p *Persist) planInitramfs(root *host.Root) {
	p.Initramfs = initramfs.Command(root)
	if p.Initramfs == nil {
		p.Warnings = append(p.Warnings, "no initramfs tool (update-initramfs, dracut, mkinitcpio) found: the initramfs is not regenerated; if it loads the NVIDIA or nouveau driver, the GPU is taken before vfio-pci at boot")
		return
	}
	// a bind that wrote the files and stopped (killed, or its initramfs
	// command failed) before regenerating: the files are as wanted now,
	// so nothing else would regenerate it
	p.Regenerate = InitramfsStale(root)
}

// planNone plans the removal of gpuprep's persistent files (no device left
// to persist) and of vfio-pci.ids= from the kernel command line.
func (p *Persist) planNone(root *host.Root) {
	var ws []string
	p.Cmdline, ws = planCmdlineIDs(root, nil)
	p.Warnings = append(p.Warnings, ws...)
	for _, f := range []string{ModprobeConf, ModulesLoad, UdevRule} {
		if _, err := root.Lstat(f); err == nil {
			p.Files = append(p.Files, persistFile(root, f, nil))
		}
	}
}

// sortDevices sorts the persisted devices addrs into the IDs vfio-pci
// takes by ids= (every device of the ID persisted) and those bound one by
// one (PerDevice); nvidia says one is NVIDIA's, modules are their VFIO
// drivers' modules, in addrs order.
func (p *Persist) sortDevices(inv *pci.Inventory, addrs []string) (nvidia bool, modules []string) {
	byID := map[string][]string{}
	for _, a := range addrs {
		d := inv.Get(a)
		if d == nil {
			p.Warnings = append(p.Warnings, a+" is persisted but not on this host now: kept")
			p.PerDevice = append(p.PerDevice, a)
			continue
		}
		nvidia = nvidia || d.VendorID == pci.VendorNVIDIA
		modules = append(modules, strings.ReplaceAll(p.Devices[a], "-", "_"))
		if p.Devices[a] != "vfio-pci" {
			p.PerDevice = append(p.PerDevice, a) // ids= is vfio-pci's alone
			continue
		}
		id := d.VendorID + ":" + d.DeviceID
		byID[id] = append(byID[id], a)
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		if p.allPersisted(inv, id) {
			p.IDs = append(p.IDs, id)
		} else {
			p.PerDevice = append(p.PerDevice, byID[id]...)
		}
	}
	sort.Strings(p.PerDevice)
	return nvidia, modules
}

// allPersisted reports whether every device of inv with id is persisted.
func (p *Persist) allPersisted(inv *pci.Inventory, id string) bool {
	for _, d := range inv.Devices {
		if d.VendorID+":"+d.DeviceID == id && p.Devices[d.Address] == "" {
			return false
		}
	}
	return true
}

// modprobeConf is gpuprep's modprobe.d file for the devices addrs: their
// list, a softdep on vfio-pci and modules for each of softdeps, nouveau
// blacklisted on an NVIDIA device, and the IDs (on the kernel command line
// where vfio-pci is built in).
func (p *Persist) modprobeConf(root *host.Root, addrs []string, softdeps map[string]bool, modules []string, nvidia bool) string {
	pre := []string{"vfio-pci"}
	for _, m := range uniq(modules) {
		if m != "vfio_pci" {
			pre = append(pre, m)
		}
	}
	var mp strings.Builder
	mp.WriteString("# Written by `gpuprep vfio bind --persist`; `gpuprep vfio unbind` removes it. Do not edit:\n")
	mp.WriteString("# gpuprep reads the device list below.\n")
	mp.WriteString(devicesHeader)
	for _, a := range addrs {
		fmt.Fprintf(&mp, " %s=%s", a, p.Devices[a])
	}
	mp.WriteString("\n")
	for _, m := range slices.Sorted(maps.Keys(softdeps)) {
		if m != "" && !strings.HasSuffix(strings.ReplaceAll(m, "-", "_"), "vfio_pci") {
			fmt.Fprintf(&mp, "softdep %s pre: %s\n", m, strings.Join(pre, " "))
		}
	}
	if nvidia {
		mp.WriteString("blacklist nouveau\n")
	}
	builtin, _ := vfioBuiltin(root)
	switch {
	case len(p.IDs) > 0 && builtin:
		// modprobe.d options never reach a built-in module
		mp.WriteString("# vfio-pci is built into this kernel: its IDs are on the kernel command line (vfio-pci.ids=), not here.\n")
		fmt.Fprintf(&mp, "%s %s\n", cmdlineHeader, strings.Join(p.IDs, ","))
	case len(p.IDs) > 0:
		fmt.Fprintf(&mp, "options vfio-pci ids=%s\n", strings.Join(p.IDs, ","))
	}
	return mp.String()
}

// udevRule is gpuprep's udev rule that gives each of PerDevice its VFIO
// driver by driver_override.
func (p *Persist) udevRule() string {
	var ur strings.Builder
	ur.WriteString("# Written by `gpuprep vfio bind --persist`; `gpuprep vfio unbind` removes it.\n")
	ur.WriteString("# Only these devices go to VFIO (other devices with the same IDs stay on their drivers).\n")
	for _, a := range p.PerDevice {
		fmt.Fprintf(&ur, "ACTION==\"add\", SUBSYSTEM==\"pci\", KERNEL==\"%s\", ATTR{driver_override}=\"%s\"\n", a, p.Devices[a])
	}
	return ur.String()
}

// InitramfsStale says why the initramfs predates gpuprep's persistent VFIO
// configuration: every initramfs image under /boot (initramfs.Images) is
// older than the newest of gpuprep's files, so none was made since they
// were written (a bind killed, or whose initramfs command failed, in
// between) and early boot may still hand the GPUs to nouveau or nvidia. It
// returns "" when an image is as new as the files, and when there is
// nothing to compare (no file of gpuprep's, no image found). Every image
// counts, not only the running kernel's (see initramfs.OlderThan).
//
// A file gpuprep removed (vfio unbind) counts from its removal, which the
// journal records: an initramfs made before it may still bind the GPUs to
// VFIO at early boot (an unbind whose initramfs command failed).
func InitramfsStale(root *host.Root) string {
	if why, decided := ImageStale(root); decided { // the image itself, where it tells (boot_image.go)
		return why
	}
	var newest time.Time
	file := ""
	for _, f := range inImageFiles(root) {
		if fi, err := root.Stat(f); err == nil && fi.ModTime().After(newest) {
			newest, file = fi.ModTime(), f
		}
	}
	if entries, err := journal.Read(root); err == nil {
		for _, en := range entries {
			f := en.File()
			gone := en.Kind == journal.KindFile && f.Gone() && !root.Exists(f.Path)
			if gone && slices.Contains(inImageFiles(root), f.Path) && en.Time.After(newest) {
				newest, file = en.Time, "the removal of "+f.Path+" (journal)"
			}
		}
	}
	if file == "" {
		return ""
	}
	older := initramfs.OlderThan(root, newest)
	if len(older) == 0 {
		return ""
	}
	return fmt.Sprintf("the initramfs (%s) is older than %s: it was not regenerated after gpuprep's persistent VFIO configuration changed",
		strings.Join(older, ", "), file)
}

// inImageFiles are gpuprep's persistence files an initramfs made by the
// node's tool can carry, so that one made before them is stale.
// initramfs-tools copies /etc/modprobe.d into the image (mkinitramfs:
// `cp -a /etc/modprobe.d/* "${DESTDIR}/etc/modprobe.d/"`), never
// /etc/modules-load.d, which the root's
// systemd-modules-load reads after the switch: an image older than
// gpuprep's modules-load.d file misses nothing (tobetter/initramfs-tools
// 00f79a8, mkinitramfs).
func inImageFiles(root *host.Root) []string {
	if initramfsTool(root) == "update-initramfs" {
		return []string{ModprobeConf, UdevRule}
	}
	return []string{ModprobeConf, ModulesLoad, UdevRule}
}

// BootView is what binds devices to a VFIO driver at a boot, as far as
// gpuprep can see, read once for many devices: gpuprep's persistent
// configuration, vfio-pci.ids= on the kernel command line (the one the node
// boots with next, see NextBootCmdline) where vfio-pci is built in or loaded
// early, `options vfio-pci ids=` in a modprobe.d file where vfio-pci is a
// module loaded early, a loader line that passes the IDs itself
// (/etc/initramfs-tools/modules: `vfio-pci ids=…`), a driverctl override,
// or a udev rule that names the device with a VFIO driver. Loaded early:
// see earlyload.go (initramfs-tools, dracut, mkinitcpio, systemd-modules-load,
// a softdep that fires); without a loader, udev loads the GPU's own driver
// for it (vfio-pci has no alias matching a GPU) and the IDs are never
// applied. A live bind (vfio bind without --persist, a driver_override
// written by hand) is none of these: the device returns to its driver at
// the next boot. Built-in drivers that take a function before any of these
// act are BuiltinHolds' concern.
//
// Every verdict names its evidence (Binder, Evidence: file and line), and
// what looked like a loader or binder but is not (Discounted, with why).
type BootView struct {
	root      *host.Root
	cmdline   []kargs.Param
	persisted map[string]string
	builtin   bool // vfio-pci is built into the kernel
	loaded    bool // vfio-pci is known to have loaded early (devices ended up on it)
	early     earlyLoad
	facts     *bootFacts
	modprobe  []confFile
	udev      []confFile
}

// NewBootView reads root's boot-time VFIO configuration for a boot with
// cmdline. loaded says vfio-pci is known to have loaded early at that boot
// (devices ended up on it): its IDs then count without a loader.
func NewBootView(root *host.Root, cmdline []kargs.Param, loaded bool) *BootView {
	kver, nk := nextKernel(root)
	builtin := BuiltinModules(root, kver)
	v := &BootView{root: root, cmdline: cmdline, persisted: Persisted(root), modprobe: modprobeFiles(root),
		builtin: builtin["vfio_pci"], loaded: loaded}
	f := &bootFacts{root: root, cmdline: cmdline, builtin: builtin, modules: KernelModules(root, kver),
		tool: initramfsTool(root), modprobe: v.modprobe, kver: kver}
	if nk.NoInitramfs {
		f.noInitramfs = "it loads no initramfs (" + nk.From + ")"
	}
	f.aliases = pciAliases(root, kver)
	v.early, v.facts = readEarlyLoad(f), f
	for _, dir := range []string{"/etc/udev/rules.d", "/run/udev/rules.d"} {
		for _, n := range root.Names(dir) {
			if strings.HasSuffix(n, ".rules") && dir+"/"+n != UdevRule {
				if b, err := root.ReadFile(dir + "/" + n); err == nil {
					v.udev = append(v.udev, confFile{dir + "/" + n, strings.Split(string(b), "\n")})
				}
			}
		}
	}
	return v
}

// isEarly: vfio-pci is built in, known loaded, or a loader loads it in
// time for d (coldplug.go).
func (v *BootView) isEarly(d *pci.Device) bool {
	if v.builtin || v.loaded {
		return true
	}
	in, _ := v.loadersFor(d)
	return len(in) > 0
}

// Loaders is what loads vfio-pci early at the boot (empty where vfio-pci is
// built in and nothing names it).
func (v *BootView) Loaders() []Evidence { return slices.Clone(v.early.loaders) }

// Discounted is what looks as if it loaded vfio-pci early or gave it IDs,
// and does not at this boot, each with why (Evidence.Says).
func (v *BootView) Discounted() []Evidence {
	out := slices.Clone(v.early.discounted)
	if v.builtin {
		for _, l := range v.early.loaders {
			if l.IDs != "" { // modprobe vfio-pci ids=… on a built-in module: "builtin", the arguments go nowhere
				l.Says = "its ids= does nothing: vfio-pci is built into the kernel (modules.builtin), so modprobe does not load it and its arguments go nowhere; a built-in module takes its parameters only from the kernel command line (vfio-pci.ids=)"
				out = append(out, l)
			}
		}
		for _, f := range v.modprobe {
			if f.path == ModprobeConf {
				continue
			}
			for i, l := range f.lines {
				if ids := optionsIDs(l); ids != "" {
					e := newEvidence(f.path, i+1, l, "modprobe", "does nothing: vfio-pci is built into the kernel (modules.builtin), modprobe never loads it, and a built-in module takes its parameters only from the kernel command line (vfio-pci.ids=)")
					e.IDs = ids
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// BootBindersWhat says, for a message, what a BootView looks for.
const BootBindersWhat = "gpuprep's persistent configuration; vfio-pci.ids= on the next boot's kernel command line, or `options vfio-pci ids=` in modprobe.d, with vfio-pci built in or loaded early (/etc/initramfs-tools/modules, dracut's force_drivers or rd.driver.pre=, mkinitcpio's MODULES, modules-load.d or modules-load=, a softdep on a module that loads); a driverctl override; a udev rule for it"

// Binders lists what binds d to VFIO at the boot.
func (v *BootView) Binders(d *pci.Device) []string {
	var out []string
	for _, b := range v.BinderEvidence(d) {
		if b.Kind == BinderGpuprep {
			out = append(out, "gpuprep's persistent configuration ("+ModprobeConf+": "+v.persisted[d.Address]+")")
			continue
		}
		out = append(out, b.String())
	}
	return out
}

// BinderEvidence is Binders, structured: each binder with the file and line
// it rests on.
func (v *BootView) BinderEvidence(d *pci.Device) []Binder {
	var out []Binder
	if drv := v.persisted[d.Address]; drv != "" && !v.ownIneffective(d) {
		e := newEvidence(ModprobeConf, 0, devicesHeader+" "+d.Address+"="+drv, "gpuprep", "binds "+d.Address+" to "+drv+" at boot")
		out = append(out, Binder{Kind: BinderGpuprep, At: e})
	}
	return append(out, v.foreign(d)...)
}

// ownIneffective: gpuprep's configuration names d for vfio-pci, vfio-pci is
// built in, and the next boot's command line lacks d's ID: its modprobe.d
// options (what a gpuprep from before cmdline_ids.go wrote there) never
// reach a built-in vfio-pci.
func (v *BootView) ownIneffective(d *pci.Device) bool {
	return v.builtin && v.persisted[d.Address] == "vfio-pci" && !IDsOnCmdline(v.cmdline, d)
}

// DiscountedFor is Discounted with what does nothing for d in particular:
// gpuprep's own configuration where ownIneffective says so.
func (v *BootView) DiscountedFor(d *pci.Device) []Evidence {
	out := v.Discounted()
	if !v.builtin && !v.loaded {
		_, racing := v.loadersFor(d)
		out = append(out, racing...)
	}
	if v.ownIneffective(d) {
		out = append(out, newEvidence(ModprobeConf, 0, devicesHeader+" "+d.Address+"=vfio-pci", "gpuprep",
			"does nothing for "+d.Address+": vfio-pci is built into the kernel and the next boot's kernel command line has no vfio-pci.ids= naming "+d.VendorID+":"+d.DeviceID+" (a built-in module takes no modprobe.d options); gpuprep vfio bind --persist puts it there"))
	}
	return out
}

// Foreign is Binders without gpuprep's own configuration: what a vfio
// unbind, which drops only gpuprep's, leaves binding d at boot.
func (v *BootView) Foreign(d *pci.Device) []string {
	var out []string
	for _, b := range v.foreign(d) {
		out = append(out, b.String())
	}
	return out
}

func (v *BootView) loadedBy(d *pci.Device) []Evidence {
	if v.builtin {
		return nil
	}
	in, _ := v.loadersFor(d)
	return in
}

func (v *BootView) foreign(d *pci.Device) []Binder {
	var out []Binder
	id := d.VendorID + ":" + d.DeviceID
	if v.isEarly(d) && IDsOnCmdline(v.cmdline, d) {
		p, _ := kargs.Last(v.cmdline, "vfio_pci.ids")
		e := newEvidence(NextCmdline, 0, p.String(), "vfio-pci", "binds every device with ID "+id+" when vfio-pci initialises")
		e.IDs = p.Value
		out = append(out, Binder{Kind: BinderCmdlineIDs, At: e, LoadedBy: v.loadedBy(d)})
	}
	if !v.builtin && v.isEarly(d) { // a built-in module takes no modprobe.d options
		out = append(out, v.optionsBinders(d)...)
		in, _ := v.loadersFor(d)
		for _, l := range in {
			if l.IDs != "" && idListHas(l.IDs, id) {
				out = append(out, Binder{Kind: BinderLoaderIDs, At: l})
			}
		}
	}
	if driverctlVFIO(v.root, d.Address) {
		p := "/etc/driverctl.d/pci-" + d.Address
		out = append(out, Binder{Kind: BinderDriverctl, At: newEvidence(p, 1, "", "driverctl", "a driverctl override (its boot service binds "+d.Address+" to VFIO)")})
	}
	return append(out, v.udevBinders(d.Address)...)
}

// optionsBinders are the `options vfio-pci ids=` lines naming id in the
// modprobe.d files but gpuprep's.
func (v *BootView) optionsBinders(d *pci.Device) []Binder {
	id := d.VendorID + ":" + d.DeviceID
	var out []Binder
	for _, f := range v.modprobe {
		if f.path == ModprobeConf {
			continue
		}
		for i, l := range f.lines {
			if ids := optionsIDs(l); ids != "" && idListHas(ids, id) {
				e := newEvidence(f.path, i+1, l, "modprobe", "gives vfio-pci ID "+id+" when it loads")
				e.IDs = ids
				out = append(out, Binder{Kind: BinderOptionsIDs, At: e, LoadedBy: v.loadedBy(d)})
			}
		}
	}
	return out
}

// udevBinders are the udev rules (the first of each file) that give the
// device addr to VFIO.
func (v *BootView) udevBinders(addr string) []Binder {
	var out []Binder
	for _, f := range v.udev {
		for i, l := range f.lines { // one rule a line
			if !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, addr) && strings.Contains(l, "vfio") {
				out = append(out, Binder{Kind: BinderUdev, At: newEvidence(f.path, i+1, l, "udev", "a udev rule")})
				break
			}
		}
	}
	return out
}

// optionsIDs is the ids= list of an `options vfio-pci … ids=…` line, or "".
func optionsIDs(l string) string {
	w := strings.Fields(strings.ReplaceAll(l, "_", "-"))
	if len(w) < 3 || w[0] != "options" || w[1] != "vfio-pci" {
		return ""
	}
	for _, o := range w[2:] {
		if ids, ok := strings.CutPrefix(o, "ids="); ok {
			return ids
		}
	}
	return ""
}

type confFile struct {
	path  string
	lines []string
}

// modprobeFiles are the modprobe.d configuration files.
func modprobeFiles(root *host.Root) []confFile {
	var out []confFile
	for _, dir := range []string{"/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"} {
		for _, n := range root.Names(dir) {
			if !strings.HasSuffix(n, ".conf") {
				continue
			}
			if b, err := root.ReadFile(dir + "/" + n); err == nil {
				out = append(out, confFile{dir + "/" + n, strings.Split(string(b), "\n")})
			}
		}
	}
	return out
}

// NextBootCmdline is the kernel command line of the next boot as far as the
// bootloader configuration says (grub.Configured), else the running one.
func NextBootCmdline(root *host.Root) []kargs.Param {
	kver, _ := nextKernel(root)
	src, err := grub.Configured(root, kver)
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	return NextBootArgs(src, err, kargs.Parse(raw))
}

// NextBootArgs is NextBootCmdline from a grub.Configured answer already
// read: src's arguments, else the running ones.
func NextBootArgs(src *grub.Source, err error, running []kargs.Param) []kargs.Param {
	if err == nil && src != nil {
		return kargs.Parse(src.Cmdline)
	}
	return running
}

// idListHas reports whether a vfio-pci ids= list names vendor:device id.
func idListHas(list, id string) bool {
	for _, e := range strings.Split(list, ",") {
		f := strings.Split(strings.ToLower(strings.TrimSpace(e)), ":")
		if len(f) >= 2 && f[0]+":"+f[1] == id {
			return true
		}
	}
	return false
}

// persistFile is the change of gpuprep's file p under root to content (nil:
// removed), against what it holds now; a file that cannot be read counts
// as not there.
func persistFile(root *host.Root, p string, content []byte) change.File {
	old, err := root.ReadFile(p)
	return change.Between(p, old, err == nil, content)
}
