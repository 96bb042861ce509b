package vgpu

import (
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Devices is a device set's `devices`: "all", or a list of GPU indices
// (possibly empty: it then matches no GPU). An index is a GPU's place among
// the node's NVIDIA GPUs ordered by PCI address (go-nvlib's
// nvpci.GetGPUs: display-class physical functions, VFs left out). As in
// VGPUConfigSpec.MatchesDevices, an index no GPU has matches nothing.
type Devices struct {
	All     bool
	Indices []int
	lines   []int // the line of each index
}

// decode accepts the string all or a list of integers, and nothing else:
// VGPUConfigSpec.UnmarshalJSON refuses any other string, a number, null.
func (d *Devices) decode(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!str" && n.Value == "all" {
			d.All = true
			return nil
		}
		return fmt.Errorf("want all or a list of GPU indices, got %q", n.Value)
	case yaml.SequenceNode:
		d.Indices = []int{}
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode || e.Tag != "!!int" {
				return fmt.Errorf("line %d: want a GPU index (an integer), got %q", e.Line, e.Value)
			}
			i, err := strconv.ParseInt(e.Value, 0, 32)
			if err != nil {
				return fmt.Errorf("line %d: GPU index %q: %v", e.Line, e.Value, err)
			}
			d.Indices = append(d.Indices, int(i))
			d.lines = append(d.lines, e.Line)
		}
		return nil
	}
	return fmt.Errorf("want all or a list of GPU indices")
}

// Matches reports whether the GPU at index i is named.
func (d Devices) Matches(i int) bool { return d.All || slices.Contains(d.Indices, i) }
