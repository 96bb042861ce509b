package vgpu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpuprep/gpuprep/internal/host"
)

// InstallerScratch is where, under the root, the .run that the install
// runs is copied first: a directory only root may write, so that the file
// checked is the file run (see verifiedCopy).
const InstallerScratch = "/var/lib/gpuprep/installer"

// verifiedCopy copies the file at src into InstallerScratch/<want>/<base>
// in root (made 0700 and checked, with every directory above it, to be
// this user's or root's and writable by no one else: see privateDir),
// hashing the bytes as they are written, and returns the copy's
// path when their SHA-256 is want: a file swapped or changed after
// InspectDriver read it is never run. done removes the copy.
func verifiedCopy(src, want string, root *host.Root) (copyPath string, done func(), err error) {
	if want == "" {
		return "", nil, errors.New("the driver was not hashed when it was checked")
	}
	if err := privateDir(root, InstallerScratch); err != nil {
		return "", nil, err
	}
	dir, err := root.Path(InstallerScratch)
	if err != nil {
		return "", nil, err
	}
	sub := filepath.Join(dir, want)
	if err := os.RemoveAll(sub); err != nil { // a copy left by a killed install
		return "", nil, err
	}
	if err := os.Mkdir(sub, 0o700); err != nil {
		return "", nil, err
	}
	done = func() { _ = os.RemoveAll(sub) }
	copyPath = filepath.Join(sub, filepath.Base(src))
	got, err := copyHashing(src, copyPath)
	if err != nil {
		done()
		return "", nil, err
	}
	if got != want {
		done()
		return "", nil, fmt.Errorf("%s changed since it was checked (SHA-256 %s then, %s now): not run", src, want, got)
	}
	return copyPath, done, nil
}

// copyHashing copies src to the new file dst (0700) and returns the
// SHA-256 of the bytes written, which are on disk when it returns.
func copyHashing(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, sum), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("copying %s: %w", src, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// privateDir makes the host directory p in root (0700) when missing and
// checks that it is a directory, not a symlink, owned by this user and
// writable by no one else, and that every directory above it, on the path
// as given and resolved, is root's or this user's and writable by no one
// else (host.SafePath): nobody else can put another file where the copy
// goes, nor rename a directory above it away.
func privateDir(root *host.Root, p string) error {
	if err := root.SafePath(p, rootOwners(), true, false); err != nil {
		return err
	}
	made, err := root.Path(p) // on this machine, links in the root resolved in it
	if err != nil {
		return err
	}
	if err := os.MkdirAll(made, 0o700); err != nil {
		return err
	}
	if err := root.SafePath(p, rootOwners(), false, false); err != nil {
		return err
	}
	dir, err := root.PathNoFollow(p)
	if err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("%s: not a directory", dir)
	case !ok || int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("%s: not owned by this user", dir)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s: writable by others (mode %v)", dir, st.Mode().Perm())
	}
	return nil
}
