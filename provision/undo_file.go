package provision

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// removeCreatedDir removes d, a directory gpuprep created (a journal.KindDir
// entry), when it is empty. One that is gone, or holds anything now
// (someone else's files, or a backup rollback saved there), is left as it
// is, said in a note.
// left says it is there still, holding something: a later rollback tries
// again.
func removeCreatedDir(e effect.Effector, d string, res *RollbackResult) (left bool, err error) {
	fi, err := e.Root.Lstat(d)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: %w", d, err)
	case !fi.IsDir():
		res.Notes = append(res.Notes, fmt.Sprintf("%s: gpuprep created it as a directory; not one now: left as it is", d))
		return false, nil
	}
	if names := e.Root.Names(d); len(names) > 0 {
		msg := fmt.Sprintf("%s: left (gpuprep created it; it holds %s now)", d, strings.Join(names, ", "))
		e.Logf("%s", msg)
		res.Notes = append(res.Notes, msg)
		return true, nil
	}
	if err := e.Root.RemoveDir(d); err != nil {
		return false, fmt.Errorf("remove %s: %w", d, err)
	}
	e.Logf("%s: removed (gpuprep created it; empty)", d)
	res.Undone = append(res.Undone, Undo{Kind: "dir", Target: d, Action: "removed (gpuprep created it; empty)"})
	return false, nil
}

// isUnit reports whether p is a systemd unit file gpuprep writes.
func isUnit(p string) bool {
	return strings.HasPrefix(p, "/etc/systemd/system/") && (strings.HasSuffix(p, ".service") || strings.HasSuffix(p, ".timer"))
}

// fileUndo is what rollback does with one file gpuprep changed.
type fileUndo struct {
	path    string
	action  string // "" nothing to do, "remove" (gpuprep created it), "restore"
	from    string // restore: the backup with the content before gpuprep
	data    []byte // its content
	save    bool   // remove: save the content found there first
	note    string // said when done
	problem string // why it is not undone (nor recorded undone)
}

// planFileUndo decides, from a file's entries in range (oldest first), what
// rollback does with it. The content before gpuprep is that of the first
// entry that says the file was new or whose backup is whole; an intent
// whose backup is torn or missing, and whose change did not happen, was
// interrupted before the file changed, so a later entry backs up the same
// content. A change that happened and whose backup is gone (or no longer
// holds what it backed up) cannot be undone: the file is left as it is. A
// file already as it was before gpuprep is left alone (an earlier rollback
// that failed further on restored it). Otherwise the file must still hold
// what gpuprep last wrote there (journal.FileRecord.Wrote): an edit made since
// is not undone unless force, and then saved first. Entries from before
// gpuprep recorded what it wrote cannot tell: the file is restored as
// before, its content saved, with a note.
func planFileUndo(e effect.Effector, entries []journal.Entry, idx []int, force bool) fileUndo {
	p := entries[idx[0]].File().Path
	u := fileUndo{path: p}
	curHash, err := currentHash(e, p)
	if err != nil {
		u.problem = fmt.Sprintf("%s: %v", p, err)
		return u
	}
	o, found := findOrigin(e, entries, idx, curHash)
	if !found {
		return u // no change of it happened
	}
	if o.hash != "" && curHash == o.hash {
		return u // as it was before gpuprep
	}
	last := entries[idx[len(idx)-1]]
	lf := last.File()
	known := lf.Wrote != ""
	asLeft := curHash == lf.Wrote || last.Kind == KindFileIntent && curHash == lf.Before
	if o.missing != "" {
		u.problem = missingBackup(p, o, asLeft, known)
		return u
	}
	changed := known && !asLeft
	if changed && !force {
		u.problem = changedSince(p, o)
		return u
	}
	u.note = undoNote(changed, known, asLeft)
	if o.created {
		u.action, u.save = "remove", u.note != ""
	} else {
		u.action, u.from, u.data = "restore", o.from, o.data
	}
	return u
}

// currentHash is the hash of file p's content now (journal.Absent: there
// is none).
func currentHash(e effect.Effector, p string) (string, error) {
	cur, err := e.Root.ReadFile(p)
	switch {
	case err == nil:
		return journal.Hash(cur), nil
	case errors.Is(err, fs.ErrNotExist):
		return journal.Absent, nil
	}
	return "", err
}

// changedSince is why file p, edited since gpuprep last wrote it, is not
// undone without --force-files.
func changedSince(p string, o fileOrigin) string {
	if o.created {
		return fmt.Sprintf("%s: changed since gpuprep created it: not removed; remove it by hand, or pass --force-files (its content is saved first)", p)
	}
	return fmt.Sprintf("%s: changed since gpuprep wrote it: not restored; restore it by hand from %s, or pass --force-files (its content is saved first)", p, o.from)
}

// undoNote is the note on undoing a file changed since (force), or one
// whose entries do not record what gpuprep wrote; "" for neither.
func undoNote(changed, known, asLeft bool) string {
	switch {
	case changed:
		return "changed since gpuprep wrote it: undone anyway (--force-files)"
	case !known && !asLeft:
		return "the journal does not record what gpuprep wrote there (an older gpuprep, or an interrupted change): undone without checking for edits made since"
	}
	return ""
}

