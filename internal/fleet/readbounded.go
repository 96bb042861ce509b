package fleet

import (
	"fmt"
	"io"
	"os"
)

// Bounds on the files the fleet commands read whole. An Include of
// /dev/zero (or of a FIFO) would otherwise never end, and a file of
// gigabytes would be held in memory.
const (
	// maxSSHConfigFile: ssh_config files are a few KiB; 1 MiB is room for
	// thousands of Host blocks.
	maxSSHConfigFile = 1 << 20
	// maxInventoryFile: 100000 hosts (maxInventoryHosts) with a few
	// variables each fit in 64 MiB.
	maxInventoryFile = 64 << 20
)

// readBounded reads a file of at most limit bytes; a pipe (an inventory
// from <(command)) is read too, up to the same bound.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes, more than gpuprep reads", name, limit)
	}
	return b, nil
}
