package initramfs

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Load is a module that early boot loads by name, before udev loads
// drivers by alias.
type Load struct {
	Module string // with _ for -, as kmod names it
	Args   string // module parameters on the same line (conf/modules)
	Source string // image file and line, "conf/modules:3"
	// BeforeUdev: loaded before udev's coldplug loads drivers by alias,
	// so before any driver of the image can take a device: dracut's
	// rd.driver.pre and early hooks, mkinitcpio's MODULES. Not
	// initramfs-tools' conf/modules, which its init loads after
	// /scripts/init-top, where udev's script triggers the coldplug and
	// settles (initramfs-tools init: run_scripts /scripts/init-top, then
	// load_modules); not modules-load.d, which systemd does not order
	// before the udev trigger.
	BeforeUdev bool
}

// Option is an `options MODULE …` line of the image's modprobe.d.
type Option struct {
	Module, Value, Source string
}

// Softdep is a `softdep MODULE pre: …` line of the image's modprobe.d.
type Softdep struct {
	Module string
	Pre    []string
	Source string
}

// Alias is a modules.alias line: the module udev loads for a device whose
// modalias matches Pattern.
type Alias struct{ Pattern, Module string }

// Contents is what an image makes early boot do with kernel modules.
type Contents struct {
	Generator string            // "initramfs-tools", "dracut", "mkinitcpio", or "" when unknown
	Kernels   []string          // the KVERs of lib/modules/KVER in the image
	Modules   map[string]string // module name → its file in the image
	Early     []Load            // in the order early boot loads them
	Options   []Option
	Softdeps  []Softdep
	Blacklist map[string]string // module → source
	Aliases   []Alias
	Builtin   map[string]bool // modules.builtin: built into the image's kernel
	Notes     []string        // what was present but not read (a symlinked or oversized config file)
}

// norm is a module name as kmod compares them: - and _ are one.
func norm(m string) string { return strings.ReplaceAll(m, "-", "_") }

// moduleSuffixes are the module file names kmod loads (libkmod's
// kmod_module_new_from_path takes any; depmod indexes these).
var moduleSuffixes = []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

// Contents reads what img's files say early boot loads.
func (img *Image) Contents() *Contents {
	c := &Contents{Modules: map[string]string{}, Blacklist: map[string]string{}, Builtin: map[string]bool{}}
	c.Generator = img.generator()
	for _, n := range img.order {
		kver, rest, ok := moduleDirFile(n)
		if !ok || kver == "" {
			continue
		}
		if rest == "" {
			if k, _ := img.Kind(n); k == Dir && !slices.Contains(c.Kernels, kver) {
				c.Kernels = append(c.Kernels, kver)
			}
			continue
		}
		if e := img.entries[n]; e.kind == Regular {
			for _, s := range moduleSuffixes {
				if b, found := strings.CutSuffix(path.Base(rest), s); found {
					c.Modules[norm(b)] = n
					break
				}
			}
		}
		switch rest {
		case "modules.alias":
			c.Aliases = append(c.Aliases, img.aliases(n)...)
		case "modules.builtin":
			for _, l := range img.lines(n) {
				b := path.Base(l.text)
				if i := strings.Index(b, ".ko"); i > 0 {
					c.Builtin[norm(b[:i])] = true
				}
			}
		}
	}
	img.early(c)
	img.modprobeD(c)
	return c
}

// generator tells which tool made the image from the files each leaves in
// it: initramfs-tools its conf/ and scripts/ (mkinitramfs), dracut its
// usr/lib/dracut (dracut-install), mkinitcpio its /config and
// /init_functions (archlinux/mkinitcpio, init).
func (img *Image) generator() string {
	has := func(n string) bool { _, ok := img.entries[n]; return ok }
	switch {
	case has("conf/initramfs.conf") || has("scripts/functions"):
		return "initramfs-tools"
	case has("usr/lib/dracut") || has("etc/cmdline.d"):
		return "dracut"
	case has("init_functions") && has("config"):
		return "mkinitcpio"
	}
	return ""
}

type line struct {
	text   string
	source string
}

