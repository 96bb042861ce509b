package rollout

import (
	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/report"
)

// phaseRun is one phase under way: its hosts in the phase's order.
type phaseRun struct {
	r     *rollout
	ph    Phase
	base  int // the stream index of the phase's first host
	hosts []phaseHost
	at    map[*fleet.Host]int // a host's place in the phase
}

// phaseHost is what the phase keeps of one host: the whole entry (and the
// run's result) while the phase may still change it, else only what the
// phase's verdict reads.
type phaseHost struct {
	seen    bool // its apply run ended
	res     *fleet.Result
	entry   report.FleetHost
	started bool   // apply may have changed the host
	name    string // once the entry went to the stream
	outcome string
}

// finished takes a host's apply run as the runner reports it done (the
// runner calls it one host at a time).
func (p *phaseRun) finished(res *fleet.Result) {
	if i, ok := p.at[res.Host]; ok && !p.hosts[i].seen {
		p.take(i, res)
	}
}

// take makes the i-th host's entry from its apply run, and writes it at
// once when nothing later in the phase can change it: the run's output is
// then dropped with it.
func (p *phaseRun) take(i int, res *fleet.Result) {
	e, started := p.r.applied(res)
	e.Phase = p.ph.Name
	if p.mayChange(res, e, started) {
		p.hosts[i] = phaseHost{seen: true, res: res, entry: e, started: started}
		return
	}
	p.r.add(p.base+i, &e)
	res.Output = fleet.Output{}
	p.hosts[i] = phaseHost{seen: true, name: e.Name, outcome: e.Outcome}
}

// mayChange says whether the rest of the phase may change a host's entry:
// a reboot to wait for, or a rollback.
func (p *phaseRun) mayChange(res *fleet.Result, e report.FleetHost, started bool) bool {
	r := p.r
	return r.opts.Reboot && r.ctx.Err() == nil && mayBeRebooting(res, e) ||
		rollbackCandidate(e, started, r.opts.RollbackOnFailure)
}

// rollbackCandidate: a failed host apply may have changed, with
// --rollback-on-failure, not one whose reboot was never seen through (it
// may be booting, and its state is unknown).
func rollbackCandidate(e report.FleetHost, started, rollbackOnFailure bool) bool {
	return e.Outcome == report.OutcomeFailed && started && rollbackOnFailure && (e.Reboot == nil || e.Reboot.Completed)
}

// held lists the hosts whose entries the phase still holds, and their runs.
func (p *phaseRun) held() ([]int, []*fleet.Result) {
	var idx []int
	var res []*fleet.Result
	for i := range p.hosts {
		if p.hosts[i].res != nil {
			idx, res = append(idx, i), append(res, p.hosts[i].res)
		}
	}
	return idx, res
}

// entries are the held hosts' entries, to be changed in place.
func (p *phaseRun) entries(idx []int) []*report.FleetHost {
	out := make([]*report.FleetHost, len(idx))
	for j, i := range idx {
		out[j] = &p.hosts[i].entry
	}
	return out
}

// judge names the phase's failed and unverified hosts, in the phase's
// order, and those to roll back.
func (p *phaseRun) judge() verdict {
	var v verdict
	for i := range p.hosts {
		h := &p.hosts[i]
		name, outcome := h.name, h.outcome
		if h.res != nil {
			name, outcome = h.entry.Name, h.entry.Outcome
		}
		switch outcome {
		case report.OutcomeFailed:
			v.failed = append(v.failed, name)
			if h.res != nil && rollbackCandidate(h.entry, h.started, p.r.opts.RollbackOnFailure) {
				v.back, v.backIdx = append(v.back, h.res.Host), append(v.backIdx, i)
			}
		case report.OutcomeRebootNeeded, report.OutcomeCancelled:
			v.unverified = append(v.unverified, name)
		}
	}
	return v
}
