// Package snapshot copies what gpuprep read from a host into a directory
// laid out like that host's root, so that `gpuprep check --root DIR` on
// another machine gives the verdicts the host gave: a bug report, a fixture
// from a real node, a record of a node's state before a change.
//
// Only the paths a host.Recorder noted are copied, each as it was read:
// a file's content as the read returned it (regular files only: sysfs
// attributes are; a device file or a FIFO becomes an empty file, as in
// gpuprep's fixtures), a directory's entries (as empty stand-ins, unless read
// too), a symlink's target as written, and the parts of files read at
// offsets (MSRs) in host.SparseMagic's text. Every symlink on the way to a
// path is copied as a symlink, so the tree resolves as the host does
// (/sys/bus/pci/devices/ADDR → ../../../devices/…). Nothing else of the host
// is read. Of the processes' open files only those gpuprep looks for (NVIDIA
// and VFIO device nodes) are kept, and of their names only those it looks for
// (Options.KeepComm) or of processes holding such a device.
package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// maxFile bounds a copied file: gpuprep reads nothing larger on purpose.
const maxFile = 16 << 20

// maxLinks bounds the symlinks followed for one path, as the kernel does.
const maxLinks = 40

// Options tune what is kept.
type Options struct {
	// KeepComm reports whether a process name (/proc/PID/comm) is one
	// gpuprep looks for; other processes' names are copied empty, unless
	// the process holds a device node that is kept.
	KeepComm func(comm string) bool
	// Stop, when set, is asked before each path: true ends Take with
	// ErrStopped (an interrupt).
	Stop func() bool
}

// Stats counts what a snapshot holds.
type Stats struct {
	Files, Dirs, Links, Stubs int
	Bytes                     int64
	Unreadable                []string // read by gpuprep but the read failed (copied empty)
	Other                     []string // copied files outside /sys, /proc and /dev: what a reader of the snapshot sees of the host's configuration
	Private                   int      // processes' open files and names left out (see isPrivate)
}

type copier struct {
	src     *host.Root
	rec     *host.Recorder
	opts    Options
	dst     *os.Root // every write goes through it: nothing lands outside the snapshot, whatever links it holds
	st      Stats
	done    map[string]bool // host paths created in dst
	files   map[string]bool // host paths whose content was copied
	private map[string]bool // left out (see isPrivate)
	holders map[string]bool // PIDs whose device links were kept
}

// Take copies into dst (a directory that must not exist, or be empty) every
// path rec noted while gpuprep read src.
func Take(src *host.Root, rec *host.Recorder, dst string, opts Options) (Stats, error) {
	if err := emptyDir(dst); err != nil {
		return Stats{}, err
	}
	out, err := os.OpenRoot(dst)
	if err != nil {
		return Stats{}, err
	}
	defer out.Close()
	c := &copier{src: src, rec: rec, opts: opts, dst: out, done: map[string]bool{}, files: map[string]bool{},
		private: map[string]bool{}, holders: map[string]bool{}}
	err = c.take()
	c.st.Private = len(c.private)
	if err == nil {
		text := markerText
		if src.IsLive() || OfRunningSystem(src) {
			text += runningLine
		}
		err = out.WriteFile(strings.TrimPrefix(Marker, "/"), []byte(text), 0o644)
	}
	return c.st, err
}

// Marker is the file at the top of every snapshot Take makes: a snapshot
// is never a system disk, whose programs gpuprep may run (see IsSnapshot).
const Marker = "/GPUPREP-SNAPSHOT"

const markerText = "A gpuprep snapshot: files as gpuprep read them on a node, to be read, never booted or run.\n"

// runningLine, in the marker, says the snapshot was taken of a running
// system (directly, or through snapshots of one), not of another root.
const runningLine = "Taken from: a running system.\n"

// OfRunningSystem reports whether r is a snapshot Take made of a running
// system: what gpuprep looked for there and did not find was absent on the
// node (Take copies what was read), not merely left out of a capture.
func OfRunningSystem(r *host.Root) bool {
	b, err := r.ReadFile(Marker)
	return err == nil && strings.Contains(string(b), runningLine)
}

// IsSnapshot reports whether the root r is a snapshot Take made.
func IsSnapshot(r *host.Root) bool {
	_, err := r.Lstat(Marker)
	return err == nil
}

func (c *copier) take() error {
	paths, acc := c.rec.Paths()
	// Structure first (links, directories and their entries), then content,
	// which replaces the stand-ins.
	for _, p := range paths {
		if c.stopped() {
			return ErrStopped
		}
		if err := c.structure(p, acc[p]); err != nil {
			return err
		}
	}
	for _, p := range paths {
		if c.stopped() {
			return ErrStopped
		}
		if acc[p]&host.AccessFile == 0 {
			continue
		}
		if err := c.fileContent(p); err != nil {
			return err
		}
	}
	return c.spans()
}

