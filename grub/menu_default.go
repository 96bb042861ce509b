package grub

import (
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/plural"
)

// The default entry of a generated GRUB menu, as GRUB picks it at boot.
// grub-mkconfig's 00_header (grub 2.06/2.12, util/grub.d/00_header.in)
// writes, after load_env of $prefix/grubenv:
//
//	if [ "${next_entry}" ] ; then
//	   set default="${next_entry}"          (grub-reboot's one-shot entry)
//	   ...
//	else
//	   set default="${GRUB_DEFAULT}"        ("0", a title, an id, "1>2", or
//	fi                                       "${saved_entry}" for GRUB_DEFAULT=saved)
//
// and 10_linux one top-level menuentry for the newest kernel and a
// submenu holding an entry per kernel, each with its `linux /boot/vmlinuz-K`
// and `initrd /boot/initrd.img-K` lines. GRUB resolves a default (grub-core/
// normal/menu.c, grub_menu_get_default_entry_index and
// get_entry_index_by_name) as an index, else an entry's --id, else its
// title, with ">" separating the levels of submenus; an empty or unknown
// default is entry 0.

// menuItem is a menuentry or submenu of a grub.cfg.
type menuItem struct {
	title, id     string
	linux, initrd string
	line          int
	sub           []*menuItem // for a submenu
	isSub         bool
	// fail is the boot after a failed initrdless one (initrdfail.go), and
	// branch, while parsing, which of its branches the lines are in.
	fail   *initrdfailBranch
	branch byte
}

// grubMenuKernel reads the GRUB menu and grubenv beside it.
func grubMenuKernel(root *host.Root, kind string) NextKernel {
	dir := "/boot/grub"
	if kind == KindGRUB2 || !root.Exists(dir+"/grub.cfg") && root.Exists("/boot/grub2/grub.cfg") {
		dir = "/boot/grub2"
	}
	cfg := dir + "/grub.cfg"
	data, err := readMenu(root, cfg)
	if err != nil {
		return NextKernel{Missing: "the GRUB menu " + cfg + " is not readable (" + err.Error() + "), so which entry boots next is unknown"}
	}
	env := readGrubenv(root, dir+"/grubenv")
	items, defs, err := parseMenu(data)
	if err != nil {
		return NextKernel{Missing: cfg + ": " + err.Error()}
	}
	def := "0"
	if len(defs) > 0 {
		def = defs[len(defs)-1]
	}
	for _, d := range defs {
		if d == "${next_entry}" && env["next_entry"] != "" {
			def = d
		}
	}
	expr := def
	switch def {
	case "${next_entry}":
		expr = env["next_entry"]
	case "${saved_entry}":
		expr = env["saved_entry"]
	}
	if strings.Contains(expr, "$") {
		return NextKernel{Missing: fmt.Sprintf("%s: the default entry is %q, a variable gpuprep does not evaluate", cfg, expr)}
	}
	it := pickMenu(items, expr)
	if it == nil {
		return NextKernel{Missing: fmt.Sprintf("%s: no menu entry to boot (default %q)", cfg, expr)}
	}
	from := fmt.Sprintf("%s:%d entry '%s' (default %q", cfg, it.line, it.title, expr)
	if expr != def {
		from += " from " + dir + "/grubenv"
	}
	from += ")"
	linux, initrd, note := it.bootOf(env, dir+"/grubenv")
	from += note
	k, missing := menuRelease(root, linux)
	if missing != "" {
		return NextKernel{Missing: from + ": " + missing}
	}
	nk := NextKernel{Release: k, Initrd: bootPath(root, initrd), From: from, NoInitramfs: initrd == ""}
	if nk.NoInitramfs && note == "" {
		nk.From += ", without an initramfs (the entry has no initrd line)"
	}
	return nk
}

// menuRelease is the kernel release of a menu entry's linux line, or what
// is missing: a release in its name, or one kernelrelease.Check accepts.
func menuRelease(root *host.Root, linux string) (string, string) {
	k := kernelOfImage(root, linux)
	if k == "" {
		return "", fmt.Sprintf("its linux line names %q, whose kernel release is not in its name", linux)
	}
	if err := kernelrelease.Check(k); err != nil {
		return "", fmt.Sprintf("its linux line %q: %v", linux, err)
	}
	return k, ""
}

// maxMenu bounds a grub.cfg read: one with many kernels and os-prober's
// entries is tens of KiB, more than a command-line file's bound.
const maxMenu = 1 << 20

// readMenu reads a generated GRUB menu, refusing one larger than maxMenu
// with an error naming it.
func readMenu(root *host.Root, p string) ([]byte, error) {
	if fi, err := root.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Size() > maxMenu {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a GRUB menu is read up to", p, fi.Size(), maxMenu)
	}
	b, err := root.ReadFile(p)
	if err == nil && len(b) > maxMenu {
		return nil, fmt.Errorf("%s is more than the %d bytes a GRUB menu is read up to", p, maxMenu)
	}
	return b, err
}

// readGrubenv reads a GRUB environment block (grub-editenv's format: a
// "# GRUB Environment Block" line, name=value lines, '#' padding to 1024
// bytes; grub-core/lib/envblk.c).
func readGrubenv(root *host.Root, p string) map[string]string {
	env := map[string]string{}
	b, err := kargs.ReadFile(root, p)
	if err != nil {
		return env
	}
	for _, l := range strings.Split(string(b), "\n") {
		if n, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(n, "#") {
			env[n] = v
		}
	}
	return env
}