// fileOrigin is a file's content before gpuprep, as its entries in range
// and their backups say.
type fileOrigin struct {
	created bool   // gpuprep created it
	hash    string // its content's hash (journal.Absent: created)
	from    string // the backup that holds it
	data    []byte
	missing string // why the backup of a change that happened cannot give it
}

// findOrigin finds the content before gpuprep of the file of entries idx
// (oldest first), which now hashes curHash: that of the first entry that
// says the file was new or whose backup is whole; found false, no change
// of it happened.
func findOrigin(e effect.Effector, entries []journal.Entry, idx []int, curHash string) (o fileOrigin, found bool) {
	done, backedUp := fileBackups(entries, idx)
	for _, i := range idx {
		en, f := entries[i], entries[i].File()
		if f.Backup == "" {
			return fileOrigin{created: true, hash: journal.Absent}, true
		}
		happened := done[f.Backup] || en.Kind == KindFileIntent && f.Wrote != "" && f.Wrote != f.Before && curHash == f.Wrote
		want := backedUp[f.Backup]
		b, err := e.Root.ReadFile(f.Backup)
		switch {
		case err == nil && (want == "" || journal.Hash(b) == want):
			return fileOrigin{data: b, from: f.Backup, hash: journal.Hash(b)}, true
		case !happened:
			continue
		case err != nil:
			o = fileOrigin{missing: fmt.Sprintf("its backup %s is missing", f.Backup), hash: want}
			if !errors.Is(err, fs.ErrNotExist) {
				o.missing = fmt.Sprintf("its backup %s cannot be read (%v)", f.Backup, err)
			}
			return o, true
		default:
			return fileOrigin{missing: fmt.Sprintf("its backup %s no longer holds the content it backed up (%s)", f.Backup, want), hash: want}, true
		}
	}
	return fileOrigin{}, false
}

// fileBackups are the backups of changes that happened ("file" entries)
// and the hash each intent announced for its backup.
func fileBackups(entries []journal.Entry, idx []int) (done map[string]bool, backedUp map[string]string) {
	done, backedUp = map[string]bool{}, map[string]string{}
	for _, i := range idx {
		en, f := entries[i], entries[i].File()
		if en.Kind == journal.KindFile && f.Backup != "" {
			done[f.Backup] = true
		}
		if h := f.BackedUp(); en.Kind == KindFileIntent && h != "" {
			backedUp[f.Backup] = h
		}
	}
	return done, backedUp
}

// missingBackup is why file p, changed by gpuprep, cannot be restored: the
// backup o names is missing or no longer whole.
func missingBackup(p string, o fileOrigin, asLeft, known bool) string {
	state := "changed since gpuprep wrote it"
	switch {
	case asLeft:
		state = "as gpuprep left it"
	case !known:
		state = "the journal does not record what gpuprep wrote"
	}
	msg := fmt.Sprintf("%s: cannot restore it: %s; the file is left as it is (%s): put the backup back and run rollback again", p, o.missing, state)
	if o.hash != "" {
		msg += fmt.Sprintf(", or restore the file's content from before gpuprep (%s) by hand", o.hash)
	}
	return msg
}

// do carries u out. It records in saved where it saved what a file held.
func (u fileUndo) do(e effect.Effector, res *RollbackResult, saved map[string]string) error {
	p := u.path
	defer removeStaleTemps(e.Root, p)
	if u.problem != "" {
		return errors.New(u.problem)
	}
	now := utcNow(e)
	switch u.action {
	case "remove":
		cur, err := e.Root.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		how, bak := "removed (gpuprep created it)", ""
		if u.save {
			perm := os.FileMode(0o600)
			if fi, err := e.Root.Stat(p); err == nil {
				perm = fi.Mode().Perm()
			}
			if bak, err = e.Root.WriteBackup(p, cur, perm, now); err != nil {
				return fmt.Errorf("%s: save its content before removing it: %w", p, err)
			}
			how += "; what it held is saved in " + bak
		}
		if err := e.Root.RemoveFile(p); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		u.report(e, res, saved, how, bak)
	case "restore":
		perm := os.FileMode(0o644)
		if fi, err := e.Root.Stat(u.from); err == nil {
			perm = fi.Mode().Perm()
		}
		wr, err := e.Root.WriteFileAtomic(p, u.data, perm, now)
		if err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		how := "restored from " + u.from
		if wr.Backup != "" {
			how += "; what it held is saved in " + wr.Backup
		}
		u.report(e, res, saved, how, wr.Backup)
	}
	return nil
}

func (u fileUndo) report(e effect.Effector, res *RollbackResult, saved map[string]string, how, bak string) {
	if u.note != "" {
		res.Notes = append(res.Notes, u.path+": "+u.note+" ("+how+")")
	}
	if bak != "" {
		saved[u.path] = bak
	}
	e.Logf("%s: %s", u.path, how)
	res.Undone = append(res.Undone, Undo{Kind: "file", Target: u.path, Action: how, Backup: bak})
}
