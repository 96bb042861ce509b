package grub

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
)

// The default BLS (type #1) entry, as the boot loader that reads the
// entries picks it.
//
// systemd-boot (loader.conf(5), systemd-boot(7); src/boot/efi/boot.c and
// its mirror src/shared/bootspec.c, boot_entry_compare): the entries are
// sorted — those with a sort-key first, by sort-key, machine-id, then
// version newest first; then by id (the file name with ".conf") newest
// first — and the default is the first entry whose id matches a glob: the
// one-shot EFI variable LoaderEntryOneShot (systemctl reboot
// --boot-loader-entry=), else LoaderEntryDefault (bootctl set-default, or a
// choice made in the menu), else loader.conf's `default`; with none set,
// or none matching, the first entry of the sorted list.
//
// GRUB's blscfg (Fedora, RHEL 8+): the entries sorted newest version first,
// GRUB_DEFAULT=saved (their default) making grubenv's saved_entry (an id
// without ".conf", as grubby --set-default writes it) the default.

// loaderEFIVendor is the systemd-boot vendor GUID of its EFI variables
// (efivarfs file names are NAME-GUID).
const loaderEFIVendor = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

// blsEntry is one type #1 entry, read.
type blsEntry struct {
	id, file                    string
	sortKey, machineID, version string
	linux, initrd               string
	// triesLeft and triesDone are the boot counter of a file named
	// NAME+LEFT[-DONE].conf (-1 when it has none): systemd-boot's
	// boot_entry_parse_tries; the id is then NAME.conf.
	triesLeft, triesDone int
}

// parseTries splits a type #1 entry's file name as systemd-boot's
// boot_entry_parse_tries does (src/boot/boot.c; the Boot Loader
// Specification's "Boot counting"): the counter follows the last '+' and
// is LEFT or LEFT-DONE right before ".conf"; the id drops it and is
// lower-cased (strtolower16), as the default globs are.
func parseTries(name string) (id string, left, done int) {
	id, left, done = strings.ToLower(name), -1, -1
	i := strings.LastIndexByte(name, '+')
	if i < 0 || !strings.HasSuffix(strings.ToLower(name), ".conf") {
		return id, left, done
	}
	c := name[i+1 : len(name)-len(".conf")]
	l, d, hasDone := strings.Cut(c, "-")
	nl, err1 := strconv.Atoi(l)
	nd := 0
	var err2 error
	if hasDone {
		nd, err2 = strconv.Atoi(d)
	}
	if err1 != nil || err2 != nil || l == "" || l[0] == '+' || l[0] == '-' || hasDone && (d == "" || d[0] == '+' || d[0] == '-') || nl > math.MaxInt32 || nd > math.MaxInt32 {
		return id, left, done
	}
	return strings.ToLower(name[:i] + ".conf"), nl, nd
}

func readBLSEntries(root *host.Root) []blsEntry { return readBLSEntriesIn(root, entryDirs) }

// readBLSEntriesIn reads the type #1 entries of dirs, sorted as
// systemd-boot sorts them.
func readBLSEntriesIn(root *host.Root, dirs []string) []blsEntry {
	var out []blsEntry
	seen := map[string]bool{}
	for _, dir := range dirs {
		names, _ := root.Glob(dir + "/*.conf")
		for _, n := range names {
			id, left, done := parseTries(path.Base(n))
			if b := path.Base(n); strings.HasPrefix(b, ".") || strings.HasPrefix(strings.ToLower(b), "auto-") || seen[id] {
				continue // valid_type1_filename
			}
			data, err := kargs.ReadFile(root, n)
			if err != nil {
				continue
			}
			seen[id] = true
			e := blsEntry{id: id, file: n, triesLeft: left, triesDone: done}
			for _, l := range strings.Split(string(data), "\n") {
				f := strings.Fields(l)
				if len(f) < 2 {
					continue
				}
				switch f[0] {
				case "sort-key":
					e.sortKey = f[1]
				case "machine-id":
					e.machineID = f[1]
				case "version":
					e.version = f[1]
				case "linux":
					e.linux = f[1]
				case "initrd":
					if i := lastImage(f[1:]); i != "" {
						e.initrd = i
					}
				}
			}
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return blsLess(out[i], out[j]) })
	return out
}