// parseMenu reads the menu entries and submenus of a grub.cfg, and the
// values of its top-level `set default=` lines in order. Blocks are
// tracked by lines ending in "{" and lines that are "}", as grub-mkconfig
// writes them (functions included).
func parseMenu(data []byte) ([]*menuItem, []string, error) {
	var top []*menuItem
	var defs []string
	type frame struct{ item *menuItem }
	var stack []frame
	for i, raw := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(raw)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		w := grubWords(l)
		if l == "}" {
			if len(stack) == 0 {
				return nil, nil, fmt.Errorf("line %d: '}' closes no block", i+1)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		var cur *menuItem
		inMenu := false
		for j := len(stack) - 1; j >= 0; j-- {
			if stack[j].item != nil {
				cur, inMenu = stack[j].item, true
				break
			}
		}
		opens := strings.HasSuffix(l, "{")
		if opens && len(w) > 0 && (w[0] == "menuentry" || w[0] == "submenu") {
			it := &menuItem{isSub: w[0] == "submenu", line: i + 1}
			if len(w) > 1 {
				it.title = w[1]
			}
			for k := 1; k+1 < len(w); k++ {
				if w[k] == "--id" || w[k] == "$menuentry_id_option" || w[k] == "${menuentry_id_option}" {
					it.id = w[k+1]
				}
			}
			switch {
			case cur == nil:
				top = append(top, it)
			case cur.isSub:
				cur.sub = append(cur.sub, it)
			}
			stack = append(stack, frame{it})
			continue
		}
		if opens {
			stack = append(stack, frame{})
			continue
		}
		if !inMenu && len(w) >= 2 && w[0] == "set" && strings.HasPrefix(w[1], "default=") {
			defs = append(defs, strings.TrimPrefix(w[1], "default="))
		}
		if inMenu && !cur.isSub && !cur.initrdfailLine(l) && len(w) >= 2 {
			cur.bootLine(w)
		}
	}
	if len(stack) != 0 {
		return nil, nil, fmt.Errorf("%s not closed", plural.N(len(stack), "block"))
	}
	return top, defs, nil
}

// pickMenu resolves a default as GRUB does (grub-core/normal/menu.c,
// grub 2.06 and 2.12): at each level, run_menu takes get_entry_number of
// "default", which is grub_strtoul of it (base 0: 0x hex, 0[0-7] octal,
// the digits up to the first other byte, "1>2" is 1), else the first entry
// whose title or --id is its first ">"-separated part (menuentry_eq; ">>"
// stands for a ">"), and an index that is no entry, or no match, is the
// level's entry 0. A plain entry chosen boots, whatever follows; a
// submenu chosen runs with "default" set to what follows the first ">"
// (grub_menu_execute_entry; unset where nothing does: its entry 0).
func pickMenu(items []*menuItem, expr string) *menuItem {
	level, rest := items, expr
	for len(level) > 0 {
		part, tail := cutDefault(rest)
		it := level[entryIndex(level, part)]
		if !it.isSub {
			return it
		}
		level, rest = it.sub, tail
	}
	return nil
}

// cutDefault splits a default at its first ">" that is not ">>": the first
// part with each ">>" read as ">", and what follows as it is.
func cutDefault(s string) (part, tail string) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '>' && i+1 < len(s) && s[i+1] == '>':
			b.WriteByte('>')
			i++
		case s[i] == '>':
			return b.String(), s[i+1:]
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), ""
}

// entryIndex is get_entry_number's answer for one level, out-of-range and
// unmatched defaults made entry 0 as run_menu makes them.
func entryIndex(level []*menuItem, part string) int {
	if n, ok := grubStrtoul(part); ok {
		if n < uint64(len(level)) {
			return int(n)
		}
		return 0
	}
	for i, c := range level {
		if part != "" && (c.title == part || c.id == part) {
			return i
		}
	}
	return 0
}

// grubStrtoul is grub_strtoul(s, NULL, 0) (grub-core/kern/misc.c,
// grub_strtoull): blanks skipped, the base guessed, digits read up to the
// first byte that is none; ok is false where no digit was read (
// GRUB_ERR_BAD_NUMBER) or the number overflows (GRUB_ERR_OUT_OF_RANGE),
// both of which get_entry_number takes for no number.
func grubStrtoul(s string) (n uint64, ok bool) {
	s = strings.TrimLeft(s, " \t\n\r\f\v")
	base := uint64(10)
	switch {
	case strings.HasPrefix(s, "0x"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '7':
		base = 8
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // grub_tolower, for the letters
		var d uint64
		switch {
		case s[i] >= '0' && s[i] <= '9':
			d = uint64(s[i] - '0')
		case c >= 'a' && c <= 'z':
			d = uint64(c-'a') + 10
		default:
			return n, ok
		}
		if d >= base {
			return n, ok
		}
		if n > (^uint64(0)-d)/base {
			return 0, false
		}
		n, ok = n*base+d, true
	}
	return n, ok
}

// grubWords splits a grub.cfg line into words, single and double quotes
// removed (GRUB's script lexer, enough for menuentry and set lines).
func grubWords(l string) []string {
	var out []string
	var cur strings.Builder
	in, q := false, byte(0)
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q != 0 && c == q:
			q = 0
		case q != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			q, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
