package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
)

// MaxReboots is how many times fleet apply --reboot lets apply reboot one
// host: the first reboot and, each time the host comes back and apply asks
// for another reboot for another reason, one more.
const MaxReboots = 3

// hostAsk is a reboot apply asked for (and, with --reboot, ran): the boot
// that asked and why, as apply -o json says them ("" where it does not:
// an older gpuprep, an unreadable boot ID, an answer lost with the
// connection).
type hostAsk struct{ boot, reason string }

// askOf is the reboot o asks for.
func askOf(o *provision.Outcome) hostAsk { return hostAsk{boot: o.BootID, reason: o.RebootFor} }

// rebootedSince says whether o, an apply's outcome, comes from a boot after
// the one that asked for ask: its boot ID differs, or apply answered an ask
// the node has rebooted since.
func rebootedSince(ask hostAsk, o *provision.Outcome) bool {
	return o != nil && (ask.boot != "" && o.BootID != "" && o.BootID != ask.boot || len(o.RebootedFor) > 0)
}

// mayBeRebooting says whether a host's apply run (with --reboot) may have
// rebooted it: it stopped at the reboot step, or lost its connection (or
// outlived the command timeout) as the host went down.
func mayBeRebooting(res *fleet.Result, e report.FleetHost) bool {
	return e.Outcome == report.OutcomeRebootNeeded || e.Outcome == report.OutcomeFailed && cutOff(res)
}

// cutOff: the run ended with no answer from apply, as when the host goes
// down for its reboot (the connection lost, or apply outlived the command
// timeout).
func cutOff(res *fleet.Result) bool { return res.ConnectionLost || res.CommandTimedOut }

// waitReboots follows the hosts whose apply (run with --reboot) stopped at
// the reboot step, or lost its connection as the host went down: it runs
// apply again (without --reboot) every RebootPoll until apply answers
// past the reboot — it then ends with its check, or says the reboot did not
// make the arguments effective — or until RebootTimeout. Until then
// anything short of such an answer means the host is not back yet: it
// cannot be reached, refuses logins (pam_nologin while booting), its
// services or home are not up, apply was killed by the shutdown, or apply
// still asks for the reboot in the boot that asked (its boot ID). Only a
// changed host key, and an apply that outlives the command timeout, end
// the wait early.
//
// An apply that answers from a later boot (another boot ID, or an ask it
// found the node rebooted since) and asks for another reboot: for the
// reason just served, the reboot did not help (failed, never rebooted
// again); for another reason, apply --reboot reboots the host once more
// and the wait starts over, up to MaxReboots reboots in all (beyond,
// reboot-needed). A host is rebooted at most once per boot: never twice
// for the same ask.
func (r *rollout) waitReboots(results []*fleet.Result, entries []*report.FleetHost) {
	var idx []int
	for i, e := range entries {
		if mayBeRebooting(results[i], *e) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	hosts := make([]string, len(idx))
	for j, i := range idx {
		hosts[j] = results[i].Host.Name
	}
	r.say("gpuprep fleet apply: waiting for %s to reboot (at most %s)\n", strings.Join(hosts, ", "), r.opts.RebootTimeout)
	start := r.deps.Clock.Now()
	sem := make(chan struct{}, max(r.opts.Parallel, 1))
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// each host's answer read, and its deadline set, in its own
			// wait: the first tries are not held up by the others'
			r.newRebootWait(results[i], entries[i], start, sem).run()
		}()
	}
	wg.Wait()
}

