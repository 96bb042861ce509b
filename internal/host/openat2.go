package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// rootFD is the root directory opened once, for openat2(2) with
// RESOLVE_IN_ROOT: the kernel resolves a path inside the root in one call,
// "/" and ".." pinned at the root and absolute symlinks taken relative to
// it, exactly as Root's own walk does, for a fraction of the walk's cost
// (an lstat, and often a readlink, per component).
type rootFD struct {
	once sync.Once
	fd   int
	err  error
	off  atomic.Bool // openat2 unusable here (kernel before 5.6, a seccomp filter)
}

func (r *Root) rootFD() (int, bool) {
	if r.rfd == nil || r.rfd.off.Load() {
		return -1, false
	}
	r.rfd.once.Do(func() {
		r.rfd.fd, r.rfd.err = unix.Open(r.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if r.rfd.err == nil {
			// closed when no Root uses it any more: tests make thousands
			runtime.AddCleanup(r.rfd, func(fd int) { _ = unix.Close(fd) }, r.rfd.fd)
		}
	})
	if r.rfd.err != nil {
		return -1, false
	}
	return r.rfd.fd, true
}

// openIn opens the host path p inside a fixture root. ok is false when
// openat2 cannot be used, and the caller falls back to the walk.
func (r *Root) openIn(op, p string, flags int) (f *os.File, ok bool, err error) {
	fd, name, ok, err := r.openFD(op, p, flags)
	if !ok || err != nil {
		return nil, ok, err
	}
	return os.NewFile(uintptr(fd), name), true, nil
}

// openFD is openIn's file descriptor, and the name (on this machine) of
// the path asked for.
func (r *Root) openFD(op, p string, flags int) (fd int, name string, ok bool, err error) {
	dirfd, ok := r.rootFD()
	if !ok {
		return -1, "", false, nil
	}
	clean := path.Clean("/" + p)
	rel := strings.TrimPrefix(clean, "/")
	if rel == "" {
		rel = "."
	}
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dirfd, rel, how)
		switch {
		case err == nil:
			return fd, r.join(clean), true, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN) && try < 8:
			// EAGAIN: a rename raced the resolution of ".."; try again
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.E2BIG):
			r.rfd.off.Store(true) // no openat2 (Linux before 5.6), or not this way
			return -1, "", false, nil
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			return -1, "", true, &fs.PathError{Op: op, Path: r.join(clean), Err: err}
		default:
			// Anything else (EACCES or EPERM, from the file or a seccomp
			// filter; EXDEV, a magic link RESOLVE_IN_ROOT will not follow;
			// ELOOP) is left to the walk, whose answer is authoritative.
			return -1, "", false, nil
		}
	}
}

// maxRead bounds every read of a whole file: a regular file larger than
// this is refused before anything is allocated (a snapshot's file can be of
// any size), anything else when it has given this much (a fixture's
// character device would otherwise be read until memory runs out). Nothing
// gpuprep reads whole comes near it (pci.ids, the largest, is about 1.5 MiB).
const maxRead = 64 << 20

func (r *Root) readFileIn(p string) ([]byte, bool, error) {
	// O_NONBLOCK: a FIFO is refused instead of hanging. The bare
	// descriptor, not an os.File: nothing to register with the poller.
	fd, name, ok, err := r.openFD("open", p, unix.O_RDONLY|unix.O_NONBLOCK)
	if !ok || err != nil {
		return nil, ok, err
	}
	defer unix.Close(fd)
	if err := readable(fd, name); err != nil {
		return nil, true, err
	}
	data, err := readFD(fd, name)
	return data, true, err
}

// readFD reads fd (opened as name) to its end, at most maxRead bytes of it.
func readFD(fd int, name string) ([]byte, error) {
	size := 512
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size > 0 {
		if st.Size >= maxRead {
			return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%d bytes: more than gpuprep reads of a file (64 MiB)", st.Size)}
		}
		size = int(st.Size) + 1 // sysfs attributes say 4096 whatever they hold
	}
	data := make([]byte, 0, size)
	for {
		n, err := unix.Read(fd, data[len(data):cap(data)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		case n == 0:
			return data, nil
		}
		data = data[:len(data)+n]
		if len(data) == cap(data) {
			if len(data) >= maxRead {
				return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("more than 64 MiB")}
			}
			data = slices.Grow(data, len(data))
		}
	}
}

func (r *Root) statIn(p string) (fs.FileInfo, bool, error) {
	f, ok, err := r.openIn("stat", p, unix.O_PATH)
	if !ok || err != nil {
		return nil, ok, err
	}
	defer f.Close()
	fi, err := f.Stat()
	return fi, true, err
}

// readDirIn lists a directory found with openat2. The open file is named
// by the path the kernel resolved it to (read back from /proc/self/fd): a
// DirEntry's Info, and the lstat ReadDir does itself where the file system
// gives no types, go by that name, and must not resolve the root's links
// on this machine.
func (r *Root) readDirIn(p string) ([]fs.DirEntry, bool, error) {
	fd, _, ok, err := r.openFD("open", p, unix.O_RDONLY|unix.O_DIRECTORY)
	if !ok || err != nil {
		return nil, ok, err
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(real, r.dir+"/") && real != r.dir {
		_ = unix.Close(fd)     // a directory opened to read: nothing to lose
		return nil, false, nil // no /proc, or moved meanwhile: the walk
	}
	d := os.NewFile(uintptr(fd), real)
	defer d.Close()
	ents, err := d.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, true, err
}

// readlinkIn reads the symlink p: its directory is opened with openat2,
// the link itself is not followed.
func (r *Root) readlinkIn(p string) (string, bool, error) {
	clean := path.Clean("/" + p)
	if clean == "/" {
		return "", false, nil
	}
	dir, base := path.Split(clean)
	f, ok, err := r.openIn("readlink", dir, unix.O_PATH|unix.O_DIRECTORY)
	if !ok || err != nil {
		return "", ok, err
	}
	defer f.Close()
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		got, err := unix.Readlinkat(int(f.Fd()), base, buf)
		if err != nil {
			return "", true, &fs.PathError{Op: "readlink", Path: r.join(clean), Err: err}
		}
		if got < n {
			return string(buf[:got]), true, nil
		}
	}
}
