// Command gpuprep prepares bare-metal GPU nodes for Kubernetes clusters that
// run GPU containers and GPU virtual machines (KubeVirt + the NVIDIA GPU
// Operator with sandbox workloads).
package main

import (
	"os"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

func main() {
	// Ansible runs a binary module as AnsiballZ_NAME ARGSFILE (ansible_module.go).
	if code, ok := ansibleModuleMain(os.Args, os.Stdout, nil); ok {
		os.Exit(code)
	}
	// A fleet client starts a cached copy of gpuprep with a stamp to verify
	// first (see fleet.AgentArgs).
	args, code, done := fleet.AgentArgs(os.Args[1:], os.Stderr)
	if done {
		os.Exit(code)
	}
	os.Exit(execute(args, os.Stdout, os.Stderr))
}
