package host

import (
	"path"
	"sort"
	"sync"
)

// Access is how a host path was read.
type Access uint8

const (
	AccessFile Access = 1 << iota // its content (ReadFile, Open, Dir.ReadString)
	AccessList                    // its entries (ReadDir, Names, OpenDir, Glob)
	AccessLink                    // it as a symlink (Readlink, Lstat)
	AccessStat                    // whether and what it is (Stat, Exists, Realpath)
)

// Span is a part of a file read at an offset (an MSR of /dev/cpu/N/msr).
type Span struct {
	Off int64
	N   int
}

// A Recorder notes every host path a Root reads, and how: `gpuprep
// snapshot` copies exactly those into a tree that stands in for the host.
type Recorder struct {
	mu    sync.Mutex
	paths map[string]Access
	spans map[string][]Span
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{paths: map[string]Access{}, spans: map[string][]Span{}}
}

func (rec *Recorder) note(p string, a Access) {
	p = path.Clean("/" + p)
	rec.mu.Lock()
	rec.paths[p] |= a
	rec.mu.Unlock()
}

func (rec *Recorder) noteSpan(p string, s Span) {
	p = path.Clean("/" + p)
	rec.mu.Lock()
	rec.spans[p] = append(rec.spans[p], s)
	rec.mu.Unlock()
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
	return &Root{dir: r.dir, live: r.live, dirs: r.dirs, rfd: r.rfd, rec: rec}
}

func (r *Root) note(p string, a Access) {
	if r.rec != nil {
		r.rec.note(p, a)
	}
}