// say writes one line to the log: a host's name or error cannot add one,
// nor act on the terminal.
func (r *rollout) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(r.deps.Log, report.Clean(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")))
}

// stillAsks is why a host that has not answered past its reboot is waited for.
const stillAsks = "apply still asks for the reboot"

// rebootWait is the wait for one host's reboots.
type rebootWait struct {
	r        *rollout
	h        *fleet.Host
	entry    *report.FleetHost // the host's report entry, replaced by each answer that counts
	rh       *report.HostReboot
	ask      hostAsk   // the reboot being waited for
	deadline time.Time // for it
	why      string    // why the host is not back yet, for the timeout's error
	start    time.Time // of all the waits
	sem      chan struct{}
}

func (r *rollout) newRebootWait(res *fleet.Result, e *report.FleetHost, start time.Time, sem chan struct{}) *rebootWait {
	w := &rebootWait{r: r, h: res.Host, entry: e, why: stillAsks, start: start, sem: sem}
	if o, _ := applyOutcome(*e); o != nil {
		w.ask = askOf(o)
	}
	w.rh = &report.HostReboot{Reboots: 1, Reasons: []string{w.ask.reason}}
	e.Reboot = w.rh
	w.deadline = r.deps.Clock.Now().Add(r.opts.RebootTimeout)
	if cutOff(res) {
		w.why += "; the connection was lost before apply answered, so the reboot may never have started: run fleet apply --reboot for this host again"
	}
	return w
}

// run waits until the host answers past its reboots, fails, or is out of
// time, and reports how it ended.
func (w *rebootWait) run() {
	for w.rh.Error == "" && !w.rh.Completed {
		if w.sleep() {
			w.try()
		}
	}
	w.rh.WaitedMs = w.since().Milliseconds()
	w.entry.Reboot = w.rh
	w.finish()
}

func (w *rebootWait) since() time.Duration { return w.r.deps.Clock.Now().Sub(w.start) }

// sleep waits for the next try; false, with the wait's error set, when
// interrupted or out of time.
func (w *rebootWait) sleep() bool {
	ctx, clock := w.r.ctx, w.r.deps.Clock
	select {
	case <-ctx.Done():
	case <-clock.After(min(w.r.opts.RebootPoll, w.deadline.Sub(clock.Now()))):
	}
	switch {
	case ctx.Err() != nil:
		w.rh.Error = "interrupted while waiting for the reboot"
		return false
	case !clock.Now().Before(w.deadline):
		nth := ""
		if w.rh.Reboots > 1 {
			nth = fmt.Sprintf(" (reboot %d, for %s)", w.rh.Reboots, cmp.Or(w.ask.reason, "?"))
		}
		w.rh.Error = fmt.Sprintf("not back from the reboot%s within %s (%s)", nth, w.r.opts.RebootTimeout, w.why)
		return false
	}
	return true
}

// once runs gpuprep (args) on the host, one attempt bounded by the
// deadline (and the command timeout), as one of at most Parallel; ok
// false: interrupted or out of time before it could start.
func (w *rebootWait) once(args ArgsFunc) (*fleet.Result, bool) {
	r := w.r
	actx, cancel := context.WithTimeout(r.ctx, w.deadline.Sub(r.deps.Clock.Now())+r.opts.CommandTimeout)
	defer cancel()
	select {
	case w.sem <- struct{}{}:
	case <-actx.Done():
		return nil, false
	}
	defer func() { <-w.sem }()
	job := Job{Args: args, Parallel: 1, CommandTimeout: r.opts.CommandTimeout}
	return r.deps.Runner.Run(actx, job, []*fleet.Host{w.h})[0], true
}

// answered says whether res is apply answering past the reboot: ready, or
// failed saying why.
func answered(res *fleet.Result, e report.FleetHost) bool {
	return res.Status == fleet.StatusEvaluated && e.Output != nil && e.Outcome != report.OutcomeRebootNeeded
}

// try runs apply (without --reboot) once and takes its answer.
func (w *rebootWait) try() {
	res, ok := w.once(w.r.plan.Resume)
	if !ok {
		return
	}
	w.rh.Attempts++
	e, _ := w.r.applied(res)
	o, log := applyOutcome(e)
	if last := len(w.rh.Reasons) - 1; w.rh.Reasons[last] == "" && rebootedSince(w.ask, o) {
		// the reboot whose ask was lost with the connection: why, as the apply after it says
		w.rh.Reasons[last] = strings.Join(o.RebootedFor, ", ")
	}
	switch {
	case w.r.ctx.Err() != nil:
	case res.Status == fleet.StatusHostKeyChanged:
		*w.entry = e
		w.rh.Error = "the host came back with another host key: " + firstLineOf(res.Err)
	case res.CommandTimedOut:
		*w.entry = e
		w.rh.Error = "apply did not finish after the reboot: " + firstLineOf(res.Err)
	case answered(res, e):
		*w.entry = e
		w.rh.Completed = true
	case e.Outcome == report.OutcomeRebootNeeded && rebootedSince(w.ask, o):
		w.askedAgain(e, o, log)
	case e.Outcome != report.OutcomeRebootNeeded: // not back yet
		w.why = "last try: " + cmp.Or(firstLineOf(strings.TrimSpace(e.Error)), res.Status)
	}
}

// askedAgain takes an apply that is back, in a later boot, and asks for
// another reboot: for the reason just served it failed, beyond MaxReboots
// it needs a reboot, else apply --reboot reboots it again.
func (w *rebootWait) askedAgain(e report.FleetHost, o *provision.Outcome, log []string) {
	*w.entry = e
	w.rh.Completed = true
	served := cmp.Or(w.ask.reason, strings.Join(o.RebootedFor, ", "))
	again := cmp.Or(o.RebootFor, "?")
	switch {
	case o.RebootFor != "" && (o.RebootFor == w.ask.reason || slices.Contains(o.RebootedFor, o.RebootFor)):
		w.entry.Outcome = report.OutcomeFailed
		w.entry.Error = fmt.Sprintf("apply asks again for a reboot for %s after its reboot for %s: the reboot did not make the change effective; not rebooted again (apply: %s)",
			again, served, cmp.Or(applyNotes(log), "no note"))
	case w.rh.Reboots >= MaxReboots:
		w.entry.Error = fmt.Sprintf("apply asks for reboot %d, for %s, after %d (%s): fleet apply reboots a host at most %d times; reboot it and run fleet apply again",
			w.rh.Reboots+1, again, w.rh.Reboots, w.rh.Why(), MaxReboots)
	default:
		w.rh.Completed = false
		w.r.say("gpuprep fleet: %s is back after its reboot for %s, and apply asks for another, for %s: apply --reboot reboots it again (reboot %d of at most %d)\n",
			w.h.Name, cmp.Or(served, "?"), again, w.rh.Reboots+1, MaxReboots)
		w.rebootAgain(o)
	}
}

// rebootAgain runs apply --reboot once more for the reboot o asks for,
// and waits for that reboot from now on.
func (w *rebootWait) rebootAgain(o *provision.Outcome) {
	w.deadline = w.r.deps.Clock.Now().Add(w.r.opts.RebootTimeout)
	res, ok := w.once(w.r.plan.Apply)
	if !ok {
		return
	}
	w.rh.Attempts++
	e, started := w.r.applied(res)
	switch {
	case w.r.ctx.Err() != nil:
	case !started: // apply did not run: nothing rebooted; the next try asks again
		w.why = "last try: " + cmp.Or(firstLineOf(strings.TrimSpace(e.Error)), res.Status)
	case answered(res, e):
		*w.entry = e
		w.rh.Completed = true
	default: // rebooting (or cut by the reboot): wait for it
		w.rebooting(o, e, res)
	}
}

// rebooting counts the reboot apply --reboot started (e, res) after o
// asked for it.
func (w *rebootWait) rebooting(o *provision.Outcome, e report.FleetHost, res *fleet.Result) {
	w.ask = askOf(o)
	if o2, _ := applyOutcome(e); o2 != nil {
		w.ask = hostAsk{boot: cmp.Or(o2.BootID, o.BootID), reason: cmp.Or(o2.RebootFor, o.RebootFor)}
	}
	w.rh.Reboots++
	w.rh.Reasons = append(w.rh.Reasons, w.ask.reason)
	w.why = stillAsks
	if cutOff(res) {
		w.why += "; the connection was lost before apply answered, so this reboot may never have started"
	}
}

// finish says how the host's wait ended, and marks a wait that did not
// end in an answer failed (cancelled when interrupted).
func (w *rebootWait) finish() {
	if w.rh.Completed {
		after := "its reboot"
		if w.rh.Reboots > 1 {
			after = fmt.Sprintf("%d reboots", w.rh.Reboots)
		}
		msg := ""
		if e := w.entry; e.Outcome != report.OutcomeReady && e.Error != "" {
			msg = ": " + e.Error
		}
		w.r.say("gpuprep fleet: %s %s after %s (%s)%s\n", w.h.Name, w.entry.Outcome, after, w.since().Round(time.Second), msg)
		return
	}
	e := w.entry
	e.Outcome, e.Error = report.OutcomeFailed, "reboot: "+w.rh.Error
	if w.r.ctx.Err() != nil {
		e.Outcome = report.OutcomeCancelled
	}
	w.r.say("gpuprep fleet: %s %s: %s\n", w.h.Name, e.Outcome, e.Error)
}
