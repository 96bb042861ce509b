package main

import (
	"fmt"
	"io"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/vgpu"
)

// configGPUs discovers the host's GPUs as a vgpu-device-manager config
// counts them (every NVIDIA GPU, by address), marking those --select names.
func configGPUs(g *globals, sel []string) (*host.Root, []vgpu.ConfigGPU, error) {
	s, err := pci.ParseSelector(sel)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	root, err := g.hostRoot()
	if err != nil {
		return nil, nil, err
	}
	inv, err := pci.Discover(root)
	if err != nil {
		return nil, nil, &exitError{code: exitUnknown, err: err}
	}
	selected, err := s.Select(inv)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	return root, vgpu.ConfigGPUs(root, inv.Devices, selected), nil
}

// printNotes writes notes to w, one "gpuprep: note:" line each.
func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(sanitize.NewWriter(w), "gpuprep: note: %s\n", n)
	}
}
