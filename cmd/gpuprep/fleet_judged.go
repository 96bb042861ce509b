package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// Where a host's judged mode came from, in fleet check.
const (
	judgedFromFlag      = "from --mode"
	judgedFromInventory = "the inventory's mode"
	judgedFromLabel     = "the node's label"
	judgedNone          = "none"
)

// judgedTally counts fleet check's evaluated hosts by the mode each was
// judged for and where that mode came from, as a local check's "judged:"
// line says it for one node: --mode, else the inventory's mode (the check
// ran with --mode), else the workload label the node's kubelet registers
// (check judged it there), else none (every mode shown, none judged).
type judgedTally struct {
	n           map[judgedKey]int
	unevaluated int
}

type judgedKey struct{ mode, from string }

// add counts h, given whether fleet check had a --mode.
func (t *judgedTally) add(h *report.FleetHost, flag bool) {
	if t.n == nil {
		t.n = map[judgedKey]int{}
	}
	switch {
	case h.Report == nil:
		t.unevaluated++
	case h.Mode != "" && flag:
		t.n[judgedKey{h.Mode, judgedFromFlag}]++
	case h.Mode != "":
		t.n[judgedKey{h.Mode, judgedFromInventory}]++
	case h.Report.Mode != "":
		m := h.Report.Mode // the host's word: only a mode this gpuprep knows is repeated
		if _, err := preflight.ParseMode(m); err != nil {
			m = "?"
		}
		t.n[judgedKey{m, judgedFromLabel}]++
	default:
		t.n[judgedKey{"", judgedNone}]++
	}
}

// line is the fleet's "judged:" line: "judged: vm-passthrough (from
// --mode) on 200 hosts", or per group "judged: vm-passthrough (the
// inventory's mode) on 120 hosts, container (the node's label) on 50, no
// mode on 30 (every mode shown, none judged: not ready for a gate)".
func (t *judgedTally) line() string {
	keys := make([]judgedKey, 0, len(t.n))
	for k := range t.n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b judgedKey) int {
		return cmp.Or(cmp.Compare(t.n[b], t.n[a]), cmp.Compare(a.mode, b.mode), cmp.Compare(a.from, b.from))
	})
	var parts []string
	for i, k := range keys {
		on := fmt.Sprint(t.n[k])
		if i == 0 {
			on = plural.N(t.n[k], "host")
		}
		if k.from == judgedNone {
			parts = append(parts, "no mode on "+on+" (no --mode, no inventory mode, no workload label on the node: every mode shown, none judged)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s) on %s", k.mode, k.from, on))
	}
	if len(parts) == 0 {
		parts = append(parts, "no host evaluated")
	}
	s := "judged: " + strings.Join(parts, ", ")
	if t.unevaluated > 0 && len(keys) > 0 {
		s += fmt.Sprintf("; %d not evaluated", t.unevaluated)
	}
	return s
}
