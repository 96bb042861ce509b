// Package rollout is gpuprep fleet apply's rollout: gpuprep apply on the
// canary hosts first, then in batches, waiting for the hosts apply reboots,
// rolling back the hosts that fail, and stopping when too many do. It runs
// gpuprep on hosts through a Runner (SSH in gpuprep, a fake in tests), so
// it is driven without the command line.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/plural"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/report"
)

// Options are the rollout's settings (fleet apply's flags).
type Options struct {
	Canary            int // as Phases was given them; for the report
	Batch             int
	MaxFailures       int
	RollbackOnFailure bool
	// Reboot: apply reboots hosts at the reboot step; the rollout waits
	// for each (RebootTimeout), trying every RebootPoll.
	Reboot        bool
	RebootTimeout time.Duration
	RebootPoll    time.Duration
	Parallel      int
	Retries       int
	// CommandTimeout bounds one gpuprep run on a host, after connecting.
	CommandTimeout time.Duration
}

// ArgsFunc gives the gpuprep arguments for a host.
type ArgsFunc func(*fleet.Host) ([]string, error)

// Plan is what the rollout runs: the phases, and each host's gpuprep
// command lines.
type Plan struct {
	Phases []Phase
	// Mode is the fleet's mode for the report ("": each host's own).
	Mode string
	// HostMode is the mode a host is applied for.
	HostMode func(*fleet.Host) string
	// Apply is apply's arguments (with --reboot when Options.Reboot).
	Apply ArgsFunc
	// Resume is apply's arguments after a reboot: never --reboot.
	Resume ArgsFunc
	// Rollback is rollback's arguments.
	Rollback ArgsFunc
}

// Deps are what the rollout works with.
type Deps struct {
	// Runner runs gpuprep on hosts.
	Runner Runner
	// Clock tells the time and sleeps (the reboot waits); nil: the real one.
	Clock Clock
	// Log gets the progress lines (stderr).
	Log io.Writer
	// Progress, when set, makes a progress display for one run of hosts.
	Progress func() Progress
}

// Progress shows hosts finishing in one run.
type Progress interface {
	Done(r *fleet.Result, done, total int)
	Finish()
}

// rollout is one Run under way.
type rollout struct {
	ctx  context.Context
	deps Deps
	opts Options
	plan Plan
	ro   *report.Rollout
	st   *report.FleetStream // each host's entry, written when nothing can change it
	n    int                 // entries placed: the hosts of the phases started
	err  error               // the first write to st that failed
	mu   sync.Mutex          // deps.Log, while reboot waits run at once
}

// Run runs the phases in order. Each host's entry goes to the fleet
// report's stream (a temporary file) as soon as nothing can change it —
// as the host finishes, or, for a host waiting for its reboot or to be
// rolled back, when its phase ends — and is dropped: what a rollout holds
// does not grow with the hosts it has finished, only with those still under
// way. The stream's entries are placed in the order the hosts were
// applied, canary first. When ctx ends, no new host is started and the
// report says which finished (interrupted).
func Run(ctx context.Context, deps Deps, opts Options, plan Plan) (_ *report.FleetStream, interrupted bool, _ error) {
	if deps.Clock == nil {
		deps.Clock = realClock{}
	}
	if deps.Log == nil {
		deps.Log = io.Discard
	}
	ro := &report.Rollout{Canary: opts.Canary, Batch: opts.Batch, MaxFailures: opts.MaxFailures,
		RollbackOnFailure: opts.RollbackOnFailure, Reboot: opts.Reboot}
	if opts.Reboot {
		ro.MaxReboots = MaxReboots
	}
	total := 0
	for _, ph := range plan.Phases {
		total += len(ph.Hosts)
	}
	st, err := report.NewFleetStream("", &report.FleetReport{Mode: plan.Mode, Rollout: ro}, total)
	if err != nil {
		return nil, false, fmt.Errorf("fleet apply: its report: %w", err)
	}
	r := &rollout{ctx: ctx, deps: deps, opts: opts, plan: plan, ro: ro, st: st}
	for i, ph := range plan.Phases {
		if r.stopped() {
			r.skip(ph)
			continue
		}
		r.phase(ph, i == len(plan.Phases)-1)
	}
	if ro.Stopped == "interrupted" {
		fmt.Fprintln(deps.Log, "gpuprep fleet: interrupted; the report shows the hosts that finished")
	}
	if r.err != nil {
		return nil, true, errors.Join(fmt.Errorf("fleet apply: writing its report: %w", r.err), st.Close(true))
	}
	return st, ctx.Err() != nil, nil
}

// emit writes entries to the report's stream, in turn.
func (r *rollout) emit(entries []report.FleetHost) {
	for i := range entries {
		if err := r.st.Add(r.n, &entries[i]); err != nil && r.err == nil {
			r.err = err
		}
		r.n++
	}
}

// stopped says whether the rollout has stopped (an earlier phase, or an
// interrupt, which it then records).
func (r *rollout) stopped() bool {
	if r.ro.Stopped == "" && r.ctx.Err() != nil {
		r.ro.Stopped = "interrupted"
	}
	return r.ro.Stopped != ""
}

