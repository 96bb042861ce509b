package provision

import (
	"slices"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/preflight"
)

// noteBlockers adds to Unaddressed what check fails for the mode that no
// step of the plan changes, with check's own message and remedy: a plan
// (and apply) for a node whose firmware disables VT-x, or without a GPU,
// says it will not be ready.
func (p *Plan) noteBlockers(rebootPending bool) {
	runner := p.opts.Runner
	if runner == nil {
		runner = host.NoRunner{}
	}
	env, err := preflight.NewEnv(p.root, runner, p.opts.Selector, p.opts.Mode)
	if err != nil {
		return
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{Mode: p.opts.Mode})
	if err != nil || res.Modes[p.opts.Mode] == nil {
		return
	}
	blocks := map[string]bool{}
	for _, id := range res.Modes[p.opts.Mode].Blockers {
		// beyond any plan (the hardware, the firmware, the kernel's build;
		// the running IOMMU unless a reboot is pending), or a fail that only
		// steps of which none is planned change (e.g. a GPU left unbound
		// while nvidia is loaded): the check's own Beyond and ChangedBy
		c, _ := preflight.Lookup(id)
		blocks[id] = c.StaysAfterPlan(func(s string) bool { return p.Step(s) != nil }, rebootPending)
	}
	for _, f := range res.Findings {
		if f.Status != preflight.Fail || !blocks[f.Check] || len(f.Modes) > 0 && !slices.Contains(f.Modes, p.opts.Mode) {
			continue
		}
		u := f.Check + " " + f.Subject + ": " + f.Message
		if f.Remedy != "" {
			u += " (" + f.Remedy + ")"
		}
		p.Unaddressed = append(p.Unaddressed, u)
	}
}
