package vfio

import (
	"path"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// What loads vfio-pci early at boot: before udev loads a GPU's own driver
// by its alias (vfio-pci has no alias matching a GPU, so udev never loads
// it; IDs given to it act only once something does). Each loader, from the
// program that acts on it:
//
//   - initramfs-tools (Debian, Ubuntu, Proxmox VE): /etc/initramfs-tools/modules
//     and /usr/share/initramfs-tools/modules.d/*, "module_name [args ...]" a
//     line. mkinitramfs's add_modules_from_file copies each line, arguments
//     and all, into the image's /conf/modules (hook-functions: force_load
//     echoes "${@}" there), and the image's init runs load_modules
//     (scripts/functions), which runs `modprobe $m` for each line: so
//     `vfio-pci ids=10de:2331` loads vfio-pci with those IDs (initramfs-tools
//     0.140ubuntu13, hook-functions, scripts/functions, init). A plain
//     modprobe: a modprobe.d blacklist does not stop it.
//   - dracut (Fedora, RHEL): force_drivers in /etc/dracut.conf,
//     /etc/dracut.conf.d/*.conf or /usr/lib/dracut/dracut.conf.d/*.conf;
//     dracut.sh writes "rd.driver.pre=MOD" for each into the image's
//     /etc/cmdline.d/20-force_drivers.conf, and dracut-pre-udev.sh runs
//     `modprobe MOD` for each rd.driver.pre= (also given on the kernel
//     command line; rdloaddriver= is its old name) before udev starts.
//     add_drivers only puts a module into the image ("Specify a
//     space-separated list of kernel modules to add to the initramfs",
//     dracut.conf(5)): nothing loads vfio-pci from it (dracutdevs/dracut
//     5d2bda4, dracut.sh, modules.d/98dracut-systemd/dracut-pre-udev.sh).
//   - mkinitcpio (Arch): MODULES in /etc/mkinitcpio.conf and
//     /etc/mkinitcpio.conf.d/*.conf (appended to it in order and sourced);
//     the image's init runs `modprobe -qab ${earlymodules//,/ } $MODULES`
//     before any hook (udev) runs: -b applies the blacklist
//     (archlinux/mkinitcpio v41, mkinitcpio, functions, init).
//   - systemd-modules-load: modules-load.d/*.conf (one module name a line)
//     and modules-load= on the kernel command line; rd.modules-load= only in
//     an initramfs that runs systemd (dracut's). It loads with
//     KMOD_PROBE_APPLY_BLACKLIST (systemd's module_load_and_warn): a
//     blacklist stops it. /etc/modules is read only where a
//     modules-load.d file links to it (Debian's kmod package ships
//     /etc/modules-load.d/modules.conf -> ../modules, which Debian's
//     piuparts lists as "-> ../modules (target obsoleted by
//     modules-load.d)", piuparts.py); systemd itself never reads
//     /etc/modules, and initramfs-tools reads /etc/initramfs-tools/modules,
//     not /etc/modules (mkinitramfs: "${CONFDIR}/modules").
//   - a softdep: `softdep X pre: vfio-pci` loads vfio-pci when X loads, and
//     only then. udev loads X by alias with KMOD_PROBE_APPLY_BLACKLIST, and
//     libkmod's kmod_module_probe_insert_module returns on a blacklisted
//     module (module_is_blacklisted) before it builds the probe list with
//     the softdeps (kmod_module_get_probe_list →
//     __kmod_module_fill_softdep), and returns 0 at once for a module that
//     is built in or loaded (module_is_inkernel): a softdep on a
//     blacklisted, built-in or absent module never fires
//     (kmod-project/kmod v34-271-g84fa569, libkmod/libkmod-module.c).
//
// And on the kernel command line: module_blacklist=vfio_pci makes the
// kernel refuse to load the module however it is asked (kernel/module:
// blacklisted()); modprobe.blacklist=vfio_pci is a blacklist (libkmod's
// kcmdline_parse_result adds it as one).

// earlyLoad is what loads vfio-pci early at a boot, and what looks as if it
// did but does not (and why).
type earlyLoad struct {
	loaders    []Evidence
	discounted []Evidence
}

// bootFacts is what the judgement of an early load rests on.
type bootFacts struct {
	root     *host.Root
	cmdline  []kargs.Param
	builtin  map[string]bool // modules.builtin; nil when unreadable
	modules  map[string]bool // modules.dep; nil when unreadable
	tool     string          // the node's initramfs tool: update-initramfs, dracut, mkinitcpio; "" none found
	modprobe []confFile
	kver     string
	// noInitramfs says why the boot loads no initramfs ("" when it loads
	// one, or where that is not known): what only an initramfs acts on
	// then does nothing.
	noInitramfs string
	aliases     []pciAlias // the kernel's modules.alias `alias pci:` lines (coldplug.go)
}

func isVFIOPCI(m string) bool { return kargs.Norm(strings.TrimSuffix(m, "?")) == "vfio_pci" }

// KernelModules is the set of loadable modules of kernel kver
// (modules.dep: kernel/drivers/gpu/drm/nouveau/nouveau.ko: … → nouveau);
// nil when the file cannot be read.
func KernelModules(root *host.Root, kver string) map[string]bool {
	b, err := root.ReadFile("/lib/modules/" + kver + "/modules.dep")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		f, _, _ := strings.Cut(l, ":")
		base := f[strings.LastIndexByte(f, '/')+1:]
		if i := strings.Index(base, ".ko"); i > 0 {
			out[kargs.Norm(base[:i])] = true
		}
	}
	return out
}

