package journal

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
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

// The kinds of file entries: an intent before a file is written (Path;
// Backup, the backup about to be made, and Before, the hash of the content
// it saves, or Before Absent for a new file; Wrote, what the write is to
// leave), and the change after it (Path, Backup, Wrote).
const (
	KindFile       = "file"
	KindFileIntent = "file-intent"
)

// KindDir is the entry written before gpuprep creates a directory that was
// not there (Path): rollback removes it again when it is empty. Written
// before the mkdir, so that a process killed in between leaves rollback
// what it needs: a directory that does not exist, or is not empty (someone
// else's files went there since), is left as it is.
const KindDir = "dir"

// Dir is the directory that holds the journal: never recorded as created
// (the journal in it stays).
const Dir = "/var/lib/gpuprep"

// MkdirAll creates the host directory p (mode 0755) and its missing
// parents through root under command, with a KindDir entry before for each
// it creates, outermost first. Dir and its parents are not recorded.
func MkdirAll(root *host.Root, p, command string, now time.Time) error {
	missing := Missing(root, p)
	if len(missing) == 0 {
		return nil
	}
	for _, d := range missing {
		if d == Dir || strings.HasPrefix(Dir, d+"/") {
			continue
		}
		if err := Append(root, Entry{Time: now.UTC(), Command: command, Kind: KindDir, Path: d}); err != nil {
			return err
		}
	}
	return root.MkdirAll(p, 0o755)
}

// Missing are the host directories MkdirAll(p) would create, outermost
// first.
func Missing(root *host.Root, p string) []string {
	var missing []string
	for d := path.Clean(p); d != "/" && d != "."; d = path.Dir(d) {
		if _, err := root.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break // there (or unreadable: root.MkdirAll says)
		}
		missing = append([]string{d}, missing...)
	}
	return missing
}

// WriteFile writes data to p through root atomically and backed up
// (host.Root.WriteFileAtomic, perm for a new file) under command, with an
// intent entry before and a file entry after: a process killed in between
// leaves rollback what it needs. Content p already has writes nothing. The
// directories it needs are made first (MkdirAll, journalled).
func WriteFile(root *host.Root, p string, data []byte, perm fs.FileMode, command string, now time.Time) (host.WriteResult, error) {
	old, err := root.ReadFile(p)
	if err == nil && string(old) == string(data) {
		return host.WriteResult{}, nil
	}
	if err := MkdirAll(root, path.Dir(p), command, now); err != nil {
		return host.WriteResult{}, err
	}
	in := FileIntent(p, old, err == nil, command, Hash(data), now)
	in.Time = now.UTC()
	if err := Append(root, in); err != nil {
		return host.WriteResult{}, err
	}
	res, err := root.WriteFileAtomic(p, data, perm, now)
	if err != nil || !res.Changed {
		return res, err
	}
	return res, Append(root, Entry{Time: now.UTC(), Command: command, Kind: KindFile, Path: p, Backup: res.Backup, Wrote: Hash(data)})
}

// FileIntent is the intent entry (no Time) for replacing p under command at
// now: old is its content when existed (Backup, the backup about to be
// made; Before, the hash of what it saves: a writer killed while writing
// the backup leaves it torn, and the hash tells), else Before is Absent;
// wrote, when known, is what the change is to leave there.
func FileIntent(p string, old []byte, existed bool, command, wrote string, now time.Time) Entry {
	en := Entry{Command: command, Kind: KindFileIntent, Path: p, Wrote: wrote, Before: Absent}
	if existed {
		en.Backup, en.Before = host.BackupName(p, now), Hash(old)
	}
	return en
}

// RemoveFile removes p through root under command, backed up (its content
// saved beside it, mode kept), with an intent entry before and a file entry
// (Wrote Absent) after. It returns the backup, "" when p was not there.
func RemoveFile(root *host.Root, p, command string, now time.Time) (string, error) {
	old, err := root.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	mode := fs.FileMode(0o644)
	if fi, err := root.Stat(p); err == nil {
		mode = fi.Mode().Perm() // the backup keeps it, for whoever restores the file
	}
	bak := host.BackupName(p, now)
	if err := Append(root, Entry{Time: now.UTC(), Command: command, Kind: KindFileIntent, Path: p, Backup: bak, Before: Hash(old), Wrote: Absent}); err != nil {
		return "", err
	}
	if _, err := root.WriteBackup(p, old, mode, now); err != nil {
		return "", err
	}
	if err := root.RemoveFile(p); err != nil {
		return bak, fmt.Errorf("remove %s: %w", p, err) // it may be gone all the same (a sync failed)
	}
	return bak, Append(root, Entry{Time: now.UTC(), Command: command, Kind: KindFile, Path: p, Backup: bak, After: "removed", Wrote: Absent})
}

// Absent is Entry.Wrote (and a file intent's Before) for a file that is not there.
const Absent = "absent"

// Hash is the "sha256:HEX" of b that Entry.Wrote and a file intent's Before hold.
func Hash(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
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