// lines are a kept file's lines, with comments (#) and blank lines
// dropped and backslash continuations joined, as kmod and the generators'
// shell loops read them.
func (img *Image) lines(name string) []line {
	b, ok := img.File(name)
	if !ok {
		return nil
	}
	var out []line
	raw := strings.Split(string(b), "\n")
	for i := 0; i < len(raw); i++ {
		start := i + 1
		l := raw[i]
		for strings.HasSuffix(l, "\\") && i+1 < len(raw) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + raw[i]
		}
		if j := strings.IndexByte(l, '#'); j >= 0 {
			l = l[:j]
		}
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, line{l, fmt.Sprintf("%s:%d", name, start)})
		}
	}
	return out
}

func (img *Image) aliases(name string) []Alias {
	var out []Alias
	for _, l := range img.lines(name) {
		if f := strings.Fields(l.text); len(f) == 3 && f[0] == "alias" {
			out = append(out, Alias{Pattern: f[1], Module: norm(f[2])})
		}
	}
	return out
}

// early lists the modules loaded by name, in boot order:
//   - initramfs-tools: conf/modules, one "module args…" a line (hook-functions
//     add_modules_from_file writes /etc/initramfs-tools/modules there;
//     scripts/functions load_modules runs modprobe on each line in order);
//   - dracut: rd.driver.pre= in etc/cmdline.d/*.conf (dracut.sh writes
//     force_drivers there as 20-force_drivers.conf; 90kernel-modules'
//     parse-kernel.sh modprobes each);
//   - mkinitcpio: MODULES in /config, which init sources and then runs
//     `modprobe -qab $MODULES` before any hook (archlinux/mkinitcpio init,
//     00392d94);
//   - dracut: `modprobe MODULE` lines of its early hooks' scripts (a
//     module.d's pre-udev hook, say), literal names only;
//   - every generator with systemd in the image: etc/modules-load.d and
//     usr/lib/modules-load.d (systemd-modules-load, ";" and "#" comments).
func (img *Image) early(c *Contents) {
	for _, l := range img.lines("conf/modules") {
		m, args, _ := strings.Cut(l.text, " ")
		c.Early = append(c.Early, Load{Module: norm(m), Args: strings.TrimSpace(args), Source: l.source})
	}
	img.cmdlineLoads(c)
	img.hookLoads(c)
	if c.Generator == "mkinitcpio" {
		img.mkinitcpioLoads(c)
	}
	img.modulesLoadD(c)
}

// cmdlineLoads adds dracut's rd.driver.pre (loaded before udev) and
// rd.driver.blacklist of the image's etc/cmdline.d to c.
func (img *Image) cmdlineLoads(c *Contents) {
	for _, n := range img.confFiles("etc/cmdline.d") {
		for _, l := range img.lines(n) {
			for _, w := range strings.Fields(l.text) {
				k, v, _ := strings.Cut(w, "=")
				switch k {
				case "rd.driver.pre":
					for _, m := range strings.Split(v, ",") {
						if m != "" {
							c.Early = append(c.Early, Load{Module: norm(m), Source: l.source, BeforeUdev: true})
						}
					}
				case "rd.driver.blacklist":
					for _, m := range strings.Split(v, ",") {
						c.Blacklist[norm(m)] = l.source
					}
				}
			}
		}
	}
}

// mkinitcpioLoads adds mkinitcpio's MODULES (in /config) to c.
func (img *Image) mkinitcpioLoads(c *Contents) {
	for _, l := range img.lines("config") {
		if v, ok := strings.CutPrefix(l.text, "MODULES="); ok {
			for _, m := range strings.Fields(strings.Trim(v, "'\"()")) {
				c.Early = append(c.Early, Load{Module: norm(m), Source: l.source, BeforeUdev: true})
			}
		}
	}
}

// modulesLoadD adds the modules of the image's modules-load.d to c.
func (img *Image) modulesLoadD(c *Contents) {
	for _, n := range img.dropIns("modules-load.d") {
		for _, l := range img.lines(n) {
			if !strings.HasPrefix(l.text, ";") {
				c.Early = append(c.Early, Load{Module: norm(strings.Fields(l.text)[0]), Source: l.source})
			}
		}
	}
}

