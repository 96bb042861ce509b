package grub

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// Bootloader kinds gpuprep knows.
const (
	KindGRUB        = "grub"         // Debian, Ubuntu, Proxmox, Arch: /etc/default/grub + update-grub / grub-mkconfig
	KindGRUB2       = "grub2"        // openSUSE: /etc/default/grub + grub2-mkconfig
	KindBLS         = "grub-bls"     // RHEL, Rocky, Alma, Fedora: grubby + /etc/default/grub + /etc/kernel/cmdline
	KindSystemdBoot = "systemd-boot" // /etc/kernel/cmdline + kernel-install
	KindKernelstub  = "kernelstub"   // Pop!_OS
	KindRpmOstree   = "rpm-ostree"   // Fedora CoreOS / Silverblue, RHCOS
)

// ErrUnsupported is returned (wrapped) for a boot setup gpuprep cannot edit.
var ErrUnsupported = errors.New("not supported")

// ErrNoRegenerate is returned (wrapped) by PlanEdit when a GRUB menu must be
// regenerated and the root has no tool to do it; what to do instead depends
// on the command (grub ensure has --no-regenerate).
var ErrNoRegenerate = fmt.Errorf("no update-grub, grub-mkconfig or grub2-mkconfig under the root to regenerate the boot menu: %w", ErrUnsupported)

// Boot is the boot setup detected under a root.
type Boot struct {
	Kind string
	// Files is the defaults files (GRUB kinds).
	Files []File
	// KernelCmdline is /etc/kernel/cmdline when present.
	KernelCmdline *File
	// Entries are the BLS entries (/boot/loader/entries/*.conf).
	Entries []File
	// Regenerate is the command that rewrites the boot menu from the
	// defaults files (GRUB kinds); nil when none was found.
	Regenerate []string
	// Kernels are the kernel versions with an image under /lib/modules
	// (systemd-boot).
	Kernels []string
	// KernelstubOptions are kernelstub's user kernel_options.
	KernelstubOptions []string
	// Menu (GRUB kinds) is the generated boot menu, nil when there is
	// none. Its content, not its age, says whether it has a change
	// (MenuLacks): a menu can be older than the defaults files and right
	// (a file touched), or newer and wrong (regenerated from other files,
	// or the files' times kept).
	Menu *File
	// kernelopts is /boot/grub2/grubenv's kernelopts (BLS entries whose
	// options say $kernelopts, RHEL 8).
	kernelopts string
	// Entry is the boot entry the next boot reads its options from, made
	// by the bootloader's tool from the configuration: the running
	// kernel's (systemd-boot, by kernel-install from /etc/kernel/cmdline),
	// kernelstub's <OS>-current.conf (kernelstub). nil when none was
	// found.
	Entry *File
	// ESPMode (proxmox-boot-tool) is the bootloader its ESPs hold:
	// ESPSystemdBoot, ESPGRUB, or "" when the root does not tell;
	// ESPModeWhy is the evidence (or what was missing).
	ESPMode, ESPModeWhy string
	// proxmoxRunning (proxmox-boot-tool without /etc/kernel/cmdline) is
	// the running command line as refresh copies it (proxmoxRunning)
	proxmoxRunning string
	// StaleMenu, when Menu is older than a defaults file it is made from,
	// says so ("/boot/grub/grub.cfg is older than /etc/default/grub"): the
	// likely reason it lacks a change (its regeneration failed, was cut
	// short or never ran).
	StaleMenu string
}

// KernelCmdlineFile is where kernel-install takes the arguments of kernels
// installed later from (systemd-boot; BLS on RHEL and Fedora).
const KernelCmdlineFile = "/etc/kernel/cmdline"

// findTool returns name when the root has that program, else "".
func findTool(root *host.Root, name string) string {
	if root.FindProgram(name) == "" {
		return ""
	}
	return name
}

