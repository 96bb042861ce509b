package host

import (
	"io/fs"
	"os"
	"path/filepath"
)

// ReplaceFile writes the host file p atomically, without a backup, for a
// file gpuprep regenerates whole (a Node Feature Discovery feature file):
// data goes to a dot-named temporary file beside p, is fsynced and renamed
// over p, and the directory fsynced. Readers that skip dot files (NFD's
// local source does) see only the old or the new file, never a part or a
// backup. It reports whether p changed.
func (r *Root) ReplaceFile(p string, data []byte, perm fs.FileMode) (bool, error) {
	if err := r.Writable(p); err != nil {
		return false, err
	}
	rp, err := r.PathNoFollow(p)
	if err != nil {
		return false, err
	}
	if fi, err := os.Lstat(rp); err == nil && !fi.Mode().IsRegular() {
		return false, &fs.PathError{Op: "replace", Path: p, Err: fs.ErrInvalid}
	}
	if old, err := os.ReadFile(rp); err == nil && string(old) == string(data) {
		return false, nil
	}
	dir := filepath.Dir(rp)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(rp)+".gpuprep-tmp-*")
	if err != nil {
		return false, err
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }() // gone after the rename; the leftover otherwise
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close() // removed: the error is the one before
		return false, err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close() // removed: the error is the one before
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close() // removed: the error is the one before
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(name, rp); err != nil {
		return false, err
	}
	return true, syncDir(dir)
}
