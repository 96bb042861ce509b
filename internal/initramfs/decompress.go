package initramfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// Read reads an initramfs image from r as the kernel unpacks it
// (init/initramfs.c, unpack_to_rootfs): a sequence of segments, each an
// uncompressed cpio archive (the early microcode archive comes first, so
// that the kernel finds it before anything is decompressed) or a
// compressed stream holding cpio archives, with NUL bytes padding between
// them. The compression is told by its magic (lib/decompress.c,
// compressed_formats): gzip, xz, zstd, and lz4 in its legacy frame (what
// `lz4 -l` writes, and the only one lib/decompress_unlz4.c reads); bzip2,
// lzma and lzo are named but not read. Nothing is written anywhere.
//
// An error says where reading stopped; the Image is what was read up to
// there (ErrTooLarge when a limit stopped it).
func Read(r io.Reader, lim Limits) (*Image, error) {
	img := newImage(lim)
	cr := &countReader{r: r}
	br := bufio.NewReaderSize(cr, 64<<10)
	for {
		if err := skipNULs(br); err == io.EOF {
			if len(img.Segments) == 0 {
				return img, errors.New("empty image: no cpio archive")
			}
			return img, nil
		} else if err != nil {
			return img, err
		}
		off := cr.n - int64(br.Buffered())
		magic, _ := br.Peek(6)
		kind := compression(magic)
		img.Segments = append(img.Segments, Segment{Offset: off, Compression: kind})
		if err := img.segment(br, kind); err != nil {
			return img, fmt.Errorf("segment at offset %d (%s): %w", off, kind, err)
		}
	}
}

// compression names a segment's format from its first bytes.
func compression(m []byte) string {
	switch {
	case isCPIOMagic(m):
		return "none"
	case bytes.HasPrefix(m, []byte{0x1f, 0x8b}), bytes.HasPrefix(m, []byte{0x1f, 0x9e}):
		return "gzip"
	case bytes.HasPrefix(m, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz"
	case bytes.HasPrefix(m, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd"
	case bytes.HasPrefix(m, lz4LegacyMagic):
		return "lz4"
	case bytes.HasPrefix(m, []byte("BZh")):
		return "bzip2"
	case bytes.HasPrefix(m, []byte{0x5d, 0, 0}):
		return "lzma"
	case bytes.HasPrefix(m, []byte{0x89, 'L', 'Z', 'O'}):
		return "lzo"
	}
	return "unknown"
}

// segment reads one segment. An uncompressed archive and the gzip and lz4
// streams end where their data ends, so what follows is read as the next
// segment; xz and zstd are read to the end of the image (their readers
// take the concatenated streams, and xz its padding, themselves).
func (img *Image) segment(br *bufio.Reader, kind string) error {
	var dec io.Reader
	switch kind {
	case "none":
		if err := img.oneArchive(br); err != nil {
			return err
		}
		img.Archives++
		return nil
	case "gzip":
		z, err := gzip.NewReader(br) // br is a ByteReader: it reads no further than the member
		if err != nil {
			return err
		}
		z.Multistream(false)
		dec = z
	case "xz":
		z, err := xz.NewReader(br)
		if err != nil {
			return err
		}
		dec = z
	case "zstd":
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(img.limits.MaxBytes)))
		if err != nil {
			return err
		}
		defer z.Close()
		dec = z
	case "lz4":
		dec = &lz4Legacy{r: br}
	case "unknown":
		m, _ := br.Peek(4)
		return fmt.Errorf("neither a cpio archive nor a compression the kernel reads (first bytes % x)", m)
	default:
		return fmt.Errorf("compressed with %s, which gpuprep does not read", kind)
	}
	return img.archive(bufio.NewReaderSize(&budget{r: dec, img: img}, 64<<10))
}

// countReader counts the bytes read from the image file.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// budget stops a decompressed stream at the image's MaxBytes.
type budget struct {
	r   io.Reader
	img *Image
}

func (b *budget) Read(p []byte) (int, error) {
	if b.img.Bytes >= b.img.limits.MaxBytes {
		return 0, fmt.Errorf("%w: stopped after %d MiB decompressed", ErrTooLarge, b.img.limits.MaxBytes>>20)
	}
	if left := b.img.limits.MaxBytes - b.img.Bytes; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.img.Bytes += int64(n)
	return n, err
}

// The legacy LZ4 frame (lib/decompress_unlz4.c; lz4's programs/lz4io.c,
// LEGACY_MAGICNUMBER): the magic 0x184C2102, then blocks, each a
// little-endian 32-bit compressed size and an LZ4 block of at most 8 MiB
// uncompressed. A size equal to the magic starts a concatenated stream.
var lz4LegacyMagic = []byte{0x02, 0x21, 0x4c, 0x18}

const (
	lz4LegacyBlock = 8 << 20
	// lz4Bound is LZ4_compressBound(8 MiB): no block of the stream is
	// larger, so a bigger "size" is where the stream has ended (the next
	// segment's cpio magic or NUL padding).
	lz4Bound = lz4LegacyBlock + lz4LegacyBlock/255 + 16
)

type lz4Legacy struct {
	r     *bufio.Reader
	began bool
	buf   []byte // decompressed, not yet returned
	out   []byte
	in    []byte
	done  bool
}

func (l *lz4Legacy) Read(p []byte) (int, error) {
	for len(l.buf) == 0 {
		if l.done {
			return 0, io.EOF
		}
		if err := l.block(); err != nil {
			return 0, err
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

// block decompresses the next block into buf, or marks the end.
func (l *lz4Legacy) block() error {
	if !l.began {
		if _, err := l.r.Discard(4); err != nil {
			return unexpected(err)
		}
		l.began = true
	}
	head, err := l.r.Peek(4)
	if len(head) < 4 {
		if len(head) == 0 && err == io.EOF {
			l.done = true
			return nil
		}
		return fmt.Errorf("lz4: block size: %w", unexpected(err))
	}
	size := binary.LittleEndian.Uint32(head)
	switch {
	case bytes.Equal(head, lz4LegacyMagic):
		_, err := l.r.Discard(4)
		return err
	case size == 0 || size > lz4Bound:
		l.done = true // the stream ends; head belongs to the next segment
		return nil
	}
	if _, err := l.r.Discard(4); err != nil {
		return err
	}
	if cap(l.in) < int(size) {
		l.in = make([]byte, size)
	}
	in := l.in[:size]
	if _, err := io.ReadFull(l.r, in); err != nil {
		return fmt.Errorf("lz4: block of %d bytes: %w", size, unexpected(err))
	}
	if l.out == nil {
		l.out = make([]byte, lz4LegacyBlock)
	}
	n, err := lz4.UncompressBlock(in, l.out)
	if err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	l.buf = l.out[:n]
	return nil
}
