package vgpu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// InstalledBinary is the gpuprep that the boot unit runs: a copy of the
// gpuprep that ran --persist, installed root's own (0755, in root-owned
// directories). Not the running file's own path: under gpuprep fleet that
// is a user-writable file in ~/.cache, which would run as root at every
// boot for whoever can write it, and be gone when the cache is cleaned.
// /usr/local/libexec: the place for programs a site installs for other
// programs to run (FHS), off PATH, so it shadows no gpuprep a user runs;
// one fixed name, so that the unit does not change with gpuprep's version.
const InstalledBinary = "/usr/local/libexec/gpuprep/gpuprep"

// maxBinary bounds the copy read of the running gpuprep.
const maxBinary = 512 << 20

// BinaryCopy is the install of InstalledBinary that a PersistPlan makes.
type BinaryCopy struct {
	Source string // on this machine: the running gpuprep
	SHA256 string
	data   []byte
}

// planBinary reads src (the running gpuprep) and returns the copy to make
// of it, or nil when root's InstalledBinary has its content already. A
// file there that is not root's own, or directories above it that others
// may write, are an error: the unit would run what someone else can change.
func planBinary(root *host.Root, src string) (*BinaryCopy, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("reading the running gpuprep to install it as %s: %w", InstalledBinary, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBinary+1))
	if err != nil {
		return nil, fmt.Errorf("reading the running gpuprep (%s): %w", src, err)
	}
	if len(data) > maxBinary {
		return nil, fmt.Errorf("%s: more than %d MiB: not gpuprep", src, maxBinary>>20)
	}
	if err := ownedByUs(root, InstalledBinary); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	c := &BinaryCopy{Source: src, SHA256: hex.EncodeToString(sum[:]), data: data}
	old, err := root.ReadFile(InstalledBinary)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, err
	}
	if sha256.Sum256(old) == sum {
		return nil, nil
	}
	return c, nil
}

// ownedByUs checks that the host file p, when there, is a regular file
// (not a link), and that it and each directory above it that exists, on
// the path as given and on the path with its links resolved (a directory
// reached through a link, /usr/local -> /opt/local, and every directory
// above the link's target), are root's or this user's and writable by no
// one else (host.SafePath).
func ownedByUs(root *host.Root, p string) error {
	if err := root.SafePath(p, rootOwners(), true, true); err != nil {
		return fmt.Errorf("%w: the boot unit would run what its owner can change", err)
	}
	return nil
}

// rootOwners allows root and this user (root, when gpuprep installs).
func rootOwners() host.Owners {
	euid := uint32(os.Geteuid())
	return host.Owners{Allow: func(u uint32) bool { return u == 0 || u == euid }, Name: "root"}
}

// install writes the copy (atomic, backed up, journalled: rollback removes
// it or puts the previous one back; a new file gets mode 0755, a replaced
// one keeps its own, which planBinary found writable by root only) and
// verifies what landed: its hash, its owner and mode, and its directories'.
func (c *BinaryCopy) install(root *host.Root, now time.Time) error {
	if _, err := journal.WriteFile(root, InstalledBinary, c.data, 0o755, "vgpu apply --persist", now); err != nil {
		return fmt.Errorf("install %s: %w", InstalledBinary, err)
	}
	got, err := root.ReadFile(InstalledBinary)
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != c.SHA256 {
		return fmt.Errorf("%s: SHA-256 %x after the install, not %s", InstalledBinary, sum, c.SHA256)
	}
	return ownedByUs(root, InstalledBinary)
}
