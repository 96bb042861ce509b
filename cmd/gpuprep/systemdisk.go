package main

import (
	"fmt"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/snapshot"
)

// systemDisk is r named a system disk (--system-disk): a --root DIR that
// is neither / nor a snapshot, packed or unpacked. A program run from a
// root is that root's code run as root, and chroot does not keep a root
// process in, so gpuprep runs one only where the user said the root is a
// system disk, and never for a snapshot, which anyone may have made.
func systemDisk(g *globals, r *host.Root) (*host.Root, error) {
	switch {
	case r.IsLive():
		return nil, usageErr("--system-disk names a --root DIR other than /")
	case isTarball(g.root):
		return nil, usageErr("--system-disk: --root %s is a packed snapshot, not a system disk", g.root)
	case snapshot.IsSnapshot(r):
		return nil, usageErr("--system-disk: --root %s is a gpuprep snapshot (%s), not a system disk: its programs are not run", g.root, snapshot.Marker)
	}
	return r.SystemDisk(), nil
}

// errNotSystemDisk is why a root's own programs are not run: it was not
// named a system disk.
func errNotSystemDisk(r *host.Root) error {
	return fmt.Errorf("--root %s: gpuprep runs a root's own programs (inside it, with chroot) only for a system disk named with --system-disk, never for a snapshot", r.Name())
}
