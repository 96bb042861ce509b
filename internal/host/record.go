package host

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Access is how a host path was read.
type Access uint8

const (
	AccessFile Access = 1 << iota // its content (ReadFile, Open, Dir.ReadString)
	AccessList                    // its entries (ReadDir, Names, Dir.Names, Glob)
	AccessLink                    // it as a symlink (Readlink, Lstat)
	AccessStat                    // whether and what it is (Stat, Exists, Realpath, OpenDir)
)

// Seen is what a read of a file returned: its bytes, or its error.
type Seen struct {
	Data []byte
	Err  error
}

// Span is a part of a file read at an offset (an MSR of /dev/cpu/N/msr),
// and what the read returned.
type Span struct {
	Off int64
	N   int
	Seen
}

// maxSeen bounds the content a Recorder keeps of one file.
const maxSeen = 16 << 20

// A Recorder notes every host path a Root reads, how, and what the reads of
// whole files and of parts of files returned: `gpuprep snapshot` copies
// exactly that into a tree that stands in for the host, as gpuprep saw it.
type Recorder struct {
	mu    sync.Mutex
	paths map[string]Access
	seen  map[string]Seen
	spans map[string][]Span
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{paths: map[string]Access{}, seen: map[string]Seen{}, spans: map[string][]Span{}}
}

func (rec *Recorder) note(p string, a Access) {
	p = path.Clean("/" + p)
	rec.mu.Lock()
	rec.paths[p] |= a
	rec.mu.Unlock()
}

// noteSeen keeps the first whole-file read of p.
func (rec *Recorder) noteSeen(p string, data []byte, err error) {
	p = path.Clean("/" + p)
	if len(data) > maxSeen {
		data, err = nil, errors.New("larger than 16 MiB")
	}
	rec.mu.Lock()
	if _, ok := rec.seen[p]; !ok {
		rec.seen[p] = Seen{Data: bytes.Clone(data), Err: err}
	}
	rec.mu.Unlock()
}

// noteSpan keeps the first read of each part of p (several commands replayed
// in one snapshot read the same MSR).
func (rec *Recorder) noteSpan(p string, s Span) {
	p = path.Clean("/" + p)
	s.Data = bytes.Clone(s.Data)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, o := range rec.spans[p] {
		if o.Off == s.Off && o.N == s.N {
			return
		}
	}
	rec.spans[p] = append(rec.spans[p], s)
}

// Paths returns the recorded host paths, sorted, with how each was read.
func (rec *Recorder) Paths() ([]string, map[string]Access) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]string, 0, len(rec.paths))
	acc := make(map[string]Access, len(rec.paths))
	for p, a := range rec.paths {
		out = append(out, p)
		acc[p] = a
	}
	sort.Strings(out)
	return out, acc
}

// Seen returns what the first whole-file read of p returned; ok is false
// when p was not read whole (only opened, listed or stat'ed).
func (rec *Recorder) Seen(p string) (s Seen, ok bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s, ok = rec.seen[path.Clean("/"+p)]
	return s, ok
}

// Spans returns the parts of files read at offsets (ReadAt), by host path.
func (rec *Recorder) Spans() map[string][]Span {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make(map[string][]Span, len(rec.spans))
	for p, s := range rec.spans {
		out[p] = append([]Span(nil), s...)
	}
	return out
}

// Recording returns a view of r that notes every path it reads in rec.
func (r *Root) Recording(rec *Recorder) *Root {
	v := r.view()
	v.rec = rec
	return v
}

// IsRecording reports whether r notes what it reads (gpuprep snapshot).
// What only a live system call can tell (an ioctl's answer) is left out
// while recording, since a snapshot cannot hold it.
func (r *Root) IsRecording() bool { return r.rec != nil }

func (r *Root) note(p string, a Access) {
	if r.rec != nil {
		r.rec.note(p, a)
	}
}

// SparseMagic starts a file, in a root that is not the live one, that
// stands in for a file read only at offsets (/dev/cpu/N/msr): instead of
// bytes at those offsets (an AMD MSR's offset makes a 3 GiB sparse file
// that tar writes out in full), one line per part read:
//
//	OFFSET HEXBYTES          the bytes read there
//	OFFSET error OP ERRNO    the read failed: open or read, and errno
//
// Root.ReadAt answers from it as the host answered.
const SparseMagic = "gpuprep-sparse/1\n"

// SparseText writes spans in the SparseMagic format.
func SparseText(spans []Span) []byte {
	var b bytes.Buffer
	b.WriteString(SparseMagic)
	for _, s := range spans {
		fmt.Fprintf(&b, "%#x ", s.Off)
		var pe *fs.PathError
		var errno syscall.Errno
		switch {
		case s.Err == nil:
			b.WriteString(hex.EncodeToString(s.Data))
		case errors.As(s.Err, &pe) && errors.As(pe.Err, &errno):
			fmt.Fprintf(&b, "error %s %d", pe.Op, int(errno))
		default:
			b.WriteString("error eof 0")
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// sparseAt answers a read of n bytes at off from a SparseMagic file's text.
func sparseAt(text []byte, p string, off int64, n int) ([]byte, error) {
	for _, line := range strings.Split(strings.TrimPrefix(string(text), SparseMagic), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		o, err := strconv.ParseInt(f[0], 0, 64)
		if err != nil || o != off {
			continue
		}
		if len(f) == 4 && f[1] == "error" {
			e, _ := strconv.Atoi(f[3])
			if f[2] == "eof" {
				return nil, io.EOF
			}
			return nil, &fs.PathError{Op: f[2], Path: p, Err: syscall.Errno(e)}
		}
		b, err := hex.DecodeString(f[len(f)-1])
		if err == nil && len(b) >= n {
			return b[:n], nil
		}
	}
	return nil, io.EOF
}
