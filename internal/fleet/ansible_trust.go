package fleet

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpuprep/gpuprep/internal/host"
)

// maxTrustEntries bounds the walk of an inventory directory.
const maxTrustEntries = 10000

// checkAnsibleInventory refuses, before ansible-inventory runs as root, an
// inventory someone else could have changed: ansible-inventory runs its
// executable files (the script plugin) and plugin configurations as the
// user gpuprep runs as, so, as for the fleet's own cache (safepath.go:
// OpenSSH's safe_path rules), the inventory path and every directory above
// it, and in an inventory directory each executable file and directory in
// it, must be owned by root or this user and writable by no one else. Only
// as root: a user running gpuprep runs no more than they could themselves.
func checkAnsibleInventory(file string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	me := uint32(os.Getuid())
	owners := func(uid uint32) bool { return uid == 0 || uid == me }
	file, err := filepath.Abs(file) // host.Components walks an absolute path up to /
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	if err := checkChain(file, owners, !st.IsDir()); err != nil {
		return err
	}
	n := 0
	return filepath.WalkDir(file, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxTrustEntries {
			return &UnsafePathError{Path: file, Why: "holds more than 10000 entries: not checked whole"}
		}
		if p == file {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			return checkChain(p, owners, false)
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0:
			return checkChain(p, owners, true) // Ansible runs it
		}
		return nil
	})
}

// checkChain applies the rules to p (a file, or a directory) and every
// directory above it, as given and resolved. A root-owned sticky directory
// on the way (/tmp) is passed over: no one but root and the owner of an
// entry in it can rename or remove that entry, so it is the entry below it
// that must be safe (OpenSSH's safe_path has no such case: keys do not live
// in /tmp; inventories may).
func checkChain(p string, owners func(uint32) bool, file bool) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return &UnsafePathError{Path: p, Why: "cannot be resolved: " + err.Error()}
	}
	for _, q := range []string{filepath.Clean(p), real} {
		var entries []pathEntry
		for _, c := range host.Components(q) {
			fi, err := os.Lstat(c)
			if err != nil {
				return &UnsafePathError{Path: c, Why: "cannot be checked: " + err.Error()}
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return &UnsafePathError{Path: c, Why: "has no owner to check"}
			}
			if len(entries) > 0 && fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && st.Uid == 0 {
				continue
			}
			entries = append(entries, pathEntry{path: c, uid: st.Uid, mode: st.Mode})
		}
		if err := judgePath(entries, owners, false, file); err != nil {
			return err
		}
	}
	return nil
}
