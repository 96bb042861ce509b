package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Path is the journal's host path.
const Path = "/var/lib/gpuprep/journal.jsonl"

// Entry is one change.
type Entry struct {
	Time    time.Time `json:"time"`
	Command string    `json:"command"`          // e.g. "grub ensure", "vfio bind"
	Kind    string    `json:"kind"`             // "file", "driver", ...
	Path    string    `json:"path,omitempty"`   // host path of a changed file
	Backup  string    `json:"backup,omitempty"` // host path of its backup ("" when the file was new)
	Device  string    `json:"device,omitempty"` // PCI address
	Before  string    `json:"before,omitempty"` // e.g. previous driver
	After   string    `json:"after,omitempty"`
	// Wrote is what a file change left at Path: Hash of the content gpuprep
	// wrote, or Absent when it removed the file. Rollback compares it with
	// the file's content then, so that it does not undo edits made since.
	// Entries written before gpuprep recorded it have none.
	Wrote string `json:"wrote,omitempty"`
}

// record is an Entry as a journal line: with the version of the record
// (Version, "v"), which the journals of a gpuprep from before records had
// one lack (0): their fields mean the same.
type record struct {
	V int `json:"v,omitempty"`
	Entry
}

// Append adds e to the journal.
func Append(root *host.Root, e Entry) error {
	if err := root.MkdirAll(Dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	p, err := root.Path(Path)
	if err != nil {
		return err
	}
	line, err := json.Marshal(record{V: Version, Entry: e})
	if err != nil {
		return err
	}
	_, statErr := os.Lstat(p)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) { // made now: its directory entry too must reach the disk
		if err := root.SyncDir(Dir); err != nil {
			_ = f.Close() // the error is the SyncDir's
			return fmt.Errorf("journal: %w", err)
		}
	}
	rec := append(line, '\n')
	// a crash mid-append leaves a torn last line without its newline: end it
	// first, so this entry does not merge with it
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		var last [1]byte
		if r, err := os.Open(p); err == nil {
			if _, err := r.ReadAt(last[:], st.Size()-1); err == nil && last[0] != '\n' {
				rec = append([]byte{'\n'}, rec...)
			}
			_ = r.Close() // only read
		}
	}
	if _, err := f.Write(rec); err != nil {
		_ = f.Close() // the error is the write's
		return fmt.Errorf("journal %s: %w", Path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the error is the sync's
		return err
	}
	return f.Close()
}

// Read returns every entry in order. A torn (unparseable) line is skipped
// and reported in the returned error along with the entries that parsed.
func Read(root *host.Root) ([]Entry, error) {
	f, err := root.Open(Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	var bad, newer []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			bad = append(bad, n)
			continue
		}
		if r.V > Version {
			newer = append(newer, n)
		}
		out = append(out, r.Entry)
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%s: unreadable lines %v skipped", Path, bad)
	}
	if len(newer) > 0 {
		// read as this version's: what they hold beyond it is not known here
		return out, fmt.Errorf("%s: lines %v were written by a newer gpuprep (record version above %d)", Path, newer, Version)
	}
	return out, nil
}
