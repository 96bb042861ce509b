package vgpu

import (
	"path/filepath"

	"github.com/gpuprep/gpuprep/internal/host"
)

// safeTempParent checks the directory the private copy's directory dir was
// made in, and every one above it (host.SafePath): nobody but root and
// this user may rename dir away and put another in its place. A directory
// writable by all is accepted when it is sticky and root's (/tmp: there
// only the owner of an entry may rename it).
func safeTempParent(dir string) error {
	live, err := host.NewRoot("/")
	if err != nil {
		return err
	}
	owners := rootOwners()
	owners.Sticky = true
	return live.SafePath(filepath.Dir(dir), owners, false, false)
}
