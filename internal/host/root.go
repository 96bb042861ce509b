// Package host gives gpuprep one view of a Linux host: every file it reads
// goes through a Root (a directory that stands in for "/"), and every command
// it runs goes through a Runner (argv only, never a shell string).
//
// A Root other than "/" lets tests and the bundled example node run the real
// code against a directory tree laid out like a real system: symlinks resolve
// inside the root, relative ones (as sysfs has) and absolute ones alike.
package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// maxLinks bounds symlink resolution, as the kernel's MAXSYMLINKS (40) does.
const maxLinks = 40

// Root is a directory that stands in for the host's "/".
type Root struct {
	dir  string // absolute, cleaned; "/" for the live host
	live bool
	// dirs caches resolved directories for read-only use (see ReadOnly);
	// nil when disabled.
	mu   sync.Mutex
	dirs map[string]string
	rfd  *rootFD   // the root opened for openat2 (fixture roots only)
	rec  *Recorder // notes what is read (gpuprep snapshot); nil: nothing noted
	// frozen, when set, is why nothing may be written through this root (a
	// packed snapshot unpacked for one command: a change would be lost).
	frozen string
	name   string // how the user named the root, when not dir (see Named)
	// systemDisk: the user named the root a system disk (a scratch
	// install, a mounted node disk), whose own programs may run (chroot)
	systemDisk bool
}

// view is a copy of r: the same directory, descriptors, recorder and
// freezing, and a fresh directory cache when r caches (see ReadOnly).
func (r *Root) view() *Root {
	return &Root{dir: r.dir, live: r.live, dirs: r.freshDirs(), rfd: r.rfd, rec: r.rec, frozen: r.frozen, name: r.name, systemDisk: r.systemDisk}
}

// ReadOnly returns a view of the same root that remembers resolved
// directories: a read-only command (check) resolves the same sysfs device
// directories again and again, and a fixture root pays an lstat per path
// component for each. Never use it for commands that change links (vfio
// bind moves driver links), since the cache would go stale.
func (r *Root) ReadOnly() *Root {
	v := r.view()
	v.dirs = map[string]string{}
	return v
}

