package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FleetStream is a fleet report written host by host as each host
// finishes, so that what a fleet run holds does not grow with the hosts it
// has finished: each host's entry is encoded at once into a file (the
// --report file, or a temporary one) and dropped; the stream keeps its
// place in the file and what the summary needs (counts, and the names of
// the hosts each failing check fails on).
//
// While the run goes on, the file is a FleetReport cut short: its head and
// the entries of the hosts finished so far, in the order they finished,
// each written whole before the next. Close rewrites it as the complete
// document, in inventory order: byte for byte what FleetJSON writes.
type FleetStream struct {
	f    *os.File
	path string // "" for a temporary file (removed as soon as made)
	head FleetReport
	sb   *summaryBuilder
	at   []span // by inventory index; n == 0: not added
	end  int64
	w    *bufio.Writer
	err  error
}

type span struct {
	off int64
	n   int
}

// NewFleetStream starts the fleet report of n hosts in path (created or
// truncated), or, where path is "", in a temporary file no one else can
// see. head gives Mode and Command.
func NewFleetStream(path string, head *FleetReport, n int) (*FleetStream, error) {
	s := &FleetStream{path: path, head: *head, at: make([]span, n)}
	s.head.Hosts, s.head.APIVersion, s.head.Kind = nil, APIVersion, FleetKind
	s.sb = newSummaryBuilder(&s.head)
	var err error
	if path == "" {
		if s.f, err = os.CreateTemp("", "gpuprep-fleet-*.json"); err == nil {
			err = os.Remove(s.f.Name())
		}
	} else {
		s.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	if err != nil {
		if s.f != nil {
			err = errors.Join(err, s.f.Close())
		}
		return nil, err
	}
	running := s.head
	running.Planned = n
	pre, _, err := fleetHead(&running)
	if err != nil {
		return nil, errors.Join(err, s.f.Close())
	}
	s.w = bufio.NewWriterSize(s.f, 64<<10)
	s.write(pre)
	return s, s.flush()
}

// fleetHead is the indented JSON of f without its hosts, cut where they go:
// pre ends with `"hosts": [`, post starts with the `]`.
func fleetHead(f *FleetReport) (pre, post []byte, err error) {
	head := *f
	head.Hosts = []FleetHost{}
	b, err := json.MarshalIndent(&head, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	// The hosts' place: a key at the top level is the only one indented by
	// two spaces right after a newline (inside strings newlines are escaped).
	const empty = "\n  \"hosts\": []"
	i := bytes.Index(b, []byte(empty))
	if i < 0 {
		return nil, nil, fmt.Errorf("fleet JSON: no hosts field in %.80q", b)
	}
	i += len(empty) - 1 // at the "]"
	return b[:i], b[i:], nil
}

func (s *FleetStream) write(b []byte) {
	if s.err == nil {
		var n int
		n, s.err = s.w.Write(b)
		s.end += int64(n)
	}
}

func (s *FleetStream) flush() error {
	if s.err == nil {
		s.err = s.w.Flush()
	}
	return s.err
}

// Add records host h, the i-th of the inventory: fills its verdict (and a
// fleet run's outcome) as Finish does, counts it, and writes its entry to
// the file (flushed: a reader sees it whole). h is not kept.
func (s *FleetStream) Add(i int, h *FleetHost) error {
	if i < 0 || i >= len(s.at) || s.at[i].n != 0 {
		return fmt.Errorf("fleet report: host %d added twice or out of range", i)
	}
	s.sb.add(i, h)
	b, err := json.MarshalIndent(h, "    ", "  ")
	if err != nil {
		return err
	}
	if s.sb.s.Hosts > 1 {
		s.write([]byte{','})
	}
	s.write([]byte("\n    "))
	s.at[i] = span{s.end, len(b)}
	s.write(b)
	return s.flush()
}

// Added says whether the i-th host was added.
func (s *FleetStream) Added(i int) bool { return s.at[i].n != 0 }

// Summary is the summary of the hosts added so far.
func (s *FleetStream) Summary() FleetSummary { return s.sb.summary() }

// Report is the fleet report's head and summary, without its hosts
// (Hosts nil): what the exit code is made from.
func (s *FleetStream) Report(interrupted bool) *FleetReport {
	f := s.head
	f.Interrupted = interrupted
	f.Summary = s.Summary()
	return &f
}

// WriteJSON writes the complete fleet report, hosts in inventory order,
// byte for byte what FleetJSON writes for the same hosts. Every host must
// have been added.
func (s *FleetStream) WriteJSON(w io.Writer, interrupted bool) error {
	if err := s.flush(); err != nil {
		return err
	}
	pre, post, err := fleetHead(s.Report(interrupted))
	if err != nil {
		return err
	}
	var buf []byte
	return spliceHosts(w, pre, post, len(s.at), func(i int) ([]byte, error) {
		sp := s.at[i]
		if sp.n == 0 {
			return nil, fmt.Errorf("fleet report: host %d never added", i)
		}
		buf = growTo(buf, sp.n)
		if _, err := s.f.ReadAt(buf, sp.off); err != nil {
			return nil, fmt.Errorf("fleet report: reading back host %d: %w", i, err)
		}
		return buf, nil
	})
}

func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// Host reads the i-th host's entry back from the file.
func (s *FleetStream) Host(i int) (FleetHost, error) {
	var h FleetHost
	_, err := s.hostInto(i, nil, &h)
	return h, err
}

// hostInto reads the i-th host's entry back into h, through buf (grown
// as needed, and returned for the next).
func (s *FleetStream) hostInto(i int, buf []byte, h *FleetHost) ([]byte, error) {
	if err := s.flush(); err != nil {
		return buf, err
	}
	sp := s.at[i]
	if sp.n == 0 {
		return buf, fmt.Errorf("fleet report: host %d never added", i)
	}
	buf = growTo(buf, sp.n)
	if _, err := s.f.ReadAt(buf, sp.off); err != nil {
		return buf, fmt.Errorf("fleet report: reading back host %d: %w", i, err)
	}
	return buf, json.Unmarshal(buf, h)
}

// Each reads the hosts back one at a time, in inventory order, and gives
// each to fn (a fresh FleetHost each time: what fn keeps of it is its own),
// so a caller that needs only part of each host holds only that part.
func (s *FleetStream) Each(fn func(h *FleetHost) error) error {
	var buf []byte
	for i := range s.at {
		var h FleetHost
		var err error
		if buf, err = s.hostInto(i, buf, &h); err != nil {
			return err
		}
		if err := fn(&h); err != nil {
			return err
		}
	}
	return nil
}

// Load is the complete fleet report with every host read back (for the
// formats rendered from the whole report: text, JUnit, Markdown, HTML).
func (s *FleetStream) Load(interrupted bool) (*FleetReport, error) {
	f := s.Report(interrupted)
	f.Hosts = make([]FleetHost, len(s.at))
	for i := range s.at {
		h, err := s.Host(i)
		if err != nil {
			return nil, err
		}
		f.Hosts[i] = h
	}
	return f, nil
}

// Close ends the stream. With a report file, it is first rewritten as the
// complete document in inventory order (written beside it and renamed
// over it): every host must have been added.
func (s *FleetStream) Close(interrupted bool) error {
	defer s.f.Close()
	if s.path == "" {
		return s.err
	}
	tmp, err := os.CreateTemp(dirOf(s.path), ".gpuprep-fleet-*.json")
	if err != nil {
		return err
	}
	err = s.writeFile(tmp, interrupted)
	if err == nil {
		err = os.Rename(tmp.Name(), s.path)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	return nil
}

// writeFile writes the complete document to f, readable by its owner only,
// and closes f.
func (s *FleetStream) writeFile(f *os.File, interrupted bool) error {
	err := s.WriteJSON(f, interrupted)
	if err == nil {
		err = f.Chmod(0o600)
	}
	return errors.Join(err, f.Close())
}

func dirOf(p string) string { return filepath.Dir(p) }

// Render writes the complete fleet report in format (text, json, junit,
// markdown, html), hosts in inventory order, byte for byte what Render
// writes for the report held whole; each host's entry is read back from
// the file when its turn comes, and dropped (a format laid out from every
// host, as the text table's columns and JUnit's totals are, reads them
// twice). Every host must have been added.
func (s *FleetStream) Render(w io.Writer, format string, interrupted bool) error {
	if format == "json" {
		return s.WriteJSON(w, interrupted)
	}
	for i := range s.at {
		if !s.Added(i) {
			return fmt.Errorf("fleet report: host %d never added", i)
		}
	}
	f := s.Report(interrupted)
	f.from = s
	return Render(w, &Document{Fleet: f}, format)
}
