package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Unpack extracts a snapshot packed by Pack (or a root captured otherwise: directories, regular files and symlinks
// as sysfs has them; testdata/roots/real/*.tar.gz) into dir, keeping modes and modification times. A tarball, not
// a tree, travels whole: git and many copies keep no empty directories, and an empty /sys/class/iommu says
// something a missing one does not. Every write goes through an os.Root, so no entry, and no symlink an earlier
// entry made, can put a file outside dir; links are written as they are (a host.Root resolves them inside the
// root). Device files, FIFOs and hard links are refused, and so is a tarball that would unpack to more than
// MaxUnpackBytes or MaxUnpackEntries (a snapshot from elsewhere may be a decompression bomb): gpuprep's own are
// thousands of entries and a few MiB.
func Unpack(tarball, dir string) error { return UnpackUntil(tarball, dir, nil) }

// ErrStopped is what Unpack and Take return when their stop function asked
// them to stop (an interrupt): what they wrote is left for the caller to
// remove.
var ErrStopped = errors.New("stopped")

// UnpackUntil is Unpack, asking stop (when not nil) before each entry.
func UnpackUntil(tarball, dir string, stop func() bool) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tarball, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer out.Close()
	tr := tar.NewReader(&boundedReader{r: zr, left: MaxUnpackStream})
	var n unpacked
	for {
		if stop != nil && stop() {
			return ErrStopped
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tarball, err)
		}
		if err := n.admit(h); err != nil {
			return fmt.Errorf("%s: %w", tarball, err)
		}
		if err := unpackEntry(out, h, tr); err != nil {
			return fmt.Errorf("%s: entry %q: %w", tarball, h.Name, err)
		}
	}
}

// unpacked counts what UnpackUntil unpacked so far.
type unpacked struct{ entries, bytes int64 }

// admit counts the entry h, refusing it beyond Unpack's limits or when it
// leaves the root.
func (n *unpacked) admit(h *tar.Header) error {
	n.entries++
	if h.Typeflag == tar.TypeReg {
		n.bytes += h.Size
	}
	if n.entries > MaxUnpackEntries || n.bytes > MaxUnpackBytes {
		return fmt.Errorf("more than %d entries or %d MiB unpacked at entry %q: not a gpuprep snapshot, or not one to unpack here", MaxUnpackEntries, MaxUnpackBytes>>20, h.Name)
	}
	if slices.Contains(strings.Split(h.Name, "/"), "..") {
		return fmt.Errorf("entry %q leaves the root", h.Name)
	}
	return nil
}

// unpackEntry writes the entry h (its content read from tr) under out,
// with the directories above it.
func unpackEntry(out *os.Root, h *tar.Header, tr io.Reader) error {
	name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
	if name == "" {
		return nil
	}
	if d := path.Dir(name); d != "." {
		if err := out.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return out.MkdirAll(name, 0o755)
	case tar.TypeSymlink:
		return out.Symlink(h.Linkname, name)
	case tar.TypeReg:
		err := writeEntry(out, name, os.FileMode(h.Mode).Perm()|0o200, tr)
		if err == nil && !h.ModTime.IsZero() {
			err = out.Chtimes(name, h.ModTime, h.ModTime)
		}
		return err
	}
	return fmt.Errorf("type %q not supported", h.Typeflag)
}

// Unpack's limits (variables: tests lower them). MaxUnpackStream bounds the decompressed stream as a whole, headers
// included: a tarball of empty entries with megabyte PAX records (which tar readers accept up to 1 MiB each) unpacks
// to nothing yet would be a terabyte to decompress at MaxUnpackEntries.
var (
	MaxUnpackBytes   int64 = 1 << 30
	MaxUnpackEntries int64 = 1 << 20
	MaxUnpackStream  int64 = 2 << 30
)

func writeEntry(out *os.Root, name string, mode os.FileMode, r io.Reader) error {
	w, err := out.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		_ = w.Close() // the error is the copy's
		return err
	}
	return w.Close()
}

// Pack writes the tree dir as a gzip-compressed tarball to w: every directory (empty ones too), regular file and
// symlink, in name order, with its mode and modification time (gpuprep compares file times), owned by 0:0, so
// that the same tree packs to the same bytes.
func Pack(dir string, w io.Writer) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			return fmt.Errorf("%s: not a directory, regular file or symlink", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