// blsLess is boot_entry_compare's order: entries with no tries left
// last, then sort keys, ids, and between equal ids more tries left first,
// then fewer done.
func blsLess(a, b blsEntry) bool {
	if (a.triesLeft == 0) != (b.triesLeft == 0) {
		return b.triesLeft == 0
	}
	if (a.sortKey == "") != (b.sortKey == "") {
		return a.sortKey != ""
	}
	if a.sortKey != "" {
		if a.sortKey != b.sortKey {
			return a.sortKey < b.sortKey
		}
		if a.machineID != b.machineID {
			return a.machineID < b.machineID
		}
		if c := verscmp(a.version, b.version); c != 0 {
			return c > 0
		}
	}
	if c := verscmp(a.id, b.id); c != 0 || a.triesLeft < 0 || b.triesLeft < 0 {
		return c > 0
	}
	if a.triesLeft != b.triesLeft {
		return a.triesLeft > b.triesLeft
	}
	return a.triesDone < b.triesDone
}

// verscmp compares versions as strverscmp_improved does for the usual
// shapes: runs of digits by value, other characters by byte, '~' before
// anything (systemd src/fundamental/string-util-fundamental.c).
func verscmp(a, b string) int {
	for a != "" || b != "" {
		switch {
		case a != "" && b != "" && isDigit(a[0]) && isDigit(b[0]):
			da, db := digitRun(a), digitRun(b)
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return sign(len(na) - len(nb))
			}
			if na != nb {
				return strings.Compare(na, nb)
			}
			a, b = a[da:], b[db:]
		case a == "":
			if b[0] == '~' {
				return 1
			}
			return -1
		case b == "":
			if a[0] == '~' {
				return -1
			}
			return 1
		case a[0] != b[0]:
			if a[0] == '~' {
				return -1
			}
			if b[0] == '~' {
				return 1
			}
			return sign(int(a[0]) - int(b[0]))
		default:
			a, b = a[1:], b[1:]
		}
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// pickBLS is the first entry whose id matches glob (path.Match, as
// efi_fnmatch), nil when none does.
func pickBLS(es []blsEntry, glob string) *blsEntry {
	for i := range es {
		if ok, err := path.Match(strings.ToLower(glob), es[i].id); err == nil && ok {
			return &es[i]
		}
	}
	return nil
}

// efiString reads an efivarfs variable holding a UTF-16LE string (4 bytes
// of attributes first), "" when absent or unreadable.
func efiString(root *host.Root, name string) string {
	b, err := kargs.ReadFile(root, "/sys/firmware/efi/efivars/"+name+"-"+loaderEFIVendor)
	if err != nil || len(b) < 6 {
		return ""
	}
	b = b[4:]
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := uint16(b[i]) | uint16(b[i+1])<<8
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// loaderDefault is loader.conf's `default` (the last one), and the file.
func loaderDefault(root *host.Root) (string, string) {
	for _, dir := range entryDirs {
		if def, conf, ok := loaderDefaultOf(root, path.Dir(dir)+"/loader.conf"); ok {
			return def, conf
		}
	}
	return "", ""
}

// loaderDefaultOf is conf's last `default` ("" when it has none); ok false
// when conf cannot be read.
func loaderDefaultOf(root *host.Root, conf string) (def, file string, ok bool) {
	data, err := kargs.ReadFile(root, conf)
	if err != nil {
		return "", "", false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "default" {
			def = f[1]
		}
	}
	return def, conf, true
}

// sdBootKernel is systemd-boot's default entry.
func sdBootKernel(root *host.Root) NextKernel {
	es := readBLSEntries(root)
	if len(es) == 0 {
		return NextKernel{Missing: "no boot loader entries (" + strings.Join(entryDirs, ", ") + ") to tell which kernel systemd-boot boots next"}
	}
	def, conf := loaderDefault(root)
	return sdBootSelect(root, es, def, conf, true)
}

// sdBootSelect is systemd-boot's config_select_default_entry over es
// (sorted), with loader.conf's default def read from conf: the one-shot
// entry, then LoaderEntryDefault (its "@saved": LoaderEntryLastBooted),
// then def (its "@saved": LoaderEntryLastBooted too), each only when it
// matches an entry; else the first entry. complete says es are all the
// entries the boot loader sees; where they are not (the ESP not read, its
// entries inferred), an EFI variable or default matching none of them is
// unknown, not skipped.
func sdBootSelect(root *host.Root, es []blsEntry, def, conf string, complete bool) NextKernel {
	pk := &sdPick{es: es, complete: complete}
	pk.try(efiString(root, "LoaderEntryOneShot"), "EFI variable LoaderEntryOneShot")
	saved := efiString(root, "LoaderEntryLastBooted")
	efiDef := efiString(root, "LoaderEntryDefault")
	savedEFI := strings.EqualFold(efiDef, "@saved")
	if savedEFI {
		pk.try(saved, "EFI variable LoaderEntryLastBooted (LoaderEntryDefault @saved)")
	} else {
		pk.try(efiDef, "EFI variable LoaderEntryDefault")
	}
	switch {
	case strings.EqualFold(def, "@saved") && !savedEFI:
		if pk.e == nil && saved == "" {
			return NextKernel{Missing: conf + ": default @saved boots the entry booted last (EFI variable LoaderEntryLastBooted), which is not readable"}
		}
		pk.try(saved, conf+" default @saved: EFI variable LoaderEntryLastBooted")
	case !strings.EqualFold(def, "@saved"):
		pk.try(def, conf+" default")
	}
	if pk.e == nil && !complete && pk.unmatched != "" {
		return NextKernel{Missing: pk.unmatched + " names no entry gpuprep knows the ESP to hold, and the ESP's entries were not read: which kernel systemd-boot boots next is unknown"}
	}
	if pk.e == nil {
		pk.e, pk.why = &es[0], "the first of the sorted entries"
	}
	return blsNext(root, pk.e, pk.why)
}

// sdPick is sdBootSelect's choice so far: the entry (nil: none yet), why,
// and the first glob that matched none of es.
type sdPick struct {
	es        []blsEntry
	complete  bool
	e         *blsEntry
	why       string
	unmatched string
}

// try picks the first entry glob matches (what names the glob), unless
// one is picked already; where es are not complete, nothing after a glob
// that matched none counts (it may match an entry not read).
func (pk *sdPick) try(glob, what string) {
	if pk.e != nil || glob == "" || !pk.complete && pk.unmatched != "" {
		return
	}
	if pk.e = pickBLS(pk.es, glob); pk.e != nil {
		pk.why = fmt.Sprintf("%s %q", what, glob)
	} else if pk.unmatched == "" {
		pk.unmatched = fmt.Sprintf("%s %q", what, glob)
	}
}

// blsGRUBKernel is the default of GRUB's blscfg.
func blsGRUBKernel(root *host.Root) NextKernel {
	es := readBLSEntries(root)
	if len(es) == 0 {
		return NextKernel{Missing: "no boot loader entries (/boot/loader/entries) to tell which kernel GRUB's blscfg boots next"}
	}
	// blscfg sorts newest version first, whatever the sort keys
	sort.SliceStable(es, func(i, j int) bool { return verscmp(es[i].version+"\x00"+es[i].id, es[j].version+"\x00"+es[j].id) > 0 })
	env := readGrubenv(root, "/boot/grub2/grubenv")
	vars := []string{"next_entry", "saved_entry"}
	if data, err := readMenu(root, "/boot/grub2/grub.cfg"); err == nil {
		// saved_entry counts only where the menu's default is it (GRUB_DEFAULT=saved)
		if _, defs, err := parseMenu(data); err == nil && len(defs) > 0 && defs[len(defs)-1] != "${saved_entry}" {
			vars = vars[:1]
		}
	}
	for _, v := range vars {
		if id := env[v]; id != "" {
			if e := pickBLS(es, id+".conf"); e != nil {
				return blsNext(root, e, fmt.Sprintf("/boot/grub2/grubenv %s=%s", v, id))
			}
		}
	}
	return blsNext(root, &es[0], "the newest entry (no grubenv saved_entry naming one)")
}

func blsNext(root *host.Root, e *blsEntry, why string) NextKernel {
	from := e.file + " (" + why + ")"
	k := e.version
	if err := kernelrelease.Check(k); k != "" && err != nil {
		return NextKernel{Missing: from + ": its version: " + err.Error()}
	}
	if k == "" || !root.Exists("/lib/modules/"+k) && !root.Exists("/usr/lib/modules/"+k) {
		if kk := kernelOfImage(root, e.linux); kk != "" {
			k = kk
		}
	}
	if k == "" {
		return NextKernel{Missing: from + ": neither its version nor its linux line " + e.linux + " names a kernel release"}
	}
	if err := kernelrelease.Check(k); err != nil {
		return NextKernel{Missing: from + ": its linux line " + e.linux + ": " + err.Error()}
	}
	nk := NextKernel{Release: k, Initrd: bootPath(root, e.initrd), From: from, NoInitramfs: e.initrd == ""}
	if nk.NoInitramfs {
		nk.From += ", without an initramfs (the entry has no initrd line)"
	}
	return nk
}
