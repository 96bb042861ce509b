package host

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is the error of a read that found a FIFO, a socket or a
// block device where a file was expected: opened without O_NONBLOCK a FIFO
// blocks until something writes to it, and a host root (a snapshot, a
// fixture, a disk mounted from elsewhere) may hold one anywhere.
var ErrNotRegular = errors.New("not a regular file")

// openRead opens rp (a path on this machine) for reading without blocking
// on a FIFO: O_NONBLOCK, then cleared once fstat says the file may be read
// (see readable).
func openRead(rp string) (int, error) {
	for {
		fd, err := unix.Open(rp, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: rp, Err: err}
		}
		return fd, nil
	}
}

// readable checks that fd, opened with O_NONBLOCK as name, is a regular
// file, a directory or a character device (an MSR's /dev/cpu/N/msr, a
// fixture's stand-in device), and clears O_NONBLOCK on a regular file or
// directory (a character device keeps it: a read that would wait fails
// instead); a FIFO, a socket or a block device is ErrNotRegular, naming the
// file and what it is.
func readable(fd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	var what string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		what = "a FIFO"
	case unix.S_IFSOCK:
		what = "a socket"
	case unix.S_IFBLK:
		what = "a block device"
	case unix.S_IFCHR:
		return nil
	default:
		if err := unix.SetNonblock(fd, false); err != nil {
			return &fs.PathError{Op: "fcntl", Path: name, Err: err}
		}
		return nil
	}
	return &fs.PathError{Op: "open", Path: name, Err: notRegular{what}}
}

// notRegular is ErrNotRegular saying what the file is.
type notRegular struct{ what string }

func (e notRegular) Error() string        { return ErrNotRegular.Error() + " (" + e.what + ")" }
func (e notRegular) Is(target error) bool { return target == ErrNotRegular }

// openFile opens rp for reading as an *os.File (see openRead, readable).
func openFile(rp string) (*os.File, error) {
	fd, err := openRead(rp)
	if err != nil {
		return nil, err
	}
	if err := readable(fd, rp); err != nil {
		_ = unix.Close(fd) // only opened to read: nothing to lose
		return nil, err
	}
	return os.NewFile(uintptr(fd), rp), nil
}

// KindOf says in words what a file of mode m is where a regular file was
// expected ("a FIFO", "a directory", …), as the read refusals do.
func KindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