// initramfsTool is the node's initramfs tool, as initramfs.Command finds it.
func initramfsTool(root *host.Root) string {
	if c := initramfs.Command(root); c != nil {
		return c[0]
	}
	return ""
}

// blacklist is where module m is blacklisted for modprobe at the boot
// (a modprobe.d `blacklist m`, or modprobe.blacklist= naming it), or nil.
func (f *bootFacts) blacklist(m string) *Evidence {
	m = kargs.Norm(m)
	for _, c := range f.modprobe {
		for i, l := range c.lines {
			w := strings.Fields(l)
			if len(w) >= 2 && w[0] == "blacklist" && kargs.Norm(w[1]) == m {
				e := newEvidence(c.path, i+1, l, "modprobe", "blacklists "+m)
				return &e
			}
		}
	}
	for _, p := range f.cmdline {
		if kargs.Norm(p.Key) == "modprobe.blacklist" && listHas(p.Value, m) {
			e := newEvidence(NextCmdline, 0, p.String(), "modprobe", "blacklists "+m)
			return &e
		}
	}
	return nil
}

// forbidden is module_blacklist= naming m on the command line, or nil.
func (f *bootFacts) forbidden(m string) *Evidence {
	p, ok := ModuleForbidden(f.cmdline, m)
	if !ok {
		return nil
	}
	e := newEvidence(NextCmdline, 0, p.String(), "the kernel", "refuses to load "+kargs.Norm(m)+", however it is asked")
	return &e
}

// ModuleForbidden reports whether module_blacklist= on command line ps
// makes the kernel refuse to load module m (a module's own name, as
// modules carry it: nvidia_uvm), and the argument that does. The kernel
// keeps one string (core_param module_blacklist, charp: the last
// occurrence) and compares each comma-separated name with the module's
// byte for byte (kernel/module/main.c: blacklisted(), called from
// early_mod_check, -EPERM): "nvidia-uvm" there forbids nothing.
func ModuleForbidden(ps []kargs.Param, m string) (kargs.Param, bool) {
	p, ok := kargs.Last(ps, "module_blacklist")
	if !ok {
		return p, false
	}
	for _, x := range strings.Split(p.Value, ",") {
		if x == kargs.Norm(m) {
			return p, true
		}
	}
	return p, false
}

func listHas(list, m string) bool {
	for _, x := range strings.Split(list, ",") {
		if kargs.Norm(strings.TrimSpace(x)) == m {
			return true
		}
	}
	return false
}

