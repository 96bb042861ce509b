// Package change is gpuprep's one vocabulary for a change to a host: a
// file that changes (File), as every planner returns it and every writer
// takes it.
package change

import (
	"errors"
	"io/fs"

	"github.com/gpuprep/gpuprep/internal/diff"
	"github.com/gpuprep/gpuprep/internal/host"
)

// File is one change to one file under the root: what the file holds
// before and what it is to hold. The JSON fields are those of a plan's
// file (gpuprep plan -o json).
type File struct {
	Path string `json:"path"`
	// Created: the file is not there before the change (Old nil).
	Created bool `json:"new,omitempty"`
	// Removed: the change removes the file (New nil).
	Removed bool `json:"remove,omitempty"`
	// Diff is the change as a unified diff (diff -u, the file not there
	// diffed from /dev/null), as plan and --dry-run show it.
	Diff string `json:"diff"`
	// Old is the content before, New the content after.
	Old []byte `json:"-"`
	New []byte `json:"-"`
	// Mode is the permissions a new file gets; 0 is 0644.
	Mode fs.FileMode `json:"-"`

	// What a writer that applied the change says it did (vfio.Result):
	// Backup, where it saved Old ("" for a new file); Made, the
	// directories it created for a new file, outermost first.
	Backup string   `json:"-"`
	Made   []string `json:"-"`
}

// Between is the change of path from old (existed: the file is there) to
// new; new nil removes the file.
func Between(path string, old []byte, existed bool, new []byte) File {
	if !existed {
		old = nil
	}
	return File{Path: path, Created: !existed, Removed: new == nil, Old: old, New: new,
		Diff: diff.Unified(path, old, new, existed)}
}

// Edit is the change of an existing file from old to new.
func Edit(path string, old, new []byte) File { return Between(path, old, true, new) }

// Against is the change that leaves path under root holding new (nil:
// removed), from what it holds now. An unreadable file (other than one
// not there) is the error.
func Against(root *host.Root, path string, new []byte) (File, error) {
	old, err := root.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return File{}, err
	}
	return Between(path, old, err == nil, new), nil
}

// Pending reports whether applying f changes anything: the content
// differs, or a file there is to be removed.
func (f File) Pending() bool {
	if f.Removed {
		return !f.Created
	}
	return f.Created || string(f.Old) != string(f.New)
}

// Perm is the permissions a new file gets.
func (f File) Perm() fs.FileMode {
	if f.Mode == 0 {
		return 0o644
	}
	return f.Mode
}
