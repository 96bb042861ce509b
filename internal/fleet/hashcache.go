package fleet

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A hashCache keeps the SHA-256 of local files, to hash each only once.
//
// Every fleet run names the cache directory on its hosts by its own
// binary's SHA-256, and fleet apply names a driver installer's the same way:
// hashing 20 MB (or an installer's 400 MB) again on each run costs the
// client tens of milliseconds (seconds for an installer) before it contacts
// any host. The local hash cache keeps a file's hash under its identity —
// device, inode, size, modification and status-change times to the
// nanosecond — in the user's cache directory, as the hosts' stamps do
// (see StampFlag): any write, replacement or chmod changes the ctime, which
// no user can set.
//
// A file changed twice within one tick of the file system's clock can keep
// the same times (Linux stamps files with a coarse clock), so, as git does
// for its index ("racy git"), a hash is recorded only for a file whose
// ctime is older than the race window: a later change then gets a later time.
// The window is measured against this machine's clock, so the cache is
// used only on local file systems (ext4, XFS, Btrfs, tmpfs, overlay, ZFS,
// F2FS): on NFS, SMB or FUSE the server stamps the times, by its own clock.
// The cache is an optimisation only: it is never an error not to read or
// write it, and a hash read from it is used only when the identity matches
// exactly. A wrong hash would matter: a host whose cache already holds a
// file of that hash would run it without an upload, which is why the
// identity, the window and the file system are all required.
//
// Its files (the entries and their temporary files) are the control
// machine's own, in the user's cache directory, never a host's: they go
// through os, not host.Root, which confines reads and writes to a node's
// root (--root, or the / of a node gpuprep prepares).
type hashCache struct {
	dir    string            // where the hashes are kept ("": no cache)
	window time.Duration     // how old a file's ctime must be to be recorded
	local  func(uint64) bool // whether a statfs magic number is a file system the cache trusts
}

// hashRaceWindow is the race window of the user's hash cache.
const hashRaceWindow = 2 * time.Second

// userHashCache is the hash cache in the user's cache directory.
func userHashCache() hashCache {
	return hashCache{dir: hashCacheDir(), window: hashRaceWindow, local: localFS}
}

// localFS reports whether magic is the statfs magic number of a file
// system the hash cache trusts (linux/magic.h): ext4, XFS, Btrfs, tmpfs,
// overlay, ZFS, F2FS.
func localFS(magic uint64) bool {
	switch magic {
	case 0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794c7630, 0x2fc12fc1, 0xF2F52010:
		return true
	}
	return false
}

const hashCacheVersion = "gpuprep-hash/1"

// hashCacheDir is where the hashes are kept ("" when there is no user
// cache directory).
func hashCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil || !filepath.IsAbs(d) {
		return ""
	}
	return filepath.Join(d, "gpuprep", "sha256")
}

// fileIdentity describes the open file f for the hash cache, and names its
// entry there.
func fileIdentity(fi os.FileInfo) (id, entry string, ctime time.Time, ok bool) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return "", "", time.Time{}, false
	}
	id = fmt.Sprintf("%s dev=%d ino=%d size=%d mtime=%d.%09d ctime=%d.%09d", hashCacheVersion,
		st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
	return id, fmt.Sprintf("%d-%d", st.Dev, st.Ino), time.Unix(st.Ctim.Sec, st.Ctim.Nsec), true
}

// hashOpenFile returns the SHA-256 (hex) of the open regular file f (read
// from its start), from the user's hash cache when it holds f's identity.
func hashOpenFile(f *os.File) (string, error) { return userHashCache().hash(f) }

// hash returns the SHA-256 (hex) of the open regular file f (read from its
// start), from the cache when it holds f's identity.
func (c hashCache) hash(f *os.File) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	id, entry, ctime, ok := fileIdentity(fi)
	var st syscall.Statfs_t
	if ok && (syscall.Fstatfs(int(f.Fd()), &st) != nil || !c.local(uint64(st.Type))) {
		ok = false // not a file system whose times this machine's clock stamps
	}
	dir := c.dir
	if ok && dir != "" {
		if sum, hit := readHashEntry(filepath.Join(dir, entry), id); hit {
			return sum, nil
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if ok && dir != "" && time.Since(ctime) > c.window {
		// The identity again: a file written while it was read is not
		// recorded under either identity.
		if fi2, err := f.Stat(); err == nil {
			if id2, _, _, ok2 := fileIdentity(fi2); ok2 && id2 == id {
				_ = writeHashEntry(dir, entry, id+"\n"+sum+"\n")
			}
		}
	}
	return sum, nil
}

// readHashEntry returns the hash recorded in file for identity id.
func readHashEntry(file, id string) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil || len(b) > 4096 {
		return "", false
	}
	got, sum, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n")
	if !ok || got != id || len(sum) != sha256.Size*2 {
		return "", false
	}
	if _, err := hex.DecodeString(sum); err != nil || strings.ToLower(sum) != sum {
		return "", false
	}
	return sum, true
}

// writeHashEntry records an entry through a temporary file and a rename
// (concurrent fleet runs never read half an entry).
func writeHashEntry(dir, entry, content string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+entry+".tmp."+hex.EncodeToString(rnd[:]))
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return discardTemp(err, tmp)
	}
	if err := os.Rename(tmp, filepath.Join(dir, entry)); err != nil {
		return discardTemp(err, tmp)
	}
	return nil
}
