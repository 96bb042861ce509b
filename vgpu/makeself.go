package vgpu

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"compress/bzip2"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// A makeself archive (NVIDIA's .run files are made with makeself) is a
// shell script followed by one or more compressed tar files. The script's
// own --list reads the tar after the first N lines of the file:
//
//	offset=`head -n 536 "$0" | wc -c | tr -d " "`          (makeself 2.1.x, NVIDIA's)
//	offset=`head -n "$skip" "$0" | wc -c | sed "s/ //g"`   (makeself 2.4 and later, with skip="714")
//	for s in $filesizes; do MS_dd "$0" $offset $s | eval "$GUNZIP_CMD" | UnTAR t; offset=`expr $offset + $s`; done
//
// (makeself-header.sh of github.com/megastep/makeself, the --list case).
// gpuprep reads that header as data, never runs it: the line count, the
// filesizes, label and targetdir are taken from their assignments, the
// compression from each payload's own magic bytes (not from the header's
// eval), and the tar is listed in Go, so that a forged header whose
// --list would run code runs nothing.

// Bounds on what a .run may make gpuprep read.
const (
	maxRunHeader   = 256 << 10 // the script part: NVIDIA's is about 20 KiB
	maxRunEntries  = 1 << 20   // tar entries listed
	maxRunName     = 4096      // bytes in one entry's name (PATH_MAX)
	maxRunNames    = 64 << 20  // bytes in all entries' names together
	maxRunUnpacked = 16 << 30  // bytes decompressed, all payloads together
	maxRunPayloads = 16        // filesizes entries
)

var (
	skipLinesRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`offset=` + "`" + `head -n ("?\$\{?(?:skip|SKIP)\}?"?|[0-9]+) "\$0"`)
	})
	skipVarRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^(?:skip|SKIP)="?([0-9]+)"?\s*$`) })
	fileSizesRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^filesizes="([0-9 ]*)"\s*$`) })
)

// runHeader is what a makeself header says about its archive.
type runHeader struct {
	Label, TargetDir string
	Offset           int64   // where the first payload starts: after the header's lines
	Sizes            []int64 // each payload's length (filesizes)
	head             []byte  // the header's bytes, up to Offset
}

// parseRunHeader reads head (the file's first bytes, at most maxRunHeader)
// as a makeself header.
func parseRunHeader(head []byte) (*runHeader, error) {
	if !bytes.HasPrefix(head, []byte("#!/bin/sh")) && !bytes.HasPrefix(head, []byte("#!/bin/bash")) {
		return nil, errors.New("no makeself shell header")
	}
	h := &runHeader{}
	for _, m := range headerVarRe().FindAllSubmatch(head, -1) {
		switch string(m[1]) {
		case "label":
			h.Label = cmp.Or(h.Label, string(m[2]))
		case "targetdir":
			h.TargetDir = cmp.Or(h.TargetDir, string(m[2]))
		}
	}
	n, err := headerLines(head)
	if err != nil {
		return nil, err
	}
	h.Offset = lineEnd(head, n)
	if h.Offset < 0 {
		return nil, fmt.Errorf("makeself header: the payload starts after line %d, beyond the first %d KiB", n, maxRunHeader>>10)
	}
	h.head = head[:h.Offset]
	if h.Sizes, err = fileSizes(head); err != nil {
		return nil, err
	}
	return h, nil
}

// headerLines is how many lines a makeself header says it has (its
// offset=`head -n N "$0" …`, N literal or its skip variable).
func headerLines(head []byte) (int, error) {
	m := skipLinesRe().FindSubmatch(head)
	if m == nil {
		return 0, errors.New("no makeself payload offset (offset=`head -n N \"$0\" ...`) in the header")
	}
	lines := string(m[1])
	if lines[0] < '0' || lines[0] > '9' {
		v := skipVarRe().FindSubmatch(head)
		if v == nil {
			return 0, errors.New("the makeself header reads its offset from skip, which it does not set")
		}
		lines = string(v[1])
	}
	n, err := strconv.Atoi(lines)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("makeself header: %q lines is not a line count", lines)
	}
	return n, nil
}

// lineEnd is the offset just after the n-th newline of b, -1 when b has
// fewer.
func lineEnd(b []byte, n int) int64 {
	for i, seen := 0, 0; i < len(b); i++ {
		if b[i] == '\n' {
			if seen++; seen == n {
				return int64(i + 1)
			}
		}
	}
	return -1
}

// fileSizes are the payload lengths of a makeself header's filesizes.
func fileSizes(head []byte) ([]int64, error) {
	fs := fileSizesRe().FindSubmatch(head)
	if fs == nil {
		return nil, errors.New("makeself header: no filesizes")
	}
	var sizes []int64
	for _, f := range strings.Fields(string(fs[1])) {
		s, err := strconv.ParseInt(f, 10, 64)
		if err != nil || s <= 0 {
			return nil, fmt.Errorf("makeself header: filesizes %q", fs[1])
		}
		sizes = append(sizes, s)
	}
	if len(sizes) == 0 || len(sizes) > maxRunPayloads {
		return nil, fmt.Errorf("makeself header: %d payloads in filesizes", len(sizes))
	}
	return sizes, nil
}

