package fleet

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The fleet runs, as root, files kept in the login user's cache on each host
// (the binary, a driver installer, a config file). A file there is only as
// safe as the directories above it: whoever can write one of them can swap
// the file between its hash and its use. So, as OpenSSH's StrictModes does
// for authorized_keys (safe_path() in openssh-portable's auth.c: "all
// components of the path to the file must be owned by either the owner of
// the file or root and no directories must be group or world writable"),
// the file and every directory from it up to / must be owned by root or the
// login user, with (mode & 022) == 0. Such a chain cannot be changed by any
// other non-root user, so once it is verified it stays safe for as long as
// the login user and root keep it so. OpenSSH checks the path realpath()
// resolves; a symbolic link on the way is also replaced by whoever can write
// the directory holding it, so both the path as given (symbolic links not
// followed: the link's directory is the next component) and the resolved
// one are checked. The file itself must be a regular file, not a link.

// pathEntry is one component of a path as stat saw it.
type pathEntry struct {
	path    string
	missing bool
	uid     uint32
	user    string // the owner's name, when known
	mode    uint32 // st_mode: type and permission bits
}

// UnsafePathError says which component of a path makes it unsafe and why.
type UnsafePathError = host.UnsafePathError

// loginOwners words the fleet's owners: root and the login user.
func loginOwners(owners func(uint32) bool) host.Owners {
	return host.Owners{Allow: owners, Name: "root or the login user"}
}

// judgePath applies the rules (host.JudgePath) to the entries of one path,
// the file first. owners are the uids allowed to own them (root and the
// login user). Missing entries are allowed only at the deep end (what
// gpuprep creates itself, under umask 077) when missingOK. file:
// entries[0] is the file (else a directory).
func judgePath(entries []pathEntry, owners func(uint32) bool, missingOK, file bool) error {
	out := make([]host.PathEntry, len(entries))
	for i, e := range entries {
		out[i] = host.PathEntry{Path: e.path, Missing: e.missing, UID: e.uid, User: e.user, Mode: e.mode}
	}
	return host.JudgePath(out, loginOwners(owners), missingOK, file)
}

// checkLocalPath applies the rules to file on this machine (lstat of each
// component, no fork): the path as given, then the resolved one.
func checkLocalPath(file string, owners func(uint32) bool) error {
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		return &UnsafePathError{Path: file, Why: "cannot be resolved: " + err.Error()}
	}
	for _, p := range [][]string{host.Components(file), host.Components(real)} {
		entries := make([]pathEntry, 0, len(p))
		for _, c := range p {
			fi, err := os.Lstat(c)
			if err != nil {
				return &UnsafePathError{Path: c, Why: "cannot be checked: " + err.Error()}
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return &UnsafePathError{Path: c, Why: "has no owner to check"}
			}
			entries = append(entries, pathEntry{path: c, uid: st.Uid, mode: st.Mode})
		}
		if err := judgePath(entries, owners, false, true); err != nil {
			return err
		}
	}
	return nil
}
