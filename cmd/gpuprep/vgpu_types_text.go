package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/report"
)

// typesText writes a VGPUTypes document as the vgpu types table: a row per
// type, FREE the GPU's free instances ("?" unknown).
func typesText(out io.Writer, doc *report.VGPUTypes) error {
	tw := tabwriter.NewWriter(sanitize.NewWriter(out), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tINTERFACE\tTYPE\tNAME\tFREE\tRESOURCE")
	for _, g := range doc.GPUs {
		if g.VGPU == nil || len(g.VGPU.Types) == 0 {
			iface := ""
			if g.VGPU != nil {
				iface = g.VGPU.Interface
			}
			fmt.Fprintf(tw, "%s\t%s\t-\tno vGPU types (vGPU manager installed? VFs enabled?)\t\t\n", g.Address, orDash(iface))
			continue
		}
		for _, t := range g.VGPU.Types {
			free := "?"
			if t.Available != nil {
				free = fmt.Sprint(*t.Available)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.Address, g.VGPU.Interface, sanitize.Terminal(t.ID), sanitize.Terminal(t.Name), free, t.ResourceName)
		}
	}
	return tw.Flush()
}
