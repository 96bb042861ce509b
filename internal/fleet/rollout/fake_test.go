package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
)

// fakeRunner stands in for SSH: each host answers each gpuprep command
// line (its arguments, joined) from a script, one reply per run, the last
// one again when the script runs out; a host without a script for a
// command line is unreachable. Every run is logged.
type fakeRunner struct {
	mu      sync.Mutex
	scripts map[string]map[string][]reply // host → command line → replies
	calls   map[string][]string           // host → command lines run, in order
}

// reply is one run's result on a host.
type reply func(h *fleet.Host) *fleet.Result

func newFake() *fakeRunner {
	return &fakeRunner{scripts: map[string]map[string][]reply{}, calls: map[string][]string{}}
}

// on scripts host's answers to the command line cmd.
func (f *fakeRunner) on(host, cmd string, replies ...reply) *fakeRunner {
	if f.scripts[host] == nil {
		f.scripts[host] = map[string][]reply{}
	}
	f.scripts[host][cmd] = append(f.scripts[host][cmd], replies...)
	return f
}

func (f *fakeRunner) Run(ctx context.Context, job Job, hosts []*fleet.Host) []*fleet.Result {
	out := make([]*fleet.Result, len(hosts))
	for i, h := range hosts {
		args, err := job.Args(h)
		if err != nil {
			out[i] = &fleet.Result{Host: h, Status: fleet.StatusError, Err: err.Error()}
		} else {
			out[i] = f.next(h, strings.Join(args, " "))
		}
		if job.Done != nil {
			job.Done(out[i], i+1, len(hosts))
		}
	}
	return out
}

func (f *fakeRunner) next(h *fleet.Host, cmd string) *fleet.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[h.Name] = append(f.calls[h.Name], cmd)
	rs := f.scripts[h.Name][cmd]
	if len(rs) == 0 {
		return unreachable()(h)
	}
	r := rs[0]
	if len(rs) > 1 {
		f.scripts[h.Name][cmd] = rs[1:]
	}
	return r(h)
}

func (f *fakeRunner) callsOf(host string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls[host]...)
}