// runListing is what reading a .run whole gives: how many files its
// payloads hold, whether one is nvidia-vgpu-mgr (the only name callers
// need: the names themselves are not kept, so a forged .run cannot make
// gpuprep hold them), and the SHA-256 of every byte read, header, payloads
// and any trailer.
type runListing struct {
	Entries   int
	VgpuMgr   bool  // a file called nvidia-vgpu-mgr, in any directory
	nameBytes int64 // the names' bytes so far, bounded by maxNames
	maxNames  int64
	SHA256    string
}

// listRun reads r (a .run file of size bytes, whose header h describes)
// once from its start to its end: the header, each payload decompressed
// and its tar listed, and what follows, all hashed as read, so that the
// hash is that of the very bytes listed.
func listRun(r io.Reader, size int64, h *runHeader) (*runListing, error) {
	var total int64
	for _, s := range h.Sizes {
		total += s
	}
	if h.Offset+total > size {
		return nil, fmt.Errorf("makeself header: %d bytes of payload after byte %d, but the file has %d bytes: truncated or forged", total, h.Offset, size)
	}
	sum := sha256.New()
	in := bufio.NewReaderSize(io.TeeReader(r, sum), 1<<20)
	head := make([]byte, h.Offset)
	if _, err := io.ReadFull(in, head); err != nil {
		return nil, err
	}
	if !bytes.Equal(head, h.head) {
		return nil, errors.New("the header changed while it was read")
	}
	out := &runListing{maxNames: maxRunNames}
	budget := &unpackBudget{left: maxRunUnpacked}
	for i, s := range h.Sizes {
		part := bufio.NewReaderSize(io.LimitReader(in, s), 64<<10)
		if err := listPayload(part, budget, out); err != nil {
			return nil, fmt.Errorf("payload %d: %w", i+1, err)
		}
		if _, err := io.Copy(io.Discard, part); err != nil { // hash what the tar did not need
			return nil, err
		}
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return nil, err
	}
	out.SHA256 = hex.EncodeToString(sum.Sum(nil))
	return out, nil
}

// listPayload lists the tar in part, decompressed as its magic bytes say.
func listPayload(part *bufio.Reader, budget *unpackBudget, out *runListing) error {
	dec, closeDec, err := decompressor(part)
	if err != nil {
		return err
	}
	defer closeDec()
	budget.r = dec
	tr := tar.NewReader(budget)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tar: %w", err)
		}
		if err := out.add(hd.Name); err != nil {
			return err
		}
	}
}

// add counts the tar entry name, refusing one past the bounds.
func (l *runListing) add(name string) error {
	switch {
	case l.Entries >= maxRunEntries:
		return fmt.Errorf("more than %d files", maxRunEntries)
	case len(name) > maxRunName:
		return fmt.Errorf("a file name of %d bytes (more than %d)", len(name), maxRunName)
	case l.nameBytes+int64(len(name)) > l.maxNames:
		return fmt.Errorf("more than %d MiB of file names", l.maxNames>>20)
	}
	l.Entries++
	l.nameBytes += int64(len(name))
	if path.Base(path.Clean("/"+name)) == "nvidia-vgpu-mgr" {
		l.VgpuMgr = true
	}
	return nil
}

// decompressor gives the reader of part's decompressed bytes, told by its
// magic: gzip, xz, zstd, bzip2, or an uncompressed tar (makeself --nocomp).
func decompressor(part *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := part.Peek(262)
	none := func() {}
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(part)
		if err != nil {
			return nil, none, fmt.Errorf("gzip: %w", err)
		}
		return z, func() { _ = z.Close() }, nil
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		z, err := xz.NewReader(part)
		if err != nil {
			return nil, none, fmt.Errorf("xz: %w", err)
		}
		return z, none, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(part, zstd.WithDecoderMaxMemory(1<<30), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, none, fmt.Errorf("zstd: %w", err)
		}
		return z, z.Close, nil
	case bytes.HasPrefix(magic, []byte("BZh")):
		return bzip2.NewReader(part), none, nil
	case len(magic) >= 262 && string(magic[257:262]) == "ustar":
		return part, none, nil
	}
	return nil, none, errors.New("not a gzip, xz, zstd or bzip2 stream, nor a tar")
}

// unpackBudget ends a read past maxRunUnpacked decompressed bytes (a
// decompression bomb behind a forged header).
type unpackBudget struct {
	r    io.Reader
	left int64
}

func (b *unpackBudget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("more than %d GiB decompressed", maxRunUnpacked>>30)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
