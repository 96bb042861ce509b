package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The kinds of file entries: an intent before a file is written, and the
// change after it (FileRecord says what their fields hold).
const (
	KindFile       = "file"
	KindFileIntent = "file-intent"
)

// FileRecord is a KindFileIntent or KindFile entry: a change of the file
// Path (Path). Backup (Backup): where the content before the change is
// saved (on an intent, the backup about to be made); "" when the file was
// not there. Before (Before, on an intent only): the hash of that content
// (Hash), Absent for a file not there: a writer killed while writing the
// backup leaves it torn, and the hash tells. Wrote (Wrote): what the
// change leaves at Path, the Hash of the content written or Absent for a
// file removed; "" where it is not known (an intent whose writer does not
// know it beforehand, or an entry from before gpuprep recorded it).
// Removed (After "removed", on a KindFile entry only): the change removed
// the file, as every version has said it besides Wrote.
type FileRecord struct {
	Path, Backup, Before, Wrote string
	Removed                     bool
}

// removed is a KindFile entry's After for a file removed.
const removed = "removed"

// File is en's file payload.
func (en Entry) File() FileRecord {
	return FileRecord{Path: en.Path, Backup: en.Backup, Before: en.Before, Wrote: en.Wrote, Removed: en.After == removed}
}

// Intent is r as the KindFileIntent entry command appends before the
// change (Removed is not recorded there).
func (r FileRecord) Intent(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindFileIntent, Path: r.Path, Backup: r.Backup, Before: r.Before, Wrote: r.Wrote}
}

// Done is r as the KindFile entry command appends once the change is made
// (Before is not recorded there).
func (r FileRecord) Done(command string, now time.Time) Entry {
	en := Entry{Time: now.UTC(), Command: command, Kind: KindFile, Path: r.Path, Backup: r.Backup, Wrote: r.Wrote}
	if r.Removed {
		en.After = removed
	}
	return en
}

// Gone reports whether the change left no file at Path: Wrote Absent, or
// Removed (an entry from before gpuprep recorded Wrote).
func (r FileRecord) Gone() bool { return r.Wrote == Absent || r.Removed }

// BackedUp is the hash the backup of an intent is to hold ("": r records
// none, the file was new or the entry is not an intent).
func (r FileRecord) BackedUp() string {
	if r.Backup == "" || !strings.HasPrefix(r.Before, "sha256:") {
		return ""
	}
	return r.Before
}

// ReplaceIntent is the intent record for replacing p at now: old is its
// content when existed (Backup, the backup about to be made; Before, the
// hash of what it saves), else Before is Absent; wrote, when known, is
// what the change is to leave there.
func ReplaceIntent(p string, old []byte, existed bool, wrote string, now time.Time) FileRecord {
	r := FileRecord{Path: p, Wrote: wrote, Before: Absent}
	if existed {
		r.Backup, r.Before = host.BackupName(p, now), Hash(old)
	}
	return r
}

// FileIntent is the intent entry (no Time) for replacing p under command at
// now: ReplaceIntent's record as an entry.
func FileIntent(p string, old []byte, existed bool, command, wrote string, now time.Time) Entry {
	en := ReplaceIntent(p, old, existed, wrote, now).Intent(command, now)
	en.Time = time.Time{}
	return en
}

// KindDir is the entry written before gpuprep creates a directory that was
// not there (DirRecord): rollback removes it again when it is empty.
// Written before the mkdir, so that a process killed in between leaves
// rollback what it needs: a directory that does not exist, or is not
// empty (someone else's files went there since), is left as it is.
const KindDir = "dir"

// DirRecord is a KindDir entry: the directory Path (Path) about to be
// created.
type DirRecord struct {
	Path string
}

// Dir is en's directory payload.
func (en Entry) Dir() DirRecord { return DirRecord{Path: en.Path} }

// Entry is r as the entry command appends before the mkdir.
func (r DirRecord) Entry(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindDir, Path: r.Path}
}

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
		if err := Append(root, DirRecord{Path: d}.Entry(command, now)); err != nil {
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
	if err := Append(root, ReplaceIntent(p, old, err == nil, Hash(data), now).Intent(command, now)); err != nil {
		return host.WriteResult{}, err
	}
	res, err := root.WriteFileAtomic(p, data, perm, now)
	if err != nil || !res.Changed {
		return res, err
	}
	return res, Append(root, FileRecord{Path: p, Backup: res.Backup, Wrote: Hash(data)}.Done(command, now))
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
	rec := FileRecord{Path: p, Backup: host.BackupName(p, now), Before: Hash(old), Wrote: Absent, Removed: true}
	if err := Append(root, rec.Intent(command, now)); err != nil {
		return "", err
	}
	if _, err := root.WriteBackup(p, old, mode, now); err != nil {
		return "", err
	}
	if err := root.RemoveFile(p); err != nil {
		return rec.Backup, fmt.Errorf("remove %s: %w", p, err) // it may be gone all the same (a sync failed)
	}
	return rec.Backup, Append(root, rec.Done(command, now))
}

// Absent is a file record's Wrote (and an intent's Before) for a file that
// is not there.
const Absent = "absent"

// Hash is the "sha256:HEX" of b that a file record's Wrote and an intent's
// Before hold.
func Hash(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}