// answer is gpuprep apply -o json as cmd/gpuprep/apply.go's applyResult
// writes it (apiVersion, kind "ApplyResult", outcome, error, report, log).
func answer(code int, o *provision.Outcome, errMsg string, rep *report.Report, log ...string) reply {
	doc := map[string]any{"apiVersion": "gpuprep/v1", "kind": "ApplyResult", "mode": "container", "outcome": o, "error": errMsg, "log": log}
	if rep != nil {
		doc["report"] = rep
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return func(h *fleet.Host) *fleet.Result {
		return &fleet.Result{Host: h, Status: fleet.StatusEvaluated, Output: fleet.Output{ExitCode: code, Stdout: b}}
	}
}

// readyReport is apply's closing check of a ready node: judged for its mode.
func readyReport() *report.Report {
	return &report.Report{Kind: report.Kind, Mode: "vm-passthrough", Ready: true}
}

// ready: apply changed what it had to, and its check says ready (exit 0).
func ready(boot string) reply {
	return answer(ExitOK, &provision.Outcome{BootID: boot}, "", readyReport())
}

// readyAfter: ready, from a boot after the reboots for reasons.
func readyAfter(boot string, reasons ...string) reply {
	return answer(ExitOK, &provision.Outcome{BootID: boot, RebootedFor: reasons}, "", readyReport())
}

// stepFailed: a step failed (exit 1, apply's error).
func stepFailed(msg string) reply {
	return answer(ExitNotReady, &provision.Outcome{}, msg, nil)
}

// asks: apply stopped at the reboot step (exit 4) in boot, for reason,
// after the reboots for rebootedFor.
func asks(boot, reason string, rebootedFor ...string) reply {
	return answer(ExitNeedReboot, &provision.Outcome{Reboot: true, BootID: boot, RebootFor: reason, RebootedFor: rebootedFor}, "", nil,
		"note: "+reason+" needs a reboot")
}

func unreachable() reply {
	return func(h *fleet.Host) *fleet.Result {
		return &fleet.Result{Host: h, Status: fleet.StatusUnreachable, Err: "dial tcp: connection refused"}
	}
}

// lost: the connection went away under apply (the host went down).
func lost() reply {
	return func(h *fleet.Host) *fleet.Result {
		return &fleet.Result{Host: h, Status: fleet.StatusError, Err: "wait: remote command exited without exit status", ConnectionLost: true}
	}
}

// rolledBackOK is gpuprep rollback -o json exiting 0.
func rolledBackOK() reply {
	return func(h *fleet.Host) *fleet.Result {
		return &fleet.Result{Host: h, Status: fleet.StatusEvaluated, Output: fleet.Output{ExitCode: ExitOK, Stdout: []byte(`{"kind":"RollbackResult"}`)}}
	}
}

func rollbackFails() reply {
	return func(h *fleet.Host) *fleet.Result {
		return &fleet.Result{Host: h, Status: fleet.StatusEvaluated, Output: fleet.Output{ExitCode: ExitNotReady, Stderr: []byte("restore /etc/default/grub: permission denied")}}
	}
}

// fakeClock is a clock whose sleeps pass at once: After moves the time on.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// The command lines the fake hosts answer.
const (
	applyCmd    = "apply"
	rebootCmd   = "apply --reboot"
	rollbackCmd = "rollback"
)

func hostsNamed(names ...string) []*fleet.Host {
	out := make([]*fleet.Host, len(names))
	for i, n := range names {
		out[i] = &fleet.Host{Name: n, Address: n + ".example", Mode: "container"}
	}
	return out
}

// rig runs a rollout of hosts over the fake, as fleet apply builds it.
type rig struct {
	fake  *fakeRunner
	clock *fakeClock
	opts  Options
	log   strings.Builder
	ctx   context.Context // nil: never cancelled
}

func newRig() *rig {
	return &rig{fake: newFake(), clock: &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		opts: Options{Canary: 1, Batch: 10, Parallel: 4, RebootTimeout: 20 * time.Minute, RebootPoll: 15 * time.Second, CommandTimeout: time.Minute}}
}

func (r *rig) run(t *testing.T, hosts []*fleet.Host) *report.FleetReport {
	t.Helper()
	apply := func(*fleet.Host) ([]string, error) {
		if r.opts.Reboot {
			return []string{"apply", "--reboot"}, nil
		}
		return []string{"apply"}, nil
	}
	plan := Plan{Phases: Phases(hosts, r.opts.Canary, r.opts.Batch), HostMode: func(h *fleet.Host) string { return h.Mode },
		Apply:    apply,
		Resume:   func(*fleet.Host) ([]string, error) { return []string{"apply"}, nil },
		Rollback: func(*fleet.Host) ([]string, error) { return []string{"rollback"}, nil }}
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	st, interrupted, err := Run(ctx, Deps{Runner: r.fake, Clock: r.clock, Log: &r.log}, r.opts, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(interrupted); err != nil {
			t.Error(err)
		}
	}()
	fr, err := st.Load(interrupted)
	if err != nil {
		t.Fatal(err)
	}
	sameFromStream(t, st, fr, interrupted)
	return fr
}

// sameFromStream: every format fleet apply prints from the stream is what
// the report held whole renders (fleet apply once held every host's entry,
// its apply check and rollback reports, to the end), and the exit code made
// from the stream's summary is the one made from every host's entry.
func sameFromStream(t *testing.T, st *report.FleetStream, whole *report.FleetReport, interrupted bool) {
	t.Helper()
	for _, format := range []string{"text", "json", "junit", "markdown", "html"} {
		var a, b bytes.Buffer
		if err := st.Render(&a, format, interrupted); err != nil {
			t.Fatalf("%s from the stream: %v", format, err)
		}
		w := *whole
		w.Finish()
		if err := report.Render(&b, &report.Document{Fleet: &w}, format); err != nil {
			t.Fatalf("%s whole: %v", format, err)
		}
		if a.String() != b.String() {
			t.Fatalf("fleet apply -o %s from the stream differs from the whole report's:\n%s\n---\n%s", format, a.String(), b.String())
		}
	}
	n := map[string]int{}
	for _, h := range whole.Hosts {
		n[h.Outcome]++
	}
	for o, k := range st.Report(interrupted).Summary.Outcomes {
		if n[o] != k {
			t.Fatalf("summary outcome %s: %d, the hosts' entries say %d", o, k, n[o])
		}
	}
}

func byName(fr *report.FleetReport) map[string]report.FleetHost {
	m := map[string]report.FleetHost{}
	for _, h := range fr.Hosts {
		m[h.Name] = h
	}
	return m
}

func authFailed(h *fleet.Host) *fleet.Result {
	return &fleet.Result{Host: h, Status: fleet.StatusAuthFailed, Err: "permission denied (publickey)"}
}

func indexOf(s, sub string) int {
	i := strings.Index(s, sub)
	if i < 0 {
		return len(s) + 1
	}
	return i
}