// readEarlyLoad finds what loads vfio-pci early at the boot f describes.
func readEarlyLoad(f *bootFacts) earlyLoad {
	var el earlyLoad
	f.softdeps(&el)
	f.modulesLoad(&el)
	f.initramfsTools(&el)
	f.dracut(&el)
	f.mkinitcpio(&el)
	if f.noInitramfs != "" {
		keep := el.loaders[:0]
		for _, l := range el.loaders {
			if initramfsOnly(l) {
				l.Says = "does nothing at the next boot: " + f.noInitramfs + ", and only an initramfs acts on it"
				el.discounted = append(el.discounted, l)
				continue
			}
			keep = append(keep, l)
		}
		el.loaders = keep
	}
	if forb := f.forbidden("vfio_pci"); forb != nil && len(el.loaders) > 0 {
		for _, l := range el.loaders {
			l.Says = "does nothing: " + forb.Where() + " " + forb.Text + " (the kernel refuses to load vfio_pci)"
			el.discounted = append(el.discounted, l)
		}
		el.loaders = nil
	}
	return el
}

// initramfsOnly reports whether loader l acts only inside an initramfs:
// an initramfs generator's configuration (initramfs-tools' modules file,
// dracut's force_drivers and rd.driver.pre=, mkinitcpio's MODULES and
// earlymodules=), or rd.modules-load=, which systemd-modules-load reads
// only in an initramfs. The root's systemd-modules-load, modules-load=
// and modprobe's softdeps act on the root itself, with or without one.
func initramfsOnly(l Evidence) bool {
	switch l.By {
	case "initramfs-tools", "dracut", "mkinitcpio":
		return true
	case "systemd-modules-load":
		return strings.HasPrefix(l.Text, "rd.")
	}
	return false
}

// softdeps: `softdep X pre: … vfio-pci …` counts where X loads at boot: a
// module of the kernel (modules.dep), not built in, not blacklisted.
func (f *bootFacts) softdeps(el *earlyLoad) {
	for _, c := range f.modprobe {
		for i, l := range c.lines {
			w := strings.Fields(l)
			if len(w) < 3 || w[0] != "softdep" || !softdepPreVFIO(w[2:]) {
				continue
			}
			x := kargs.Norm(w[1])
			e := newEvidence(c.path, i+1, l, "modprobe", "loads vfio-pci before "+x+" when udev loads "+x)
			why := ""
			switch {
			case f.builtin[x]:
				why = x + " is built into the kernel (modules.builtin): modprobe never loads it, so the softdep never fires"
			case f.modules == nil:
				why = "cannot tell whether " + x + " is a module of kernel " + f.kver + " (/lib/modules/" + f.kver + "/modules.dep unreadable), and a softdep fires only when its module loads"
			case !f.modules[x]:
				why = x + " is not a module of kernel " + f.kver + " (not in modules.dep): nothing loads it at boot, so the softdep never fires"
			}
			if bl := f.blacklist(x); why == "" && bl != nil {
				why = x + " is blacklisted (" + bl.Where() + " " + strings.TrimSpace(bl.Text) + "): udev's modprobe applies the blacklist before it reads the softdeps, so the softdep never fires"
			}
			if forb := f.forbidden(x); why == "" && forb != nil {
				why = x + " is on module_blacklist= (" + forb.Text + "): it never loads, so the softdep never fires"
			}
			if why != "" {
				e.Says = "does nothing: " + why
				el.discounted = append(el.discounted, e)
				continue
			}
			el.loaders = append(el.loaders, e)
		}
	}
}

func softdepPreVFIO(w []string) bool {
	pre := false
	for _, x := range w {
		switch {
		case x == "pre:":
			pre = true
		case x == "post:":
			pre = false
		case pre && isVFIOPCI(x):
			return true
		}
	}
	return false
}

// modulesLoadDirs are systemd-modules-load's directories, highest
// precedence first (modules-load.d(5)): a file's name in an earlier one
// masks the same name in a later one.
var modulesLoadDirs = []string{"/etc/modules-load.d", "/run/modules-load.d", "/usr/local/lib/modules-load.d", "/usr/lib/modules-load.d", "/lib/modules-load.d"}

