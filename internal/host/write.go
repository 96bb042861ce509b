package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WriteAttr writes value to a sysfs attribute in a single write(2), as the
// kernel wants (a second write, e.g. a lone newline, would reset
// driver_override). It does not create the file.
func (r *Root) WriteAttr(p, value string) error {
	if err := r.Writable(p); err != nil {
		return err
	}
	rp, err := r.Path(p)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(rp, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, werr)
	}
	return cerr
}

// BackupSuffix is what backups made by WriteFileAtomic end with, after a
// timestamp: /etc/default/grub.gpuprep-20261130T111500Z.bak
const BackupSuffix = ".bak"

// WriteResult says what WriteFileAtomic did.
type WriteResult struct {
	Changed bool
	Backup  string // host path of the backup of the previous content; "" when the file was new or unchanged
}

// WriteFileAtomic replaces the host file p with data so that p is always
// either wholly old or wholly new: it writes a temporary file beside p,
// fsyncs it, gives it p's mode and owner (or perm for a new file), renames
// it over p and fsyncs the directory. When p existed and data differs, the
// old content is first saved beside it as p.gpuprep-TIMESTAMP.bak. Writing
// the content p already has changes nothing.
func (r *Root) WriteFileAtomic(p string, data []byte, perm fs.FileMode, now time.Time) (WriteResult, error) {
	var res WriteResult
	rp, err := r.writePath(p)
	if err != nil {
		return res, err
	}
	old, err := os.ReadFile(rp)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	if exists && string(old) == string(data) {
		return res, nil
	}
	if !exists {
		if err := r.refuseDanglingLink(p); err != nil {
			return res, err
		}
	}
	o := owner{mode: perm, uid: -1, gid: -1}
	if exists {
		if o, err = ownerOf(rp); err != nil {
			return res, err
		}
		bak := BackupName(p, now)
		if err := writeSynced(r.join(mustResolve(r, bak)), old, o.mode, o.uid, o.gid); err != nil {
			return res, fmt.Errorf("back up %s: %w", p, err)
		}
		res.Backup = bak
	}
	dir := filepath.Dir(rp)
	removeStaleTemps(dir, filepath.Base(rp))
	tmpName, err := writeTemp(dir, rp, path.Clean("/"+p), data, o, exists)
	if err != nil {
		return res, err
	}
	if err := os.Rename(tmpName, rp); err != nil {
		_ = os.Remove(tmpName) // the error is the one returned
		return res, err
	}
	res.Changed = true
	return res, syncDir(dir)
}

// writePath is the path WriteFileAtomic writes for the host path p, which
// must be writable: on a live root, the file a link at p leads to.
func (r *Root) writePath(p string) (string, error) {
	if err := r.Writable(p); err != nil {
		return "", err
	}
	rp, err := r.Path(p)
	if err != nil {
		return "", err
	}
	if r.live { // a fixture root's Path resolves links already
		return followLinks(rp)
	}
	return rp, nil
}

// refuseDanglingLink refuses p, not there, when it is a link that leads
// nowhere: the file it names is not gpuprep's to create.
func (r *Root) refuseDanglingLink(p string) error {
	lp, err := r.lpath(p)
	if err != nil {
		return nil
	}
	if fi, err := os.Lstat(lp); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link to no file: gpuprep neither replaces it nor creates what it names", path.Clean("/"+p))
	}
	return nil
}

// owner is the mode and owner a written file gets (uid -1: left as the
// writer's).
type owner struct {
	mode     fs.FileMode
	uid, gid int
}

// ownerOf is the mode and owner of the file at rp.
func ownerOf(rp string) (owner, error) {
	st, err := os.Stat(rp)
	if err != nil {
		return owner{}, err
	}
	o := owner{mode: st.Mode().Perm(), uid: -1, gid: -1}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		o.uid, o.gid = int(sys.Uid), int(sys.Gid)
	}
	return o, nil
}

// removeStaleTemps removes the temporary files of base in dir: a crash
// between write and rename leaves one; the original is intact, and the
// leftover goes now. (Not another run's write in progress: commands that
// write hold the host's gpuprep lock.)
func removeStaleTemps(dir, base string) {
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+base+".gpuprep-tmp-*")); len(stale) > 0 {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
}

// writeTemp writes data to a new temporary file beside rp (the host file
// name) in dir, with o's mode and owner and (keep) rp's extended
// attributes, synced and closed, and returns its name; on an error it is
// removed.
func writeTemp(dir, rp, name string, data []byte, o owner, keep bool) (string, error) {
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(rp)+".gpuprep-tmp-*")
	if err != nil {
		return "", err
	}
	if err := fillTemp(tmp, rp, name, data, o, keep); err != nil {
		_ = tmp.Close()           // removed: the error is the one before
		_ = os.Remove(tmp.Name()) // the error is the one returned
		return "", err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name()) // the error is the one returned
		return "", err
	}
	return tmp.Name(), nil
}