// Detect finds the boot setup under root.
func Detect(root *host.Root) (*Boot, error) {
	b := &Boot{}
	if data, err := kargs.ReadFile(root, KernelCmdlineFile); err == nil {
		b.KernelCmdline = &File{KernelCmdlineFile, data}
	}
	entries, _ := root.Glob("/boot/loader/entries/*.conf")
	sort.Strings(entries)
	b.kernelopts = grubenvKernelopts(root)
	for _, e := range entries {
		if data, err := kargs.ReadFile(root, e); err == nil {
			b.Entries = append(b.Entries, File{e, data})
		}
	}
	switch {
	case root.Exists("/run/ostree-booted") || root.Exists("/ostree/repo") && findTool(root, "rpm-ostree") != "":
		b.Kind = KindRpmOstree
		return b, nil
	case root.Exists(KernelstubConfig):
		b.Kind = KindKernelstub
		opts, sec, err := readKernelstubConfig(root)
		if err != nil {
			return nil, err
		}
		b.KernelstubOptions, b.Entry = opts, kernelstubEntry(root, sec)
		return b, nil
	}
	if _, ok, err := proxmoxESPs(root); ok {
		if err != nil {
			return nil, err
		}
		return detectProxmox(root, b)
	}
	if b.KernelCmdline != nil && strings.HasPrefix(loaderInfo(root), "systemd-boot") {
		// booted by systemd-boot, with kernel-install's file: a GRUB
		// defaults file left from before (or installed beside it) is not
		// what boots
		return detectSystemdBoot(root, b), nil
	}
	files, err := ReadFiles(root)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		if b.KernelCmdline != nil || root.Exists("/boot/loader/loader.conf") || root.Exists("/efi/loader/loader.conf") || root.Exists("/boot/efi/loader/loader.conf") {
			return detectSystemdBoot(root, b), nil
		}
		return nil, fmt.Errorf("no bootloader configuration found (looked for /etc/default/grub, /etc/kernel/cmdline, systemd-boot's loader.conf, /etc/kernelstub/configuration, rpm-ostree): %w", ErrUnsupported)
	}
	b.Files = files
	st, _ := sourceFiles(files)
	bls := len(b.Entries) > 0
	if st != nil {
		if v := st.vars["GRUB_ENABLE_BLSCFG"]; v != nil && chrString(v.val) == "true" {
			bls = true
		}
	}
	switch {
	case bls:
		b.Kind = KindBLS
	case findTool(root, "update-grub") != "":
		b.Kind, b.Regenerate = KindGRUB, []string{"update-grub"}
	case findTool(root, "grub-mkconfig") != "":
		b.Kind, b.Regenerate = KindGRUB, []string{"grub-mkconfig", "-o", "/boot/grub/grub.cfg"}
	case findTool(root, "grub2-mkconfig") != "":
		b.Kind, b.Regenerate = KindGRUB2, []string{"grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"}
	case root.Exists("/boot/grub2"):
		b.Kind = KindGRUB2
	default:
		b.Kind = KindGRUB
	}
	if b.Kind != KindBLS {
		b.staleMenu(root)
	}
	return b, nil
}

// staleMenu reads the generated GRUB menu, and notes one older than a
// defaults file (see Menu and StaleMenu).
func (b *Boot) staleMenu(root *host.Root) {
	menu, newer, stale := StaleMenu(root)
	if menu == "" {
		return
	}
	if data, err := root.ReadFile(menu); err == nil {
		b.Menu = &File{menu, data}
		if stale {
			b.StaleMenu = menu + " is older than " + newer
		}
	}
}

// menuSays describes the boot menu's state for a note: "M is older than F
// and its first entry lacks the change", or "M's first entry lacks the
// change".
func (b *Boot) menuSays() string {
	if b.StaleMenu != "" {
		return b.StaleMenu + " and its first entry lacks the change"
	}
	return b.Menu.Path + "'s first entry lacks the change"
}

// MenuLacks reports whether the generated GRUB menu under root
// (/boot/grub/grub.cfg, else /boot/grub2/grub.cfg) would not give the next
// boot what req asks for: its first kernel line (the default entry's, as a
// rule) lacks an argument to ensure, or still has one to remove. menu is
// its path ("" when there is none). A menu without kernel lines (a BLS
// setup's) tells nothing, and lacks nothing.
func MenuLacks(root *host.Root, req Request) (menu string, lacks bool) {
	menu, _, _ = StaleMenu(root)
	if menu == "" {
		return "", false
	}
	data, err := root.ReadFile(menu)
	if err != nil {
		return menu, false
	}
	return menu, menuLacks(data, req)
}

// menuLacks reports whether the first kernel line of a generated GRUB menu
// (the default entry's, as a rule) lacks what req asks for: an argument to
// ensure, or still has one to remove. A menu without kernel lines tells
// nothing, and lacks nothing.
func menuLacks(menu []byte, req Request) bool {
	for _, line := range strings.Split(string(menu), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "linux" && f[0] != "linuxefi" && f[0] != "linux16" {
			continue
		}
		add, del := needs(wordsArgs(strings.Join(f[2:], " ")), f[2:], req)
		return len(add) > 0 || len(del) > 0
	}
	return false
}