// modulesLoad: systemd-modules-load's files and modules-load= (and, in a
// dracut initramfs, rd.modules-load=); /etc/modules only through a
// modules-load.d link to it.
func (f *bootFacts) modulesLoad(el *earlyLoad) {
	add := f.modulesLoadAdd(el)
	seen := map[string]bool{}
	etcModules := false
	for _, dir := range modulesLoadDirs {
		for _, n := range f.root.Names(dir) {
			if !strings.HasSuffix(n, ".conf") || seen[n] {
				continue
			}
			seen[n] = true
			etcModules = f.modulesLoadFile(el, dir, n, add) || etcModules
		}
	}
	if !etcModules {
		f.etcModulesUnread(el)
	}
	for _, p := range f.cmdline {
		f.modulesLoadParam(el, p, add)
	}
}

// modulesLoadAdd is how systemd-modules-load's evidence is taken in: as a
// loader, or discounted while vfio_pci is blacklisted (it applies the
// blacklist).
func (f *bootFacts) modulesLoadAdd(el *earlyLoad) func(Evidence) {
	bl := f.blacklist("vfio_pci")
	return func(e Evidence) {
		if bl != nil {
			e.Says = "does nothing: vfio_pci is blacklisted (" + bl.Where() + " " + strings.TrimSpace(bl.Text) + ") and systemd-modules-load applies the blacklist"
			el.discounted = append(el.discounted, e)
			return
		}
		el.loaders = append(el.loaders, e)
	}
}

// modulesLoadFile takes in the lines of the modules-load.d file n of dir
// that name vfio-pci; it reports whether the file links to /etc/modules.
func (f *bootFacts) modulesLoadFile(el *earlyLoad, dir, n string, add func(Evidence)) (etcModules bool) {
	const by = "systemd-modules-load"
	p := dir + "/" + n
	src := p
	if t, err := f.root.Readlink(p); err == nil {
		if !path.IsAbs(t) {
			t = path.Join(dir, t)
		}
		if path.Clean(t) == "/etc/modules" {
			etcModules = true
			src = p + " (-> /etc/modules)"
		}
	}
	b, err := f.root.ReadFile(p)
	if err != nil {
		return etcModules
	}
	for i, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		first := strings.Fields(t)[0]
		if !isVFIOPCI(first) {
			continue
		}
		e := newEvidence(src, i+1, l, by, "loads vfio-pci as the root's systemd starts, alongside udev's coldplug: in time where udev loads no other driver for the device")
		if first != t {
			// systemd-modules-load takes the whole line as one name
			e.Says = "does nothing: systemd-modules-load takes the whole line as one module name, and no module is called " + strings.TrimSpace(t)
			el.discounted = append(el.discounted, e)
			continue
		}
		add(e)
	}
	return etcModules
}

// etcModulesUnread discounts the lines of /etc/modules that name vfio-pci
// where no modules-load.d file links to it.
func (f *bootFacts) etcModulesUnread(el *earlyLoad) {
	b, err := f.root.ReadFile("/etc/modules")
	if err != nil {
		return
	}
	for i, l := range strings.Split(string(b), "\n") {
		if w := strings.Fields(l); len(w) > 0 && w[0][0] != '#' && isVFIOPCI(w[0]) {
			el.discounted = append(el.discounted, newEvidence("/etc/modules", i+1, l, "nothing",
				"does nothing: no modules-load.d file links to /etc/modules (Debian's kmod package ships /etc/modules-load.d/modules.conf -> ../modules), and systemd-modules-load reads only modules-load.d"))
		}
	}
}

// modulesLoadParam takes in p, a parameter of the next boot's command
// line, where it is a modules-load= (or rd.modules-load=) naming vfio-pci.
func (f *bootFacts) modulesLoadParam(el *earlyLoad, p kargs.Param, add func(Evidence)) {
	k := kargs.Norm(p.Key)
	if (k != "modules_load" && k != "rd.modules_load") || !listHas(p.Value, "vfio_pci") {
		return
	}
	e := newEvidence(NextCmdline, 0, p.String(), "systemd-modules-load", "loads vfio-pci at boot")
	if k == "rd.modules_load" {
		if f.tool != "dracut" && !(f.tool == "mkinitcpio" && f.mkinitcpioSystemd()) {
			e.Says = "does nothing here: rd.modules-load= is read by systemd-modules-load inside an initramfs that runs systemd (dracut's, mkinitcpio's with the systemd hook); this node's initramfs tool is " + orNoTool(f.tool)
			el.discounted = append(el.discounted, e)
			return
		}
		e.Says = "loads vfio-pci in the initramfs, before udev starts there"
	}
	add(e)
}

