package vgpu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/gpuprep/gpuprep/internal/host"
)

// UpgradeDir holds what a change of the vGPU manager's version needs to go
// back: the installer (or package) of each version gpuprep installed or
// replaced, at <UpgradeDir>/<version>/<sha256>/<file name> (a 0700
// directory only root may write: see privateDir), and each change's
// record (UpgradeRecord).
const UpgradeDir = "/var/lib/gpuprep/vgpu-manager"

// keptPath is the host path a driver file of version with that SHA-256 is
// kept at.
func keptPath(version, sum, name string) string {
	return path.Join(UpgradeDir, version, sum, filepath.Base(name))
}

// keepFile puts a copy of the driver file src (a path on this machine)
// whose SHA-256 must be sum at the host path dst in root: copied to a
// temporary name, hashed as written and renamed into place. A copy there
// already is kept when its hash is sum.
func keepFile(root *host.Root, src, sum, dst string) error {
	real, err := root.Path(dst)
	if err != nil {
		return err
	}
	if got, err := fileSHA256(real); err == nil && got == sum {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
		return err
	}
	tmp := real + ".partial"
	_ = os.Remove(tmp) // a stale one; copyHashing fails on one it cannot replace
	got, err := copyHashing(src, tmp)
	if err != nil {
		_ = os.Remove(tmp) // the error is the copy's
		return err
	}
	if got != sum {
		_ = os.Remove(tmp) // the error is the mismatch
		return fmt.Errorf("%s changed since it was checked (SHA-256 %s then, %s now): not kept", src, sum, got)
	}
	if err := os.Rename(tmp, real); err != nil {
		return err
	}
	return syncDir(filepath.Dir(real))
}

// keepInstalled keeps the verified copy run of the driver d just installed
// (renamed out of InstallerScratch, so nothing is copied twice): a later
// version change finds it there (findKept), and rollback installs it again.
func keepInstalled(e *env, d *Driver, run string) error {
	if err := privateDir(e.Root, UpgradeDir); err != nil {
		return err
	}
	dst, err := e.Root.Path(keptPath(d.Version, d.SHA256, d.Path))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.Rename(run, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// findKept is the kept driver file of version (checked as InspectDriver
// checks any, and its hash against the directory it is kept in), or nil.
func findKept(ctx context.Context, e *env, version string) *Driver {
	dir := path.Join(UpgradeDir, version)
	sums := e.Root.Names(dir)
	sort.Strings(sums)
	for _, sum := range sums {
		for _, n := range e.Root.Names(dir + "/" + sum) {
			real, err := e.Root.Path(dir + "/" + sum + "/" + n)
			if err != nil {
				continue
			}
			r := e.Runner
			if isPackage(real) {
				r = e.Queries()
			}
			if d, err := InspectDriver(ctx, real, r); err == nil && d.SHA256 == sum && d.Version == version {
				return d
			}
		}
	}
	return nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(f)
}

func hashReader(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