func wordsArgs(s string) []kargs.Param {
	var out []kargs.Param
	for _, w := range Words(s) {
		out = append(out, kargs.ParseOne(unquoteWord(w)))
	}
	return out
}

// entryOptions is a BLS entry's options as GRUB's blscfg passes them:
// $kernelopts (RHEL 8's entries, "options $kernelopts") is the kernelopts
// variable of /boot/grub2/grubenv, which grub2-mkconfig sets from
// GRUB_CMDLINE_LINUX and grubby edits (as check reads it, grub.Configured).
func (b *Boot) entryOptions(e File) string {
	o := blsOptions(e.Data)
	if strings.Contains(o, "$kernelopts") {
		o = strings.TrimSpace(strings.ReplaceAll(o, "$kernelopts", b.kernelopts))
	}
	return o
}

func blsOptions(data []byte) string {
	var opts []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "options" {
			opts = append(opts, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "options")))
		}
	}
	return strings.Join(opts, " ")
}

// Plan is what an ensure or remove will do: file edits, then commands.
type Plan struct {
	Kind      string
	Changes   []change.File
	Commands  [][]string
	Satisfied []kargs.Param // ensured arguments already configured everywhere
	Added     []string
	Removed   []string
	Var       string // GRUB variable appended to
	// EntriesAdded and EntriesRemoved (BLS): what grubby adds to and
	// removes from the boot entries, the next boot's command line (Added
	// and Removed also hold the files' edits).
	EntriesAdded, EntriesRemoved []string
	// MenuStale (GRUB kinds): the files are right and the generated boot
	// menu is not, and why (Boot.menuSays); the plan regenerates it.
	MenuStale string
	Notes     []string // what the plan does not do, and why
	// Intents, when set, gives the journal entries Apply records before it
	// runs a command (what a bootloader's own tool changes, for rollback).
	Intents func(argv []string) []journal.Entry
}

// Changed reports whether the plan changes anything.
func (p *Plan) Changed() bool { return len(p.Changes) > 0 || len(p.Commands) > 0 }

