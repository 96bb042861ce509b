package host

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a host directory opened once, whose entries are then read by name
// without resolving the directory's path again: a sysfs device directory
// has a handful of attributes and links worth reading, and resolving
// /sys/bus/pci/devices/ADDR (a symlink eight directories deep) for each
// costs more than reading them.
//
// Names are single path elements. A name that is a symlink is never
// followed (ReadFile refuses it, Readlink reads it), so nothing read
// through a Dir leaves the root, whatever links a fixture tree holds.
type Dir struct {
	f    *os.File
	path string // the host path it was opened as, for errors
	root *Root
}

// OpenDir opens the host directory p (symlinks resolved inside the root).
func (r *Root) OpenDir(p string) (*Dir, error) {
	clean := path.Clean("/" + p)
	r.note(clean, AccessStat) // Names notes the listing
	f, ok, err := r.openIn("open", clean, unix.O_RDONLY|unix.O_DIRECTORY)
	if !ok {
		var rp string
		if rp, err = r.Path(clean); err == nil {
			f, err = os.OpenFile(rp, os.O_RDONLY|unix.O_DIRECTORY, 0)
		}
	}
	if err != nil {
		return nil, r.hostErr(err, clean)
	}
	return &Dir{f: f, path: clean, root: r}, nil
}

// Path is the host path the directory was opened as.
func (d *Dir) Path() string { return d.path }

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

func (d *Dir) pathError(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: path.Join(d.path, name), Err: err}
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return errors.New("not a single path element")
	}
	return nil
}

// Names lists the directory's entry names, in the order the file system
// gives them.
func (d *Dir) Names() ([]string, error) {
	d.root.note(d.path, AccessList)
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return nil, d.pathError("readdir", "", err)
	}
	names, err := d.f.Readdirnames(-1)
	if err != nil {
		return nil, d.pathError("readdir", "", err)
	}
	return names, nil
}

// maxAttr bounds what ReadString reads: a sysfs attribute is at most a
// page; a fixture's character device must not be read forever.
const maxAttr = 64 << 10

// ReadString reads the entry name, a sysfs attribute or a regular file,
// with surrounding white space removed. A symlink is refused (ELOOP); a
// FIFO is refused without blocking (O_NONBLOCK, ErrNotRegular); more than
// 64 KiB is an error.
//
// Not for procfs: a sysfs attribute comes whole from one read of at most a
// page and a regular file reads short only at its end, so a short read is
// taken as the end (no second read to see 0), which a procfs seq file
// (short reads mid-file) would break.
func (d *Dir) ReadString(name string) (string, error) {
	b, err := d.readString(name)
	if d.root.rec != nil {
		p := path.Join(d.path, name)
		d.root.rec.note(p, AccessFile)
		d.root.rec.noteSeen(p, b, err)
	}
	return strings.TrimSpace(string(b)), err
}

func (d *Dir) readString(name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, d.pathError("open", name, err)
	}
	fd, err := openat(int(d.f.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return nil, d.pathError("open", name, err)
	}
	defer unix.Close(fd)
	if err := readable(fd, name); err != nil {
		return nil, d.pathError("open", name, errors.Unwrap(err))
	}
	var buf [4096]byte
	var out []byte
	for {
		n, err := unix.Read(fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, d.pathError("read", name, err)
		}
		out = append(out, buf[:n]...)
		if n < len(buf) {
			break
		}
		if len(out) > maxAttr {
			return nil, d.pathError("read", name, errors.New("more than 64 KiB: not an attribute"))
		}
	}
	return out, nil
}

// Readlink returns the raw target of the symlink name.
func (d *Dir) Readlink(name string) (string, error) {
	if d.root.rec != nil {
		d.root.rec.note(path.Join(d.path, name), AccessLink)
	}
	if err := checkName(name); err != nil {
		return "", d.pathError("readlink", name, err)
	}
	var small [256]byte
	for buf := small[:]; ; buf = make([]byte, 2*len(buf)) {
		got, err := unix.Readlinkat(int(d.f.Fd()), name, buf)
		if err != nil {
			return "", d.pathError("readlink", name, err)
		}
		if got < len(buf) {
			return string(buf[:got]), nil
		}
	}
}

// LinkBase returns the last element of the symlink name's target (a
// driver's name, an IOMMU group's number), or "" when there is no such
// symlink. Unlike Root.LinkBase it does not check that the target exists:
// sysfs links never dangle.
func (d *Dir) LinkBase(name string) string {
	t, err := d.Readlink(name)
	if err != nil {
		return ""
	}
	return path.Base(t)
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