// skip reports the hosts of a phase never started.
func (r *rollout) skip(ph Phase) {
	entries := make([]report.FleetHost, 0, len(ph.Hosts))
	for _, h := range ph.Hosts {
		entries = append(entries, report.FleetHost{Name: h.Name, Address: h.Target(), Status: report.OutcomeSkipped,
			Error: "not started: " + r.ro.Stopped, Mode: r.plan.HostMode(h), Phase: report.OutcomeSkipped, Outcome: report.OutcomeSkipped})
	}
	r.emit(entries)
}

// phase applies one phase's hosts, waits for their reboots, rolls back
// those that failed, and decides whether the rollout goes on. A host whose
// entry nothing later in the phase can change (not waiting for a reboot,
// not to be rolled back) goes to the stream as it finishes, and only its
// name and outcome stay for the phase's verdict: what the phase holds is
// the hosts still under way, not those it has finished.
func (r *rollout) phase(ph Phase, last bool) {
	fmt.Fprintf(r.deps.Log, "gpuprep fleet apply: %s: %s\n", ph.Name, plural.N(len(ph.Hosts), "host"))
	p := &phaseRun{r: r, ph: ph, base: r.n, hosts: make([]phaseHost, len(ph.Hosts)), at: make(map[*fleet.Host]int, len(ph.Hosts))}
	for i, h := range ph.Hosts {
		p.at[h] = i
	}
	r.n += len(ph.Hosts)
	for i, res := range r.runAll(r.plan.Apply, ph.Hosts, p.finished) {
		if !p.hosts[i].seen { // a result the runner never reported done
			p.take(i, res)
		}
	}
	held, heldRes := p.held()
	if r.opts.Reboot && r.ctx.Err() == nil {
		r.waitReboots(heldRes, p.entries(held))
	}
	v := p.judge()
	r.ro.Failures += len(v.failed)
	if len(v.back) > 0 && r.ctx.Err() == nil {
		r.rollBack(v.back, v.backIdx, p.hosts)
	}
	for _, i := range held {
		p.hosts[i].entry.Phase = ph.Name // a reboot wait's answers replace the entry
		r.add(p.base+i, &p.hosts[i].entry)
		p.hosts[i] = phaseHost{seen: true, name: p.hosts[i].entry.Name, outcome: p.hosts[i].entry.Outcome}
	}
	r.stopAfter(ph, v, last)
}

// add writes the entry of the i-th host of the rollout to the stream.
func (r *rollout) add(i int, e *report.FleetHost) {
	if err := r.st.Add(i, e); err != nil && r.err == nil {
		r.err = err
	}
}

// runAll runs gpuprep (args) on hosts, showing progress.
// each, when set, is given each host's result as it finishes (as Job.Done).
func (r *rollout) runAll(args ArgsFunc, hosts []*fleet.Host, each func(*fleet.Result)) []*fleet.Result {
	job := Job{Args: args, Parallel: r.opts.Parallel, Retries: r.opts.Retries, CommandTimeout: r.opts.CommandTimeout}
	var prog Progress
	if r.deps.Progress != nil {
		prog = r.deps.Progress()
	}
	if prog != nil || each != nil {
		job.Done = func(res *fleet.Result, done, total int) {
			if each != nil {
				each(res)
			}
			if prog != nil {
				prog.Done(res, done, total)
			}
		}
	}
	results := r.deps.Runner.Run(r.ctx, job, hosts)
	if prog != nil {
		prog.Finish()
	}
	return results
}

// verdict is how a phase's hosts ended.
type verdict struct {
	failed, unverified []string
	back               []*fleet.Host // to roll back
	backIdx            []int         // their places in the phase
}

// rollBack runs gpuprep rollback on hosts (phase[idx[j]] is hosts[j]'s).
func (r *rollout) rollBack(hosts []*fleet.Host, idx []int, phase []phaseHost) {
	fmt.Fprintf(r.deps.Log, "gpuprep fleet apply: rolling back %s\n", report.Clean(strings.Join(names(hosts), ", ")))
	for j, res := range r.runAll(r.plan.Rollback, hosts, nil) {
		e := &phase[idx[j]].entry
		e.Rollback = rolledBack(res)
		e.Outcome = report.OutcomeRolledBack
		if e.Rollback.Error != "" {
			e.Outcome = report.OutcomeRollbackFailed
		}
	}
}

// stopAfter stops the rollout after ph when it must: interrupted, a canary
// not ready, or more than MaxFailures failures with phases left.
func (r *rollout) stopAfter(ph Phase, v verdict, last bool) {
	switch {
	case r.ctx.Err() != nil:
		r.ro.Stopped = "interrupted"
	case ph.Name == CanaryPhase && len(v.failed) > 0:
		r.ro.Stopped = fmt.Sprintf("canary %s failed: no other host was started", strings.Join(v.failed, ", "))
	case ph.Name == CanaryPhase && len(v.unverified) > 0:
		r.ro.Stopped = fmt.Sprintf("canary %s not verified ready (reboot needed): reboot it and run fleet apply again", strings.Join(v.unverified, ", "))
	case r.ro.Failures > r.opts.MaxFailures && !last:
		r.ro.Stopped = fmt.Sprintf("%s failed, more than --max-failures %d: stopped after %s", plural.N(r.ro.Failures, "host"), r.opts.MaxFailures, ph.Name)
	}
	if r.ro.Stopped != "" && !last {
		fmt.Fprintf(r.deps.Log, "gpuprep fleet apply: rollout stopped: %s\n", report.Clean(r.ro.Stopped))
	}
}

func names(hosts []*fleet.Host) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.Name
	}
	return out
}
