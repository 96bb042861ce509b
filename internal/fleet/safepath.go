package fleet

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
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

const (
	sIFMT  = 0o170000
	sIFLNK = 0o120000
	sIFREG = 0o100000
)

// UnsafePathError says which component of a path makes it unsafe and why.
type UnsafePathError struct {
	Path, Why string
}

func (e *UnsafePathError) Error() string { return e.Path + " " + e.Why }

// judgePath applies the rules to the entries of one path, the file first.
// owners are the uids allowed to own them (root and the login user).
// Missing entries are allowed only at the deep end (what gpuprep creates
// itself, under umask 077) when missingOK. file: entries[0] is the file
// (else a directory).
func judgePath(entries []pathEntry, owners func(uint32) bool, missingOK, file bool) error {
	for i, e := range entries {
		switch {
		case e.missing:
			if !missingOK || i > 0 && !entries[i-1].missing {
				return &UnsafePathError{e.path, "is missing from the resolved path"}
			}
			continue
		case i == 0 && file && e.mode&sIFMT == sIFLNK:
			return &UnsafePathError{e.path, "is a symbolic link; gpuprep runs only a file that is not one"}
		case i == 0 && file && e.mode&sIFMT != sIFREG:
			return &UnsafePathError{e.path, "is not a regular file"}
		case e.mode&sIFMT == sIFLNK:
			continue // its directory (the next entry) decides who can change it
		}
		if !owners(e.uid) {
			return &UnsafePathError{e.path, fmt.Sprintf("belongs to %s, not to root or the login user", ownerString(e))}
		}
		if e.mode&0o022 != 0 {
			return &UnsafePathError{e.path, fmt.Sprintf("is writable by its group or by others (mode %04o, owner %s)", e.mode&0o7777, ownerString(e))}
		}
	}
	return nil
}

func ownerString(e pathEntry) string {
	if e.user != "" && e.user != "UNKNOWN" {
		return fmt.Sprintf("%s (uid %d)", e.user, e.uid)
	}
	return "uid " + strconv.FormatUint(uint64(e.uid), 10)
}

// components lists p (cleaned, absolute) and each directory above it, up
// to /.
func components(p string) []string {
	p = path.Clean(p)
	out := []string{p}
	for p != "/" {
		p = path.Dir(p)
		out = append(out, p)
	}
	return out
}

// checkLocalPath applies the rules to file on this machine (lstat of each
// component, no fork): the path as given, then the resolved one.
func checkLocalPath(file string, owners func(uint32) bool) error {
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		return &UnsafePathError{file, "cannot be resolved: " + err.Error()}
	}
	for _, p := range [][]string{components(file), components(real)} {
		entries := make([]pathEntry, 0, len(p))
		for _, c := range p {
			fi, err := os.Lstat(c)
			if err != nil {
				return &UnsafePathError{c, "cannot be checked: " + err.Error()}
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return &UnsafePathError{c, "has no owner to check"}
			}
			entries = append(entries, pathEntry{path: c, uid: st.Uid, mode: st.Mode})
		}
		if err := judgePath(entries, owners, false, true); err != nil {
			return err
		}
	}
	return nil
}