// stopped reports whether the caller asks Take to stop.
func (c *copier) stopped() bool { return c.opts.Stop != nil && c.opts.Stop() }

// structure copies what was read of the host path p (accessed as a): the
// link itself, or the directory with its entries, or a stand-in for the
// file.
func (c *copier) structure(p string, a host.Access) error {
	if a&host.AccessLink != 0 { // the path itself: a symlink, or what is there
		final, fi, err := c.walkTo(p, false)
		if err != nil {
			return err
		}
		if fi != nil && fi.Mode()&fs.ModeSymlink == 0 {
			if err := c.stub(final, fi); err != nil {
				return err
			}
		}
	}
	if a&(host.AccessStat|host.AccessList|host.AccessFile) == 0 {
		return nil
	}
	final, fi, err := c.walkTo(p, true)
	if err != nil || fi == nil {
		return err // absent on the host: absent in the snapshot
	}
	if a&host.AccessList != 0 && fi.IsDir() {
		if err := c.entries(final); err != nil {
			return err
		}
	}
	return c.stub(final, fi)
}

// fileContent copies the content of the regular file at the host path p.
func (c *copier) fileContent(p string) error {
	final, fi, err := c.walkTo(p, true)
	if err != nil {
		return err
	}
	if fi != nil && fi.Mode().IsRegular() {
		return c.content(p, final, fi)
	}
	return nil
}

// spans writes the files read only in part: what was read of each.
func (c *copier) spans() error {
	for p, spans := range c.rec.Spans() {
		final, fi, err := c.walkTo(p, true)
		if err != nil {
			return err
		}
		if fi == nil || fi.IsDir() {
			continue
		}
		if err := c.write(final, host.SparseText(spans), fi); err != nil {
			return err
		}
	}
	return nil
}

func emptyDir(dst string) error {
	ents, err := os.ReadDir(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dst, 0o755)
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%s: not empty (a snapshot goes into a new or empty directory)", dst)
	}
	return nil
}

// walkTo walks the host path p as the kernel does (a symlink's target is
// taken from the directory holding the link, and ".." after it from where
// the link led), copying every directory and symlink on the way. It returns
// the host path it ends at and what is there (nil when nothing is); with
// followLast false a final symlink is copied, not followed.
func (c *copier) walkTo(p string, followLast bool) (string, fs.FileInfo, error) {
	w := &walk{todo: strings.Split(path.Clean("/"+p), "/"), cur: "/"}
	for len(w.todo) > 0 {
		name := w.todo[0]
		w.todo = w.todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			w.cur = path.Dir(w.cur)
			continue
		}
		next := path.Join(w.cur, name)
		fi, err := c.src.Lstat(next)
		if err != nil {
			return next, nil, nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if done, at, lfi, err := c.throughLink(w, next, fi, followLast); done {
				return at, lfi, err
			}
			continue
		}
		if len(w.todo) == 0 {
			return next, fi, nil
		}
		if !fi.IsDir() {
			return next, nil, nil
		}
		if err := c.mkdir(next); err != nil {
			return "", nil, err
		}
		w.cur = next
	}
	fi, err := c.src.Lstat(w.cur)
	if err != nil {
		return w.cur, nil, nil
	}
	return w.cur, fi, c.mkdir(w.cur)
}

// walk is walkTo's state: the names still to walk, the directory it is
// in, and the symlinks followed so far.
type walk struct {
	todo  []string
	cur   string
	links int
}

// throughLink copies the symlink next (fi) met on walk w and goes on
// through its target; done says the walk ends, at what walkTo returns:
// the link itself (the path's last name, not followed), or nothing there
// (its target unreadable or private, or one link too many).
func (c *copier) throughLink(w *walk, next string, fi fs.FileInfo, followLast bool) (done bool, at string, _ fs.FileInfo, _ error) {
	target, err := c.src.Readlink(next)
	if err != nil || c.isPrivate(next, target) {
		return true, next, nil, nil
	}
	if err := c.link(next, target); err != nil {
		return true, "", nil, err
	}
	if len(w.todo) == 0 && !followLast {
		return true, next, fi, nil
	}
	if w.links++; w.links > maxLinks {
		return true, next, nil, nil
	}
	if path.IsAbs(target) {
		w.cur = "/"
	}
	w.todo = append(strings.Split(target, "/"), w.todo...)
	return false, "", nil, nil
}