// NewRoot returns a Root for dir. An empty dir means "/".
func NewRoot(dir string) (*Root, error) {
	if dir == "" {
		dir = "/"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("host root %q: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("host root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("host root %s: not a directory", abs)
	}
	root := &Root{dir: abs, live: abs == "/"}
	if !root.live {
		root.rfd = &rootFD{}
	}
	return root, nil
}

// Frozen returns a view of r through which every write fails with reason.
func (r *Root) Frozen(reason string) *Root {
	v := r.view()
	v.frozen = reason
	return v
}

// SystemDisk returns a view of r that the user named a system disk: the
// only kind of root other than "/" whose own programs gpuprep runs (inside
// it, with chroot), since a program run from a root is code from that root
// run as root, and chroot does not hold a root process in. Never a
// snapshot, never implied.
func (r *Root) SystemDisk() *Root {
	v := r.view()
	v.systemDisk = true
	return v
}

// IsSystemDisk reports whether the user named r a system disk (see
// SystemDisk).
func (r *Root) IsSystemDisk() bool { return r.systemDisk }

// Named returns a view of r that messages call name: a packed snapshot
// unpacked into a temporary directory is named by its file.
func (r *Root) Named(name string) *Root {
	v := r.view()
	v.name = name
	return v
}

// Name is the root as the user named it (see Named), else its directory.
func (r *Root) Name() string {
	if r.name != "" {
		return r.name
	}
	return r.dir
}

// freshDirs is an empty directory cache when r caches (see ReadOnly).
func (r *Root) freshDirs() map[string]string {
	if r.dirs == nil {
		return nil
	}
	return map[string]string{}
}

// Writable says whether the host path p may be written through r: nil, or
// the error every write through a frozen root gets.
func (r *Root) Writable(p string) error {
	if r.frozen == "" {
		return nil
	}
	return &fs.PathError{Op: "write", Path: path.Clean("/" + p), Err: errors.New(r.frozen)}
}

// Dir is the directory that stands in for "/".
func (r *Root) Dir() string { return r.dir }

// IsLive reports whether the root is the running system's own "/".
func (r *Root) IsLive() bool { return r.live }

// Path maps the absolute host path p to a path on this machine, resolving
// every symlink inside the root. The final component is resolved too.
func (r *Root) Path(p string) (string, error) {
	if r.live {
		return path.Clean("/" + p), nil
	}
	resolved, err := r.resolve(p, true)
	if err != nil {
		return "", err
	}
	return r.join(resolved), nil
}

// PathNoFollow maps p like Path but leaves a final symlink unresolved: for
// opening with O_NOFOLLOW a file that must not be reached through a link.
func (r *Root) PathNoFollow(p string) (string, error) { return r.lpath(p) }

// lpath maps p like Path but leaves a final symlink unresolved (for Lstat and
// Readlink).
func (r *Root) lpath(p string) (string, error) {
	if r.live {
		return path.Clean("/" + p), nil
	}
	resolved, err := r.resolve(p, false)
	if err != nil {
		return "", err
	}
	return r.join(resolved), nil
}

// hostErr names the host path p, as asked for, in a read's error instead of
// the file on this machine that stands in for it (or, where the resolution
// took the slow path, the file a symlink led to), so that a report made from
// a snapshot of a node reads as the one made on the node: the live kernel
// names the path asked for.
func (r *Root) hostErr(err error, p string) error {
	pe, ok := err.(*fs.PathError)
	if !ok || r.live {
		return err
	}
	rel, ok := strings.CutPrefix(pe.Path, r.dir)
	if !ok || (rel != "" && rel[0] != filepath.Separator) {
		return err
	}
	return &fs.PathError{Op: pe.Op, Path: path.Clean("/" + p), Err: pe.Err}
}

func (r *Root) join(hostPath string) string {
	return filepath.Join(r.dir, filepath.FromSlash(hostPath))
}

// resolve walks the host path p component by component, following symlinks
// within the root, and returns the resolved host path (starting with "/").
// Components that do not exist are kept as they are, so the caller gets the
// ordinary "no such file" error from the operation it performs.
func (r *Root) resolve(p string, followLast bool) (string, error) {
	clean := path.Clean("/" + p)
	if r.dirs == nil || clean == "/" || strings.Contains(clean, "..") {
		return r.walk("/", strings.Split(clean, "/")[1:], followLast, p)
	}
	dir, base := path.Split(clean)
	r.mu.Lock()
	rdir, ok := r.dirs[dir]
	r.mu.Unlock()
	if !ok {
		var err error
		if rdir, err = r.walk("/", strings.Split(path.Clean(dir), "/")[1:], true, p); err != nil {
			return "", err
		}
		r.mu.Lock()
		r.dirs[dir] = rdir
		r.mu.Unlock()
	}
	return r.walk(rdir, []string{base}, followLast, p)
}

// walk resolves the components todo starting from cur, a host path with no
// symlinks in it.
func (r *Root) walk(cur string, todo []string, followLast bool, p string) (string, error) {
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		if len(todo) == 0 && !followLast {
			cur = next
			break
		}
		fi, err := os.Lstat(r.join(next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			if err != nil {
				// The rest cannot exist: keep the remaining components.
				cur = path.Join(append([]string{cur}, todo...)...)
				todo = nil
			}
			continue
		}
		links++
		if links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: errors.New("too many levels of symbolic links")}
		}
		target, err := os.Readlink(r.join(next))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

// ReadFile reads the host file p.
func (r *Root) ReadFile(p string) ([]byte, error) {
	b, err := r.readFile(p)
	if r.rec != nil {
		r.rec.note(p, AccessFile)
		r.rec.noteSeen(p, b, err)
	}
	return b, err
}

func (r *Root) readFile(p string) ([]byte, error) {
	if b, ok, err := r.readFileIn(p); ok {
		return b, r.hostErr(err, p)
	}
	rp, err := r.Path(p)
	if err != nil {
		return nil, err
	}
	fd, err := openRead(rp)
	if err != nil {
		return nil, r.hostErr(err, p)
	}
	defer unix.Close(fd)
	if err := readable(fd, rp); err != nil {
		return nil, r.hostErr(err, p)
	}
	b, err := readFD(fd, rp)
	return b, r.hostErr(err, p)
}

// ReadString reads the host file p with surrounding white space removed, as
// a sysfs attribute is usually read.
func (r *Root) ReadString(p string) (string, error) {
	b, err := r.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Open opens the host file p for reading.
func (r *Root) Open(p string) (*os.File, error) {
	r.note(p, AccessFile)
	return r.open(p)
}

// open opens p without blocking on a FIFO, and refuses one (see readable).
func (r *Root) open(p string) (*os.File, error) {
	if fd, name, ok, err := r.openFD("open", p, unix.O_RDONLY|unix.O_NONBLOCK); ok {
		if err != nil {
			return nil, r.hostErr(err, p)
		}
		if err := readable(fd, name); err != nil {
			_ = unix.Close(fd) // only opened to read: nothing to lose
			return nil, r.hostErr(err, p)
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	rp, err := r.Path(p)
	if err != nil {
		return nil, err
	}
	f, err := openFile(rp)
	return f, r.hostErr(err, p)
}

// Stat follows symlinks inside the root.
func (r *Root) Stat(p string) (fs.FileInfo, error) {
	fi, err := r.stat(p)
	return fi, r.hostErr(err, p)
}

func (r *Root) stat(p string) (fs.FileInfo, error) {
	r.note(p, AccessStat)
	if fi, ok, err := r.statIn(p); ok {
		return fi, err
	}
	rp, err := r.Path(p)
	if err != nil {
		return nil, err
	}
	return os.Stat(rp)
}

// Lstat does not follow a final symlink.
func (r *Root) Lstat(p string) (fs.FileInfo, error) {
	r.note(p, AccessLink)
	rp, err := r.lpath(p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(rp)
	return fi, r.hostErr(err, p)
}

// ReadAt reads n bytes of the host file p at offset off (an MSR from
// /dev/cpu/N/msr). In a root that is not the live one, a file that starts
// with SparseMagic answers from its text (see SparseMagic).
func (r *Root) ReadAt(p string, off int64, n int) ([]byte, error) {
	b, err := r.readAt(p, off, n)
	if r.rec != nil {
		r.rec.noteSpan(p, Span{Off: off, N: n, Seen: Seen{Data: b, Err: err}})
	}
	return b, err
}

func (r *Root) readAt(p string, off int64, n int) ([]byte, error) {
	f, err := r.open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !r.live {
		head := make([]byte, len(SparseMagic))
		if k, _ := f.ReadAt(head, 0); k == len(head) && string(head) == SparseMagic {
			text, err := io.ReadAll(io.LimitReader(f, 1<<20))
			if err != nil {
				return nil, r.hostErr(err, p)
			}
			return sparseAt(text, path.Clean("/"+p), off, n)
		}
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, r.hostErr(err, p)
	}
	return b, nil
}

// Exists reports whether p exists (after resolving symlinks).
func (r *Root) Exists(p string) bool {
	_, err := r.stat(p) // no message wanted: no host path to put in it
	return err == nil
}

// Readlink returns the raw target of the symlink p.
func (r *Root) Readlink(p string) (string, error) {
	r.note(p, AccessLink)
	if t, ok, err := r.readlinkIn(p); ok {
		return t, r.hostErr(err, p)
	}
	rp, err := r.lpath(p)
	if err != nil {
		return "", err
	}
	t, err := os.Readlink(rp)
	return t, r.hostErr(err, p)
}

// LinkBase returns the last element of the symlink p's target: the driver
// name of a device's "driver" link, the group number of its "iommu_group".
// It returns "" when p is not there or its target does not exist.
func (r *Root) LinkBase(p string) string {
	t, err := r.Readlink(p)
	if err != nil {
		return ""
	}
	if !r.Exists(p) {
		return "" // dangling
	}
	return path.Base(t)
}

// Realpath returns p with every symlink resolved, as a host path.
func (r *Root) Realpath(p string) (string, error) {
	r.note(p, AccessStat)
	if r.live {
		return filepath.EvalSymlinks(p)
	}
	return r.resolve(p, true)
}

// ReadDir lists the host directory p, sorted by name.
func (r *Root) ReadDir(p string) ([]fs.DirEntry, error) {
	r.note(p, AccessList)
	if ents, ok, err := r.readDirIn(p); ok {
		return ents, r.hostErr(err, p)
	}
	rp, err := r.Path(p)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(rp)
	return ents, r.hostErr(err, p)
}

// Names lists the entry names of the host directory p, sorted; a missing
// directory gives none.
func (r *Root) Names(p string) []string {
	d, err := r.OpenDir(p)
	if err != nil {
		return nil
	}
	defer d.Close()
	out, err := d.Names()
	if err != nil {
		return nil
	}
	sort.Strings(out)
	return out
}

// Glob expands a host path pattern and returns host paths, sorted.
func (r *Root) Glob(pattern string) ([]string, error) {
	dir, base := path.Split(path.Clean("/" + pattern))
	if strings.ContainsAny(dir, "*?[") {
		// Expand directory components one level at a time.
		parents, err := r.Glob(strings.TrimSuffix(dir, "/"))
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range parents {
			m, err := r.Glob(path.Join(p, base))
			if err != nil {
				return nil, err
			}
			out = append(out, m...)
		}
		return out, nil
	}
	var out []string
	for _, n := range r.Names(dir) {
		ok, err := path.Match(base, n)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, path.Join(dir, n))
		}
	}
	return out, nil
}