// PlanEdit plans req for this boot setup. regenerate false leaves out the
// commands that rewrite the boot menu (and says so in Notes).
func (b *Boot) PlanEdit(req Request, regenerate bool) (*Plan, error) {
	p := &Plan{Kind: b.Kind}
	switch b.Kind {
	case KindGRUB, KindGRUB2, KindBLS:
		ed, err := EditFiles(b.Files, req)
		if err != nil {
			return nil, err
		}
		p.Changes, p.Satisfied, p.Added, p.Removed, p.Var = ed.Changes, ed.Satisfied, ed.Added, ed.Removed, ed.Var
		if b.Kind != KindBLS {
			if len(p.Changes) == 0 && b.Menu != nil && menuLacks(b.Menu.Data, req) {
				// The files are right but the menu is not: its
				// regeneration failed, was cut short or never ran.
				p.MenuStale = b.menuSays()
				switch {
				case b.Regenerate != nil && regenerate:
					p.Notes = append(p.Notes, p.MenuStale+": the boot menu is regenerated")
					p.Commands = append(p.Commands, b.Regenerate)
				case b.Regenerate != nil:
					p.Notes = append(p.Notes, p.MenuStale+": regenerate the boot menu ("+host.ShellQuote(b.Regenerate)+") before rebooting, or the next boot goes without it")
				default:
					p.Notes = append(p.Notes, p.MenuStale+": regenerate the boot menu yourself (no update-grub, grub-mkconfig or grub2-mkconfig under the root) before rebooting, or the next boot goes without it")
				}
				break
			}
			if len(p.Changes) > 0 {
				if b.Regenerate == nil && !regenerate {
					p.Notes = append(p.Notes, "--no-regenerate: regenerate the boot menu yourself (no update-grub, grub-mkconfig or grub2-mkconfig found under the root)")
				} else if b.Regenerate == nil {
					return nil, ErrNoRegenerate
				} else {
					p.Commands = append(p.Commands, b.Regenerate)
				}
			}
			break
		}
		// BLS: the defaults file is for kernels installed later (with
		// /etc/kernel/cmdline); grubby updates the installed ones.
		if b.KernelCmdline != nil {
			ch, added, removed, err := editPlainCmdline(*b.KernelCmdline, req)
			if err != nil {
				return nil, err
			}
			if ch != nil {
				p.Changes = append(p.Changes, *ch)
				p.Added, p.Removed = appendNew(p.Added, added...), appendNew(p.Removed, removed...)
			}
		}
		add, del := b.entriesNeed(req)
		if len(del) > 0 {
			p.Commands = append(p.Commands, []string{"grubby", "--update-kernel=ALL", "--remove-args=" + strings.Join(del, " ")})
		}
		if len(add) > 0 {
			p.Commands = append(p.Commands, []string{"grubby", "--update-kernel=ALL", "--args=" + strings.Join(add, " ")})
		}
		p.Removed = appendNew(p.Removed, del...)
		p.Added = appendNew(p.Added, add...)
		p.EntriesAdded, p.EntriesRemoved = add, del
	case KindSystemdBoot:
		if b.KernelCmdline == nil {
			return nil, fmt.Errorf("systemd-boot without %s: %w yet (create it with the running kernel's arguments first)", KernelCmdlineFile, ErrUnsupported)
		}
		f := *b.KernelCmdline
		ch, added, removed, err := editPlainCmdline(f, req)
		if err != nil {
			return nil, err
		}
		p.Added, p.Removed = added, removed
		if ch == nil && b.entryLacks(req) {
			// the file is right and the running kernel's entry is not:
			// kernel-install did not run (or failed) since it changed
			p.MenuStale = b.Entry.Path + " (the running kernel's entry) lacks the change that " + KernelCmdlineFile + " has"
			p.Notes = append(p.Notes, p.MenuStale+": its entry is made again")
		}
		if ch != nil || p.MenuStale != "" {
			if ch != nil {
				p.Changes = append(p.Changes, *ch)
			}
			if len(b.Kernels) == 0 {
				p.Notes = append(p.Notes, "no kernel image found under /lib/modules/*/vmlinuz: run kernel-install add for each installed kernel yourself")
			}
			p.Commands = append(p.Commands, b.kernelInstall()...)
		}
	case KindProxmox:
		if err := b.planProxmox(p, req); err != nil {
			return nil, err
		}
	case KindKernelstub:
		add, del := needs(wordsArgs(strings.Join(b.KernelstubOptions, " ")), b.KernelstubOptions, req)
		for _, d := range del {
			p.Commands = append(p.Commands, []string{"kernelstub", "--delete-options", d})
		}
		if len(add) > 0 {
			p.Commands = append(p.Commands, []string{"kernelstub", "--add-options", strings.Join(add, " ")})
		}
		if len(p.Commands) == 0 && b.entryLacks(req) {
			// the configuration is right and the entry is not: kernelstub
			// did not run (or failed) since it changed
			p.MenuStale = b.Entry.Path + " (kernelstub's entry) lacks the change that " + KernelstubConfig + " has"
			p.Notes = append(p.Notes, p.MenuStale+": kernelstub writes it again")
			p.Commands = append(p.Commands, []string{"kernelstub"})
		}
		p.Added, p.Removed = add, del
	case KindRpmOstree:
		if len(b.Entries) == 0 {
			return nil, fmt.Errorf("rpm-ostree: no BLS entry under /boot/loader/entries to read the current arguments from: %w", ErrUnsupported)
		}
		add, del := b.entriesNeed(req)
		if len(add)+len(del) > 0 {
			argv := []string{"rpm-ostree", "kargs"}
			for _, d := range del {
				argv = append(argv, "--delete-if-present="+d)
			}
			for _, a := range add {
				argv = append(argv, "--append-if-missing="+a)
			}
			p.Commands = append(p.Commands, argv)
		}
		p.Added, p.Removed = add, del
	default:
		return nil, fmt.Errorf("%s: %w", b.Kind, ErrUnsupported)
	}
	if !regenerate && len(p.Commands) > 0 {
		if b.Kind == KindKernelstub || b.Kind == KindRpmOstree {
			return nil, fmt.Errorf("%s: every change goes through its command; --no-regenerate would do nothing", b.Kind)
		}
		for _, c := range p.Commands {
			p.Notes = append(p.Notes, "--no-regenerate: not running "+strings.Join(c, " ")+"; the change takes effect only once it runs")
		}
		p.Commands = nil
	}
	return p, nil
}

func appendNew(ss []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(ss, a) {
			ss = append(ss, a)
		}
	}
	return ss
}

