// Command gpuprep prepares bare-metal GPU nodes for Kubernetes clusters that
// run GPU containers and GPU virtual machines (KubeVirt + the NVIDIA GPU
// Operator with sandbox workloads).
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
