package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpuprep/gpuprep/report"
)

// fleet check says in one line which mode each host was judged for and
// where it came from, as a local check's "judged:" line does for one node.
func TestFleetJudgedLine(t *testing.T) {
	rep := func(mode string) *report.Report { return &report.Report{Mode: mode} }
	var flag judgedTally
	for range 3 {
		flag.add(&report.FleetHost{Mode: "vm-passthrough", Report: rep("vm-passthrough")}, true)
	}
	flag.add(&report.FleetHost{Mode: "vm-passthrough", Status: "unreachable"}, true)
	assert.Equal(t, "judged: vm-passthrough (from --mode) on 3 hosts; 1 not evaluated", flag.line())

	var mixed judgedTally
	for range 2 {
		mixed.add(&report.FleetHost{Mode: "container", Report: rep("container")}, false)
	}
	mixed.add(&report.FleetHost{Report: rep("vm-vgpu")}, false)
	mixed.add(&report.FleetHost{Report: rep("\x1b[31mevil")}, false) // a host's word is not repeated
	mixed.add(&report.FleetHost{Report: rep("")}, false)
	assert.Equal(t, "judged: container (the inventory's mode) on 2 hosts, "+
		"no mode on 1 (no --mode, no inventory mode, no workload label on the node: every mode shown, none judged), "+
		"? (the node's label) on 1, vm-vgpu (the node's label) on 1", mixed.line())

	var none judgedTally
	none.add(&report.FleetHost{Status: "timeout"}, false)
	assert.Equal(t, "judged: no host evaluated", none.line())
}