// needs returns what to add and which words (as written) to delete from one
// argument list to satisfy req, with Edit's rules.
func needs(args []kargs.Param, words []string, req Request) (add, del []string) {
	drop := map[string]bool{}
	gone := req.removed(args)
	left := kept(args, gone)
	for _, w := range req.Ensure {
		if kargs.Satisfied(left, w) {
			continue
		}
		drop[kargs.Norm(w.Key)] = true
		if kargs.Norm(w.Key) == "iommu" && w.Value == "pt" {
			drop["iommu.passthrough"] = true
		}
		add = append(add, w.String())
	}
	for i, a := range args {
		if (gone[i] || drop[kargs.Norm(a.Key)]) && i < len(words) {
			del = appendNew(del, unquoteWord(words[i]))
		}
	}
	return add, del
}

// entriesNeed merges needs over every BLS entry.
func (b *Boot) entriesNeed(req Request) (add, del []string) {
	for _, e := range b.Entries {
		opts := b.entryOptions(e)
		a, d := needs(wordsArgs(opts), Words(opts), req)
		add, del = appendNew(add, a...), appendNew(del, d...)
	}
	return add, del
}

// LaterLack (BLS) returns the files that kernels installed later take their
// arguments from, where they do not give what req asks for, whatever the
// boot entries (the next boot) have: /etc/kernel/cmdline, which
// kernel-install's 20-grub.install copies into a new kernel's entry, and
// /etc/default/grub (with grub.d), whose GRUB_CMDLINE_LINUX and
// GRUB_CMDLINE_LINUX_DEFAULT grub2-mkconfig writes into /etc/kernel/cmdline
// and the entries' options (RHEL 8: kernelopts in grubenv; later:
// update_bls_cmdline), and which 20-grub.install syncs that way first when it
// is newer than /etc/kernel/cmdline (grubby --update-kernel=ALL keeps
// GRUB_CMDLINE_LINUX in step with the entries for the same reason). It
// returns nil for other kinds, and skips defaults files it cannot evaluate
// (check and PlanEdit report those).
func (b *Boot) LaterLack(req Request) []string {
	if b.Kind != KindBLS {
		return nil
	}
	var out []string
	if b.KernelCmdline != nil {
		s := string(b.KernelCmdline.Data)
		if add, del := needs(wordsArgs(s), Words(s), req); len(add)+len(del) > 0 {
			out = append(out, KernelCmdlineFile)
		}
	}
	if len(b.Files) > 0 {
		if c, err := Evaluate(b.Files); err == nil {
			if add, del := needs(c.Args(), append(Words(c.Linux), Words(c.Default)...), req); len(add)+len(del) > 0 {
				out = append(out, DefaultsFile)
			}
		}
	}
	return out
}

// LaterLackSays says what LaterLack's files mean: "F lacks it", naming
// what each is for.
func LaterLackSays(files []string) string {
	var s []string
	for _, f := range files {
		switch f {
		case KernelCmdlineFile:
			s = append(s, f+" (what kernel-install gives kernels installed later)")
		case DefaultsFile:
			s = append(s, f+" (GRUB_CMDLINE_LINUX, from which grub2-mkconfig rewrites /etc/kernel/cmdline and the boot entries' options)")
		default:
			s = append(s, f)
		}
	}
	verb := " lacks it"
	if len(s) > 1 {
		verb = " lack it"
	}
	return strings.Join(s, " and ") + verb
}

// editPlainCmdline edits a file that holds kernel arguments as plain text
// (/etc/kernel/cmdline): words removed with the blanks before them,
// arguments appended to the last line; every other byte kept.
func editPlainCmdline(f File, req Request) (*change.File, []string, []string, error) {
	s := string(f.Data)
	ws := splitWords(s)
	var words []string
	for _, w := range ws {
		words = append(words, s[w[0]:w[1]])
	}
	add, del := needs(wordsArgs(s), words, req)
	if len(add) == 0 && len(del) == 0 {
		return nil, nil, nil, nil
	}
	delSet := map[string]bool{}
	for _, d := range del {
		delSet[d] = true
	}
	var b strings.Builder
	last := 0
	for _, w := range ws {
		if !delSet[unquoteWord(s[w[0]:w[1]])] {
			continue
		}
		st := w[0]
		for st > last && (s[st-1] == ' ' || s[st-1] == '\t') {
			st--
		}
		b.WriteString(s[last:st])
		last = w[1]
	}
	b.WriteString(s[last:])
	out := b.String()
	if len(add) > 0 {
		body := strings.TrimRight(out, "\n")
		tail := out[len(body):]
		sep := " "
		if strings.TrimSpace(body) == "" || strings.HasSuffix(body, " ") {
			sep = ""
		}
		out = body + sep + strings.Join(add, " ") + tail
		if tail == "" && len(f.Data) == 0 {
			out += "\n"
		}
	}
	ch := changeOf(f, []byte(out))
	return &ch, add, del, nil
}

