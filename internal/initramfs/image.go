package initramfs

import (
	"errors"
	"slices"
	"strings"
)

// Limits bound what reading one image may cost: a host's image is hostile
// input (a decompression bomb, a million entries).
type Limits struct {
	MaxBytes   int64 // data decompressed, in all segments (an uncompressed one is bounded by the file)
	MaxEntries int   // entries, in all archives
	MaxFile    int64 // one kept file's data
	MaxKept    int64 // kept files' data in all
}

// DefaultLimits fit every distribution's image with room to spare: a
// Ubuntu image with firmware unpacks to a few hundred MiB and some
// thousand entries.
var DefaultLimits = Limits{MaxBytes: 512 << 20, MaxEntries: 200000, MaxFile: 16 << 20, MaxKept: 64 << 20}

// ErrTooLarge is returned when an image exceeds its Limits: reading stopped
// there, and what the image holds past it is unknown.
var ErrTooLarge = errors.New("initramfs image exceeds gpuprep's reading limits")

// Kind is an entry's file type.
type Kind int

// The kinds of entries.
const (
	Regular Kind = iota
	Dir
	Symlink
	Other // a device node, FIFO or socket: never a source of content
)

type entry struct {
	kind   Kind
	data   []byte // a kept regular file's content
	kept   bool   // data is the file's content
	target string // a symlink's
	tooBig bool   // a wanted file over the limits: not kept
}

// Segment is one part of the image: an uncompressed cpio archive (the
// early microcode one) or a compressed stream of archives.
type Segment struct {
	Offset      int64  // in the image file
	Compression string // "none", "gzip", "xz", "zstd", "lz4"
}

// Image is what one initramfs image holds, as far as gpuprep reads it: its
// segments, every entry's name and type, and the data of the files that
// tell what early boot loads (see keep).
type Image struct {
	Segments []Segment
	Archives int // cpio archives read, in all segments
	Entries  int
	Bytes    int64 // data decompressed

	limits  Limits
	kept    int64
	entries map[string]entry
	order   []string // names in archive order, the first time each appears
}

func newImage(l Limits) *Image {
	return &Image{limits: l, entries: map[string]entry{}}
}

// put records an entry; a later one of the same name replaces it, as the
// kernel replaces the file (init/initramfs.c, clean_path).
func (img *Image) put(name string, e entry) {
	if _, ok := img.entries[name]; !ok {
		img.order = append(img.order, name)
	}
	img.entries[name] = e
}

// Names are the image's entries in the order they first appear.
func (img *Image) Names() []string { return img.order }

// File is a kept regular file's content; ok is false when name is not a
// regular file in the image or its content was not kept (a symlink, a
// device node, a file over the limits). Reads do not follow symlinks.
func (img *Image) File(name string) (data []byte, ok bool) {
	e, found := img.entries[cleanName(name)]
	if !found || e.kind != Regular || !e.kept {
		return nil, false
	}
	return e.data, true
}

// Kind is the type of the entry name, and whether it exists.
func (img *Image) Kind(name string) (Kind, bool) {
	e, ok := img.entries[cleanName(name)]
	return e.kind, ok
}

// keep says whether a regular file's data is kept: the files that say
// what early boot loads and with which options. The rest (modules,
// binaries, firmware) is only named.
func (img *Image) keep(name string) bool {
	switch name {
	case "conf/modules", "config":
		return true
	}
	for _, dir := range []string{"etc/modprobe.d/", "usr/lib/modprobe.d/", "lib/modprobe.d/", "run/modprobe.d/",
		"etc/modules-load.d/", "usr/lib/modules-load.d/", "lib/modules-load.d/", "etc/cmdline.d/"} {
		if rest, ok := strings.CutPrefix(name, dir); ok && !strings.Contains(rest, "/") {
			return true
		}
	}
	if udevRulesFile(name) {
		return true
	}
	if _, _, ok := dracutHook(name); ok {
		return true
	}
	if kver, file, ok := moduleDirFile(name); ok && kver != "" {
		return file == "modules.alias" || file == "modules.builtin" || file == "modules.softdep"
	}
	return false
}

// moduleDirFile splits lib/modules/KVER/REST (or usr/lib/modules/…).
func moduleDirFile(name string) (kver, rest string, ok bool) {
	for _, p := range []string{"lib/modules/", "usr/lib/modules/"} {
		if r, found := strings.CutPrefix(name, p); found {
			kver, rest, _ = strings.Cut(r, "/")
			return kver, rest, true
		}
	}
	return "", "", false
}

// earlyHooks are dracut's hook directories that run before udev is
// triggered, in the order dracut's init runs them (modules.d/99base/init.sh:
// cmdline, pre-udev, pre-trigger; each hook's scripts by name).
var earlyHooks = []string{"cmdline", "pre-udev", "pre-trigger"}

// dracutHook splits usr/lib/dracut/hooks/HOOK/SCRIPT (lib/dracut/hooks in
// dracut before 059) for an early hook.
func dracutHook(name string) (hook, script string, ok bool) {
	for _, p := range []string{"usr/lib/dracut/hooks/", "lib/dracut/hooks/"} {
		if r, found := strings.CutPrefix(name, p); found {
			hook, script, _ = strings.Cut(r, "/")
			if script != "" && !strings.Contains(script, "/") && slices.Contains(earlyHooks, hook) {
				return hook, script, true
			}
		}
	}
	return "", "", false
}
