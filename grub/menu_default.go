package grub

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
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
	k := kernelOfImage(root, it.linux)
	if k == "" {
		return NextKernel{Missing: fmt.Sprintf("%s: its linux line names %q, whose kernel release is not in its name", from, it.linux)}
	}
	return NextKernel{Release: k, Initrd: bootPath(root, it.initrd), From: from}
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
		if inMenu && !cur.isSub && len(w) >= 2 {
			switch w[0] {
			case "linux", "linuxefi", "linux16":
				cur.linux = w[1]
			case "initrd", "initrdefi", "initrd16":
				cur.initrd = w[len(w)-1] // the microcode images come first
			}
		}
	}
	if len(stack) != 0 {
		return nil, nil, fmt.Errorf("%s not closed", plural.N(len(stack), "block"))
	}
	return top, defs, nil
}

// pickMenu resolves a default as GRUB does: each ">"-separated part an
// index, an --id or a title at its level; an empty or unknown one is the
// first entry.
func pickMenu(items []*menuItem, expr string) *menuItem {
	level := items
	var it *menuItem
	for _, part := range strings.Split(expr, ">") {
		it = nil
		if n, err := strconv.Atoi(part); err == nil && n >= 0 && n < len(level) {
			it = level[n]
		}
		for _, c := range level {
			if it == nil && part != "" && (c.id == part || c.title == part) {
				it = c
			}
		}
		if it == nil {
			if len(level) == 0 {
				return nil
			}
			it = level[0]
		}
		level = it.sub
	}
	for it != nil && it.isSub { // a submenu chosen: its first entry
		if len(it.sub) == 0 {
			return nil
		}
		it = it.sub[0]
	}
	return it
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