// Apply writes the plan's files (atomically, with backups recorded in the
// journal under command) and then runs its commands through run.
func (p *Plan) Apply(ctx context.Context, root *host.Root, run host.Runner, command string, now time.Time) error {
	for _, c := range p.Changes {
		if _, err := journal.WriteFile(root, c.Path, c.New, c.Perm(), command, now); err != nil {
			return fmt.Errorf("write %s: %w", c.Path, err)
		}
	}
	for _, argv := range p.Commands {
		if p.Intents != nil {
			for _, en := range p.Intents(argv) {
				en.Time = now.UTC()
				if err := journal.Append(root, en); err != nil {
					return err
				}
			}
		}
		if out, err := run.Run(ctx, argv...); err != nil {
			err = fmt.Errorf("%s: %w%s", strings.Join(argv, " "), err, host.OutputTail(out))
			if len(p.Changes) > 0 {
				var files []string
				for _, c := range p.Changes {
					files = append(files, c.Path)
				}
				err = fmt.Errorf("%w\n%s changed (backed up, in the journal) but the boot menu was not regenerated: fix the cause and run the same command again (it regenerates a menu older than its files), or undo with gpuprep rollback", err, strings.Join(files, ", "))
			}
			return err
		}
	}
	return nil
}

// StaleMenu reports a generated GRUB menu (/boot/grub/grub.cfg, else
// /boot/grub2/grub.cfg) older than a defaults file it is made from
// (/etc/default/grub or a grub.d/*.cfg): the next boot would not get the
// change until the menu is regenerated. ok is false when there is no menu or
// every defaults file is older than it.
func StaleMenu(root *host.Root) (menu, newer string, ok bool) {
	for _, cfg := range []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"} {
		fi, err := root.Stat(cfg)
		if err != nil {
			continue
		}
		files, _ := root.Glob("/etc/default/grub.d/*.cfg")
		sort.Strings(files)
		for _, f := range append([]string{DefaultsFile}, files...) {
			if dfi, err := root.Stat(f); err == nil && dfi.ModTime().After(fi.ModTime()) {
				return cfg, f, true
			}
		}
		return cfg, "", false
	}
	return "", "", false
}

// UsualRegenerate is the command that regenerates the GRUB menu on the node
// whose root this is, for a root without the tool (a snapshot, a fixture):
// grub2-mkconfig where the menu is /boot/grub2/grub.cfg (openSUSE, the RHEL
// family), update-grub on Debian and its derivatives (Ubuntu, Proxmox),
// else grub-mkconfig (Arch and others).
func UsualRegenerate(root *host.Root) []string {
	menu, _, _ := StaleMenu(root)
	if strings.HasPrefix(menu, "/boot/grub2/") || menu == "" && root.Exists("/boot/grub2") {
		return []string{"grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"}
	}
	if root.Exists("/etc/debian_version") {
		return []string{"update-grub"}
	}
	if b, err := root.ReadString("/etc/os-release"); err == nil {
		for _, l := range strings.Split(b, "\n") {
			k, v, _ := strings.Cut(l, "=")
			if k != "ID" && k != "ID_LIKE" {
				continue
			}
			for _, id := range strings.Fields(strings.Trim(v, `"'`)) {
				if id == "debian" || id == "ubuntu" {
					return []string{"update-grub"}
				}
			}
		}
	}
	return []string{"grub-mkconfig", "-o", "/boot/grub/grub.cfg"}
}

// RegenerateCommand is the command that rewrites menu (a GRUB menu path):
// the detected one, else the usual tool for that path.
func RegenerateCommand(root *host.Root, menu string) string {
	if b, err := Detect(root); err == nil && b.Regenerate != nil {
		return host.ShellQuote(b.Regenerate)
	}
	if strings.HasPrefix(menu, "/boot/grub2/") {
		return "grub2-mkconfig -o " + menu
	}
	return "update-grub or grub-mkconfig -o " + menu
}

// grubenvKernelopts is the kernelopts variable of /boot/grub2/grubenv, ""
// when there is none.
func grubenvKernelopts(root *host.Root) string {
	env, _ := kargs.ReadFile(root, "/boot/grub2/grubenv")
	ko := ""
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(l, "kernelopts="); ok {
			ko = v
		}
	}
	return ko
}
