package host

import (
	"errors"
	"io/fs"
	"path"
	"syscall"
)

// SafePath checks the host path p in r by JudgePath's rules: p as given,
// then p with every symbolic link resolved, each component from p up to
// the root's /. Components that do not exist yet are allowed at the deep
// end when missingOK (what the caller makes itself); file says p is a file
// (a regular one, not a link) rather than a directory.
func (r *Root) SafePath(p string, owners Owners, missingOK, file bool) error {
	p = path.Clean("/" + p)
	given, err := r.pathEntries(p)
	if err != nil {
		return err
	}
	if err := JudgePath(given, owners, missingOK, file); err != nil {
		return err
	}
	real, err := r.realExisting(p)
	if err != nil {
		return err
	}
	resolved, err := r.pathEntries(real)
	if err != nil {
		return err
	}
	return JudgePath(resolved, owners, missingOK, file)
}

// pathEntries lstats p and each directory above it.
func (r *Root) pathEntries(p string) ([]PathEntry, error) {
	var out []PathEntry
	for _, c := range Components(p) {
		fi, err := r.Lstat(c)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, PathEntry{Path: c, Missing: true})
			continue
		case err != nil:
			return nil, &UnsafePathError{Path: c, Why: "cannot be checked: " + err.Error()}
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, &UnsafePathError{Path: c, Why: "has no owner to check"}
		}
		out = append(out, PathEntry{Path: c, UID: st.Uid, Mode: st.Mode})
	}
	return out, nil
}

// realExisting resolves the deepest component of p that exists and puts
// the missing rest back after it.
func (r *Root) realExisting(p string) (string, error) {
	tail := ""
	for q := p; ; q = path.Dir(q) {
		if _, err := r.Lstat(q); err == nil || q == "/" {
			real, err := r.Realpath(q)
			if err != nil {
				return "", &UnsafePathError{Path: q, Why: "cannot be resolved: " + err.Error()}
			}
			return path.Join(real, tail), nil
		}
		tail = path.Join(path.Base(q), tail)
	}
}
