package main

import (
	"os"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

// agents are the gpuprep binaries fleet copies to hosts, one per
// architecture: --agent-binary's (files, or directories of
// gpuprep-linux-<arch> files), else this executable and the
// gpuprep-linux-<arch> files beside it (see fleet.DefaultAgents).
func (c *fleetCmd) agents() ([]*fleet.Binary, error) {
	if len(c.agentBinary) > 0 {
		bins, err := fleet.LoadAgents(c.agentBinary)
		if err != nil {
			return nil, usageErr("--agent-binary: %v", err)
		}
		return bins, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, usageErr("cannot find this gpuprep executable (%v): give --agent-binary", err)
	}
	bins, err := fleet.DefaultAgents(exe)
	if err != nil {
		return nil, usageErr("%v (or give --agent-binary)", err)
	}
	return bins, nil
}
