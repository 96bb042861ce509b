package initramfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// The cpio "newc" format as the kernel unpacks it (linux
// init/initramfs.c, do_header/do_name/do_copy, and
// Documentation/driver-api/early-userspace/buffer-format.rst): a header of
// the magic "070701" (or "070702", the same with a checksum the kernel
// does not require) and 13 fields of 8 hex digits (ino, mode, uid, gid,
// nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor,
// namesize, check), the NUL-terminated name padded to a multiple of 4,
// then the data padded to a multiple of 4. "TRAILER!!!" ends an archive;
// NULs may pad between archives.
//
// Our own reader rather than u-root's pkg/cpio (v0.16.0, newc.go): that one
// allocates the header's namesize before reading (up to 4 GiB from a
// hostile header), knows only "070701", and reads through io.ReaderAt,
// while a decompressed stream is read once, forward.

const (
	headerLen = 110
	trailer   = "TRAILER!!!"
	// maxName is the kernel's own bound: do_header ignores an entry whose
	// name is longer than PATH_MAX (4096, NUL included).
	maxName = 4096
)

// Mode bits of the file type (S_IFMT), as newc records them.
const (
	modeType    = 0o170000
	modeRegular = 0o100000
	modeDir     = 0o040000
	modeSymlink = 0o120000
)

// header is one cpio record's header.
type header struct {
	ino, mode, nlink, size, major, minor, nameSize uint32
}

var errNotCPIO = errors.New("not a cpio archive")

// isCPIOMagic reports whether b starts a newc record.
func isCPIOMagic(b []byte) bool {
	return len(b) >= 6 && (string(b[:6]) == "070701" || string(b[:6]) == "070702")
}

// readHeader reads a record's 110-byte header.
func readHeader(r io.Reader) (header, error) {
	var buf [headerLen]byte
	if _, err := io.ReadFull(r, buf[:]); err != nil {
		return header{}, fmt.Errorf("cpio header: %w", unexpected(err))
	}
	if !isCPIOMagic(buf[:]) {
		return header{}, fmt.Errorf("%w: magic %q", errNotCPIO, buf[:6])
	}
	var f [13]uint32
	for i := range f {
		v, err := strconv.ParseUint(string(buf[6+8*i:14+8*i]), 16, 32)
		if err != nil {
			return header{}, fmt.Errorf("cpio header: field %d is not hex: %q", i, buf[6+8*i:14+8*i])
		}
		f[i] = uint32(v)
	}
	return header{ino: f[0], mode: f[1], nlink: f[4], size: f[6], major: f[7], minor: f[8], nameSize: f[11]}, nil
}

// pad4 is how many bytes pad n to a multiple of 4.
func pad4(n int64) int64 { return (4 - n%4) % 4 }

// unexpected turns the EOF inside a record into ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// cleanName is an entry's name as a path relative to the image's root:
// "./etc/x", "/etc/x" and "etc/x" are one file.
func cleanName(n string) string {
	n = path.Clean("/" + n)
	return strings.TrimPrefix(n, "/")
}

// archive reads cpio archives from r, one after another with NUL padding
// between them, until r ends, into img. A record's data is kept only for
// the files img wants (see keep); the rest is skipped unread.
func (img *Image) archive(r *bufio.Reader) error {
	for {
		if err := skipNULs(r); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := img.oneArchive(r); err != nil {
			return err
		}
		img.Archives++
	}
}

// skipNULs reads past NUL bytes; io.EOF when r ends.
func skipNULs(r *bufio.Reader) error {
	for {
		b, err := r.ReadByte()
		if err != nil {
			return err
		}
		if b != 0 {
			return r.UnreadByte()
		}
	}
}

// hardlink is a file's identity for newc hard links: the data comes with
// the last of the names (init/initramfs.c, maybe_link).
type hardlink struct{ ino, major, minor uint32 }

// oneArchive reads one archive's records up to its trailer.
func (img *Image) oneArchive(r *bufio.Reader) error {
	links := map[hardlink][]string{}
	for {
		h, err := readHeader(r)
		if err != nil {
			return err
		}
		if h.nameSize == 0 || h.nameSize > maxName {
			return fmt.Errorf("cpio: name length %d (at most %d)", h.nameSize, maxName)
		}
		name := make([]byte, h.nameSize)
		if _, err := io.ReadFull(r, name); err != nil {
			return fmt.Errorf("cpio name: %w", unexpected(err))
		}
		if _, err := r.Discard(int(pad4(headerLen + int64(h.nameSize)))); err != nil {
			return fmt.Errorf("cpio name padding: %w", unexpected(err))
		}
		n := string(name[:len(name)-1])
		if i := strings.IndexByte(n, 0); i >= 0 {
			n = n[:i]
		}
		if n == trailer {
			_, err := io.CopyN(io.Discard, r, int64(h.size)+pad4(int64(h.size)))
			return unexpected(err)
		}
		img.Entries++
		if img.Entries > img.limits.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, img.limits.MaxEntries)
		}
		if err := img.record(r, h, cleanName(n), links); err != nil {
			return err
		}
	}
}

// putRegular records the regular file name (e, of header h): a hard link
// of others shares the data of the entry that carries it (size above 0),
// which gives it to every name of the link seen so far.
func (img *Image) putRegular(h header, name string, e entry, links map[hardlink][]string) {
	if h.nlink > 1 {
		id := hardlink{h.ino, h.major, h.minor}
		links[id] = append(links[id], name)
		if h.size > 0 {
			for _, other := range links[id] {
				img.put(other, e)
			}
			return
		}
	}
	img.put(name, e)
}

// record takes one entry's data: kept for a wanted regular file, a
// symlink's target, skipped for everything else (device nodes, FIFOs and
// sockets carry no data img reads).
func (img *Image) record(r *bufio.Reader, h header, name string, links map[hardlink][]string) error {
	size := int64(h.size)
	var data []byte
	kept := false
	switch {
	case h.mode&modeType == modeRegular && img.keep(name) && size <= img.limits.MaxFile && img.kept+size <= img.limits.MaxKept:
		data = make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return fmt.Errorf("cpio %s: %w", name, unexpected(err))
		}
		img.kept += size
		kept = true
	case h.mode&modeType == modeSymlink && size <= maxName:
		t := make([]byte, size)
		if _, err := io.ReadFull(r, t); err != nil {
			return fmt.Errorf("cpio %s: %w", name, unexpected(err))
		}
		img.put(name, entry{kind: Symlink, target: string(t)})
		_, err := r.Discard(int(pad4(size)))
		return unexpected(err)
	default:
		if _, err := io.CopyN(io.Discard, r, size); err != nil {
			return fmt.Errorf("cpio %s: %w", name, unexpected(err))
		}
	}
	if _, err := r.Discard(int(pad4(size))); err != nil {
		return fmt.Errorf("cpio %s: %w", name, unexpected(err))
	}
	switch h.mode & modeType {
	case modeRegular:
		img.putRegular(h, name, entry{kind: Regular, data: data, kept: kept, tooBig: !kept && img.keep(name)}, links)
	case modeDir:
		img.put(name, entry{kind: Dir})
	case modeSymlink: // a target longer than PATH_MAX
		img.put(name, entry{kind: Other})
	default:
		img.put(name, entry{kind: Other})
	}
	return nil
}