// fillTemp writes data to tmp, gives it o's mode and owner and (keep)
// rp's extended attributes, and syncs it.
func fillTemp(tmp *os.File, rp, name string, data []byte, o owner, keep bool) error {
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(o.mode); err != nil {
		return err
	}
	if o.uid >= 0 {
		if err := tmp.Chown(o.uid, o.gid); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	if keep {
		if err := copyXattrs(rp, tmp); err != nil {
			return fmt.Errorf("%s: keeping its extended attributes: %w", name, err)
		}
	}
	return tmp.Sync()
}

// BackupName is the backup WriteFileAtomic makes of p at now.
func BackupName(p string, now time.Time) string {
	return p + ".gpuprep-" + now.UTC().Format("20060102T150405.000000000Z") + BackupSuffix
}

// followLinks gives the file a symlink at p leads to, so that the file is
// written and the link stays (as an editor writing through it does; renaming
// onto p would replace the link with a file). A link that leads nowhere is
// returned as it is: WriteFileAtomic refuses it.
func followLinks(p string) (string, error) {
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return p, nil
	}
	if t, err := filepath.EvalSymlinks(p); err == nil {
		return t, nil
	}
	return p, nil
}

func mustResolve(r *Root, p string) string {
	if r.live {
		return p
	}
	rp, err := r.resolve(p, false)
	if err != nil {
		return p
	}
	return rp
}

// copyXattrs gives to the extended attributes of the file from: its SELinux
// label (security.selinux: /etc/default/grub is bootloader_etc_t on Red Hat
// systems, which a new file there would not be), POSIX ACLs and the rest, as
// an editor keeps them. Attributes the file system does not support, or
// that this process may not set, are left out.
func copyXattrs(from string, to *os.File) error {
	size, err := unix.Listxattr(from, nil)
	if err != nil || size == 0 {
		return nil // no extended attributes here, or none supported
	}
	buf := make([]byte, size)
	if size, err = unix.Listxattr(from, buf); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if name == "" || name == "security.ima" || name == "security.evm" {
			continue // they vouch for the old content (and inode): IMA/EVM make their own for the new
		}
		n, err := unix.Getxattr(from, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, n)
		if n, err = unix.Getxattr(from, name, val); err != nil {
			continue
		}
		err = unix.Fsetxattr(int(to.Fd()), name, val[:n], 0)
		if err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func writeSynced(path string, data []byte, mode fs.FileMode, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the error is the one before
		return err
	}
	if uid >= 0 {
		_ = f.Chown(uid, gid)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the error is the one before
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// RemoveFile removes the host file p (a missing file is not an error).
func (r *Root) RemoveFile(p string) error {
	if err := r.Writable(p); err != nil {
		return err
	}
	rp, err := r.lpath(p)
	if err != nil {
		return err
	}
	if err := os.Remove(rp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(rp)) // the removal survives a crash
}

// RemoveDir removes the host directory p if it is empty (rmdir(2): a
// directory that holds anything, or a file, is left, with its error); a
// missing one is not an error.
func (r *Root) RemoveDir(p string) error {
	if err := r.Writable(p); err != nil {
		return err
	}
	rp, err := r.lpath(p)
	if err != nil {
		return err
	}
	if err := syscall.Rmdir(rp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &fs.PathError{Op: "rmdir", Path: p, Err: err}
	}
	return syncDir(filepath.Dir(rp)) // the removal survives a crash
}

// MkdirAll creates the host directory p and its parents.
func (r *Root) MkdirAll(p string, perm fs.FileMode) error {
	if err := r.Writable(p); err != nil {
		return err
	}
	rp, err := r.Path(p)
	if err != nil {
		return err
	}
	// the directories made, outermost first, so that each is synced in
	// its parent once made (a crash keeps them, and what goes in them)
	var made []string
	for d := rp; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(rp, perm); err != nil {
		return err
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := syncDir(filepath.Dir(made[i])); err != nil {
			return err
		}
	}
	return nil
}

// WriteBackup saves data as the backup of p at now (BackupName), with mode:
// a new file written whole and synced, never through a temporary file (a
// process killed while writing it leaves a torn backup, which a journal
// intent's hash tells, not a stray temporary file). It returns the backup's
// host path.
func (r *Root) WriteBackup(p string, data []byte, mode fs.FileMode, now time.Time) (string, error) {
	bak := BackupName(p, now)
	if err := r.Writable(bak); err != nil {
		return "", err
	}
	if err := writeSynced(r.join(mustResolve(r, bak)), data, mode, -1, -1); err != nil {
		return "", fmt.Errorf("back up %s: %w", path.Clean("/"+p), err)
	}
	return bak, nil
}

// FsyncDir flushes the directory dir of this machine (not a host path) to
// disk: a file made, renamed or removed in it survives a crash.
func FsyncDir(dir string) error { return syncDir(dir) }

// SyncDir flushes the directory p to disk: a file made or removed in it
// survives a crash.
func (r *Root) SyncDir(p string) error {
	rp, err := r.Path(p)
	if err != nil {
		return err
	}
	return syncDir(rp)
}
