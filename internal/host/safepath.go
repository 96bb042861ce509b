package host

import (
	"fmt"
	"path"
	"strconv"
)

// A file that root runs or installs is only as safe as the directories
// above it: whoever can write one of them can rename the file or a
// directory away and put their own. So, as OpenSSH's StrictModes does for
// authorized_keys (safe_path() in openssh-portable's auth.c: "all
// components of the path to the file must be owned by either the owner of
// the file or root and no directories must be group or world writable"),
// the file and every directory from it up to / must be owned by an allowed
// owner, with (mode & 022) == 0. A symbolic link on the way is replaced by
// whoever can write the directory holding it, so both the path as given
// (the link's directory is the next component) and the resolved one are
// checked.

// PathEntry is one component of a path as lstat saw it.
type PathEntry struct {
	Path    string
	Missing bool
	UID     uint32
	User    string // the owner's name, when known
	Mode    uint32 // st_mode: type and permission bits
}

// The st_mode type bits JudgePath tells apart.
const (
	sIFMT  = 0o170000
	sIFLNK = 0o120000
	sIFREG = 0o100000
	sIFDIR = 0o040000
)

// UnsafePathError says which component of a path makes it unsafe and why.
type UnsafePathError struct {
	Path, Why string
}

func (e *UnsafePathError) Error() string { return e.Path + " " + e.Why }

// Owners says who may own the components of a safe path: Allow tells a uid
// apart, Name words it for an error ("root or the login user"). Sticky
// also accepts a directory writable by all when it is sticky and owned by
// an allowed owner (/tmp): there only an entry's owner may rename or
// remove it, and the entry below is checked in turn. OpenSSH's safe_path
// has no such case; a temporary directory needs it.
type Owners struct {
	Allow  func(uint32) bool
	Name   string
	Sticky bool
}

const sISVTX = 0o1000 // st_mode's sticky bit

// JudgePath applies the rules to the entries of one path, the file first.
// Missing entries are allowed only at the deep end (what gpuprep creates
// itself) when missingOK. file: entries[0] is the file (else a directory).
func JudgePath(entries []PathEntry, owners Owners, missingOK, file bool) error {
	for i, e := range entries {
		switch {
		case e.Missing:
			if !missingOK || i > 0 && !entries[i-1].Missing {
				return &UnsafePathError{Path: e.Path, Why: "is missing from the resolved path"}
			}
			continue
		case i == 0 && file:
			if err := judgeFile(e); err != nil {
				return err
			}
		case e.Mode&sIFMT == sIFLNK:
			continue // its directory (the next entry) decides who can change it
		}
		if err := judgeOwner(e, owners); err != nil {
			return err
		}
	}
	return nil
}

// judgeFile refuses e, the file to run, unless it is a regular file (a
// symbolic link to one is not).
func judgeFile(e PathEntry) error {
	switch {
	case e.Mode&sIFMT == sIFLNK:
		return &UnsafePathError{Path: e.Path, Why: "is a symbolic link; gpuprep runs only a file that is not one"}
	case e.Mode&sIFMT != sIFREG:
		return &UnsafePathError{Path: e.Path, Why: "is not a regular file"}
	}
	return nil
}

// judgeOwner refuses e unless owners own it and no one else can write it
// (a sticky directory aside, where owners allow it).
func judgeOwner(e PathEntry, owners Owners) error {
	if !owners.Allow(e.UID) {
		return &UnsafePathError{Path: e.Path, Why: fmt.Sprintf("belongs to %s, not to %s", ownerString(e), owners.Name)}
	}
	if e.Mode&0o022 != 0 && !(owners.Sticky && e.Mode&sIFMT == sIFDIR && e.Mode&sISVTX != 0) {
		return &UnsafePathError{Path: e.Path, Why: fmt.Sprintf("is writable by its group or by others (mode %04o, owner %s)", e.Mode&0o7777, ownerString(e))}
	}
	return nil
}

func ownerString(e PathEntry) string {
	if e.User != "" && e.User != "UNKNOWN" {
		return fmt.Sprintf("%s (uid %d)", e.User, e.UID)
	}
	return "uid " + strconv.FormatUint(uint64(e.UID), 10)
}

// Components lists p (cleaned, absolute) and each directory above it, up
// to /.
func Components(p string) []string {
	p = path.Clean(p)
	out := []string{p}
	for p != "/" {
		p = path.Dir(p)
		out = append(out, p)
	}
	return out
}