func orNoTool(t string) string {
	if t == "" {
		return "not known (no update-initramfs, dracut or mkinitcpio found)"
	}
	return t
}

// initramfsTools: /etc/initramfs-tools/modules and
// /usr/share/initramfs-tools/modules.d/*, where initramfs-tools makes the
// initramfs.
func (f *bootFacts) initramfsTools(el *earlyLoad) {
	files := []string{"/etc/initramfs-tools/modules"}
	for _, n := range f.root.Names("/usr/share/initramfs-tools/modules.d") {
		files = append(files, "/usr/share/initramfs-tools/modules.d/"+n)
	}
	for _, p := range files {
		b, err := f.root.ReadFile(p)
		if err != nil {
			continue
		}
		for i, l := range strings.Split(string(b), "\n") {
			if l == "" || l[0] == '#' { // grep '^[^#]'
				continue
			}
			w := strings.Fields(l)
			if len(w) == 0 || !isVFIOPCI(w[0]) {
				continue
			}
			e := newEvidence(p, i+1, l, "initramfs-tools", "the initramfs's init modprobes vfio-pci with this line's arguments (load_modules), after the initramfs's own udev coldplug and before the root's")
			for _, a := range w[1:] {
				if v, ok := strings.CutPrefix(a, "ids="); ok {
					e.IDs = v
				}
			}
			if f.tool != "update-initramfs" {
				e.Says = "does nothing here: only initramfs-tools (update-initramfs) reads it; this node's initramfs tool is " + orNoTool(f.tool)
				el.discounted = append(el.discounted, e)
				continue
			}
			el.loaders = append(el.loaders, e)
		}
	}
}