// confFiles are dir's *.conf files in the image, sorted by name.
func (img *Image) confFiles(dir string) []string {
	var out []string
	for _, n := range img.order {
		if path.Dir(n) == dir && strings.HasSuffix(n, ".conf") {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(path.Base(a), path.Base(b)) })
	return out
}

// dropIns are the *.conf files of a kmod/systemd drop-in directory kind
// (modprobe.d, modules-load.d) in the image, as kmod and systemd order
// them: by file name, a name in an earlier directory (etc, run, usr/lib,
// lib) hiding the same name in a later one (libkmod-config.c,
// conf_files_list; systemd's conf-files.c).
func (img *Image) dropIns(kind string) []string {
	seen := map[string]string{}
	for _, d := range []string{"etc/", "run/", "usr/local/lib/", "usr/lib/", "lib/"} {
		for _, n := range img.confFiles(d + kind) {
			if _, ok := seen[path.Base(n)]; !ok {
				seen[path.Base(n)] = n
			}
		}
	}
	names := make([]string, 0, len(seen))
	for b := range seen {
		names = append(names, b)
	}
	slices.Sort(names)
	out := make([]string, 0, len(names))
	for _, b := range names {
		n := seen[b]
		switch k, _ := img.Kind(n); {
		case k == Symlink:
			// a link to /dev/null masks the name (systemd's convention,
			// which kmod shares); any other target is outside what
			// gpuprep reads from an image
		case k != Regular:
		default:
			out = append(out, n)
		}
	}
	return out
}

// modprobeD reads the image's modprobe.d: options, softdeps and blacklists
// (libkmod-config.c, kmod_config_parse: "options MOD OPTS", "softdep MOD
// pre: … post: …", "blacklist MOD").
func (img *Image) modprobeD(c *Contents) {
	for _, n := range img.dropIns("modprobe.d") {
		if e := img.entries[n]; e.tooBig {
			c.Notes = append(c.Notes, n+" is over gpuprep's size limit: not read")
			continue
		}
		for _, l := range img.lines(n) {
			f := strings.Fields(l.text)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "options":
				for _, o := range f[2:] {
					c.Options = append(c.Options, Option{Module: norm(f[1]), Value: o, Source: l.source})
				}
			case "blacklist":
				c.Blacklist[norm(f[1])] = l.source
			case "softdep":
				s := Softdep{Module: norm(f[1]), Source: l.source}
				pre := false
				for _, w := range f[2:] {
					switch w {
					case "pre:":
						pre = true
					case "post:":
						pre = false
					default:
						if pre {
							s.Pre = append(s.Pre, norm(w))
						}
					}
				}
				c.Softdeps = append(c.Softdeps, s)
			}
		}
	}
}

// hookLoads reads dracut's early hook scripts for `modprobe MODULE…`
// commands with literal module names (a name from a variable, as
// parse-kernel.sh's rd.driver.pre loop has, is what etc/cmdline.d says).
func (img *Image) hookLoads(c *Contents) {
	byHook := map[string][]string{}
	for _, n := range img.order {
		if hook, _, ok := dracutHook(n); ok {
			byHook[hook] = append(byHook[hook], n)
		}
	}
	for _, hook := range earlyHooks {
		scripts := byHook[hook]
		slices.SortFunc(scripts, func(a, b string) int { return strings.Compare(path.Base(a), path.Base(b)) })
		for _, n := range scripts {
			for _, l := range img.lines(n) {
				w := strings.Fields(l.text)
				if len(w) < 2 || path.Base(w[0]) != "modprobe" {
					continue
				}
				all := slices.Contains(w, "-a") || slices.Contains(w, "--all") || slices.Contains(w, "-qab")
				for i, m := range w[1:] {
					if strings.HasPrefix(m, "-") {
						continue
					}
					if strings.ContainsAny(m, "$`\"'=;|&") {
						break
					}
					ld := Load{Module: norm(m), Source: l.source, BeforeUdev: true}
					if !all { // modprobe MODULE [PARAM=VALUE…]
						ld.Args = strings.Join(w[i+2:], " ")
						c.Early = append(c.Early, ld)
						break
					}
					c.Early = append(c.Early, ld)
				}
			}
		}
	}
}