// procPath splits /proc/PID/REST.
func procPath(p string) (pid, rest string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	if len(parts) != 3 || parts[0] != "proc" || parts[1] == "" || strings.Trim(parts[1], "0123456789") != "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// isPrivate reports whether the symlink p → target is a process's open file
// other than an NVIDIA or VFIO device node (a socket, a pipe, a user's
// file): gpuprep looks there only for holders of /dev/nvidia* and
// /dev/vfio/*, and the rest says what every process on the node has open.
// Such links are left out.
func (c *copier) isPrivate(p, target string) bool {
	pid, rest, ok := procPath(p)
	if !ok || !strings.HasPrefix(rest, "fd/") || strings.Contains(rest[3:], "/") {
		return false
	}
	if strings.HasPrefix(target, "/dev/nvidia") || strings.HasPrefix(target, "/dev/vfio/") {
		c.holders[pid] = true
		return false
	}
	c.private[p] = true
	return true
}

// rel is the host path p inside the snapshot.
func rel(p string) string {
	if r := strings.TrimPrefix(path.Clean("/"+p), "/"); r != "" {
		return r
	}
	return "."
}

func (c *copier) mkdir(p string) error {
	if c.done[p] {
		return nil
	}
	c.done[p] = true
	if p == "/" {
		return nil
	}
	c.st.Dirs++
	return c.dst.MkdirAll(rel(p), 0o755)
}

func (c *copier) link(p, target string) error {
	if c.done[p] {
		return nil
	}
	if err := c.mkdir(path.Dir(p)); err != nil {
		return err
	}
	c.done[p] = true
	c.st.Links++
	return c.dst.Symlink(target, rel(p))
}

// stub puts p in place as what it is: a directory, or an empty file with
// p's permission bits and time (a device file or a FIFO too, as fixtures
// have them).
func (c *copier) stub(p string, fi fs.FileInfo) error {
	if fi.IsDir() {
		return c.mkdir(p)
	}
	if c.done[p] {
		return nil
	}
	c.done[p] = true
	c.st.Stubs++
	return c.write(p, nil, fi)
}

// entries puts every entry of the host directory p in place: symlinks as
// they are, the rest as stand-ins.
func (c *copier) entries(p string) error {
	if err := c.mkdir(p); err != nil {
		return err
	}
	ents, err := c.src.ReadDir(p)
	if err != nil {
		return nil // listed by gpuprep, unlistable now: an empty directory
	}
	for _, e := range ents {
		q := path.Join(p, e.Name())
		if c.done[q] {
			continue
		}
		fi, err := c.src.Lstat(q)
		if err != nil {
			continue // gone since it was listed
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := c.src.Readlink(q)
			if err != nil || c.isPrivate(q, t) {
				continue
			}
			if err := c.link(q, t); err != nil {
				return err
			}
		default:
			if err := c.stub(q, fi); err != nil {
				return err
			}
		}
	}
	return nil
}

// content copies the regular file p (asked for as asked) with what
// gpuprep's read returned, or, for a file only opened (pci.ids), as it is
// now.
func (c *copier) content(asked, p string, fi fs.FileInfo) error {
	if c.files[p] {
		return nil
	}
	c.files[p] = true
	seen, ok := c.rec.Seen(asked)
	switch {
	case ok:
	case fi.Size() > maxFile:
		seen.Err = fmt.Errorf("larger than %d MiB", maxFile>>20)
	default:
		seen.Data, seen.Err = c.src.ReadFile(p)
	}
	b := seen.Data
	if seen.Err != nil || len(b) > maxFile {
		c.st.Unreadable = append(c.st.Unreadable, p)
		b = nil
	}
	if pid, rest, ok := procPath(p); ok && rest == "comm" && !c.holders[pid] && c.opts.KeepComm != nil && !c.opts.KeepComm(strings.TrimSpace(string(b))) {
		c.private[p] = true
		b = nil
	}
	c.st.Files++
	c.st.Bytes += int64(len(b))
	top := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]
	if top != "sys" && top != "proc" && top != "dev" {
		c.st.Other = append(c.st.Other, p)
	}
	return c.write(p, b, fi)
}

// write writes the file p with b, p's permission bits (and the owner's
// write) and its time: gpuprep compares times (a GRUB file changed after
// the last boot).
func (c *copier) write(p string, b []byte, fi fs.FileInfo) error {
	if err := c.mkdir(path.Dir(p)); err != nil {
		return err
	}
	mode := fi.Mode().Perm() | 0o200
	if err := c.dst.WriteFile(rel(p), b, mode); err != nil {
		return err
	}
	if err := c.dst.Chmod(rel(p), mode); err != nil { // WriteFile keeps an existing file's mode
		return err
	}
	return c.dst.Chtimes(rel(p), fi.ModTime(), fi.ModTime())
}