// dracutFiles are dracut's configuration files in the order it sources
// them: /etc/dracut.conf, then the *.conf of /etc/dracut.conf.d and
// /usr/lib/dracut/dracut.conf.d sorted by name, /etc's masking the same
// name (dracut.sh: dropindirs_sort).
func dracutFiles(root *host.Root) []string {
	files := []string{"/etc/dracut.conf"}
	byName := map[string]string{}
	for _, dir := range []string{"/usr/lib/dracut/dracut.conf.d", "/etc/dracut.conf.d"} {
		for _, n := range root.Names(dir) {
			if strings.HasSuffix(n, ".conf") {
				byName[n] = dir + "/" + n
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, byName[n])
	}
	return files
}

// readShellVar reads name's assignments across files.
func readShellVar(root *host.Root, files []string, name string) shellVar {
	var v shellVar
	for _, p := range files {
		if b, err := root.ReadFile(p); err == nil {
			v.assign(p, strings.Split(string(b), "\n"), name)
		}
	}
	return v
}

func (w shellWord) evidence(by, says string) Evidence {
	return newEvidence(w.file, w.line, w.text, by, says)
}

// dracut: force_drivers (loaded before udev), add_drivers (only in the
// image), rd.driver.pre= on the command line.
func (f *bootFacts) dracut(el *earlyLoad) {
	files := dracutFiles(f.root)
	here := f.tool == "dracut"
	other := "does nothing here: only dracut reads it; this node's initramfs tool is " + orNoTool(f.tool)
	for _, name := range []string{"force_drivers", "add_drivers"} {
		v := readShellVar(f.root, files, name)
		for _, w := range v.unread {
			el.discounted = append(el.discounted, w.evidence("dracut", "not read: gpuprep reads only plain "+name+"= and "+name+"+= assignments"))
		}
		for _, w := range v.words {
			if !isVFIOPCI(w.word) {
				continue
			}
			switch {
			case !here:
				el.discounted = append(el.discounted, w.evidence("dracut", other))
			case name == "add_drivers":
				el.discounted = append(el.discounted, w.evidence("dracut", "does not load it: add_drivers only puts vfio-pci into the initramfs, and nothing there loads it (udev loads by alias, and vfio-pci's matches no GPU); force_drivers (or rd.driver.pre=vfio-pci) loads it"))
			default:
				el.loaders = append(el.loaders, w.evidence("dracut", "written as rd.driver.pre= into the initramfs; dracut-pre-udev modprobes it before udev starts"))
			}
			break
		}
	}
	for _, p := range f.cmdline {
		k := kargs.Norm(p.Key)
		if (k != "rd.driver.pre" && k != "rdloaddriver") || !listHas(p.Value, "vfio_pci") {
			continue
		}
		e := newEvidence(NextCmdline, 0, p.String(), "dracut", "dracut-pre-udev modprobes it before udev starts")
		if !here {
			e.Says = "does nothing here: only a dracut initramfs reads it; this node's initramfs tool is " + orNoTool(f.tool)
			el.discounted = append(el.discounted, e)
			continue
		}
		el.loaders = append(el.loaders, e)
	}
}

// mkinitcpioFiles are /etc/mkinitcpio.conf and its drop-ins, in the order
// mkinitcpio appends them.
func mkinitcpioFiles(root *host.Root) []string {
	files := []string{"/etc/mkinitcpio.conf"}
	var drop []string
	for _, n := range root.Names("/etc/mkinitcpio.conf.d") {
		if strings.HasSuffix(n, ".conf") {
			drop = append(drop, "/etc/mkinitcpio.conf.d/"+n)
		}
	}
	sort.Strings(drop)
	return append(files, drop...)
}

// mkinitcpioSystemd: HOOKS has the systemd hook (the initramfs runs
// systemd; install/systemd writes MODULES to its modules-load.d).
func (f *bootFacts) mkinitcpioSystemd() bool {
	for _, w := range readShellVar(f.root, mkinitcpioFiles(f.root), "HOOKS").words {
		if w.word == "systemd" {
			return true
		}
	}
	return false
}

// mkinitcpio: MODULES of /etc/mkinitcpio.conf and its drop-ins, and
// earlymodules= on the command line. With the systemd hook the initramfs's
// systemd-modules-load loads MODULES (install/systemd writes them to
// /etc/modules-load.d/MODULES.conf there); without it, init's modprobe -qab.
// Either way the blacklist applies.
func (f *bootFacts) mkinitcpio(el *earlyLoad) {
	files := mkinitcpioFiles(f.root)
	here := f.tool == "mkinitcpio"
	bl := f.blacklist("vfio_pci")
	judge := func(e Evidence) {
		switch {
		case !here:
			e.Says = "does nothing here: only mkinitcpio reads it; this node's initramfs tool is " + orNoTool(f.tool)
		case bl != nil:
			e.Says = "does nothing: vfio_pci is blacklisted (" + bl.Where() + " " + strings.TrimSpace(bl.Text) + ") and mkinitcpio's init loads MODULES with modprobe -b, which applies it"
		default:
			el.loaders = append(el.loaders, e)
			return
		}
		el.discounted = append(el.discounted, e)
	}
	v := readShellVar(f.root, files, "MODULES")
	for _, w := range v.unread {
		el.discounted = append(el.discounted, w.evidence("mkinitcpio", "not read: gpuprep reads only plain MODULES=(…) and MODULES+=(…) assignments"))
	}
	for _, w := range v.words {
		if isVFIOPCI(w.word) {
			says := "the initramfs's init modprobes MODULES before any hook (udev) runs"
			if f.mkinitcpioSystemd() {
				says = "the initramfs's systemd-modules-load loads MODULES (systemd hook), before the root's udev"
			}
			judge(w.evidence("mkinitcpio", says))
			break
		}
	}
	for _, p := range f.cmdline {
		if kargs.Norm(p.Key) == "earlymodules" && listHas(p.Value, "vfio_pci") {
			judge(newEvidence(NextCmdline, 0, p.String(), "mkinitcpio", "the initramfs's init modprobes it before any hook (udev) runs"))
		}
	}
}
