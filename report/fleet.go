package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
)

// FleetKind identifies the fleet JSON document (apiVersion gpuprep/v1).
const FleetKind = "FleetReport"

// Host verdicts in a fleet report.
const (
	VerdictReady    = "ready"
	VerdictNotReady = "not-ready"
	VerdictUnknown  = "unknown"
)

// FleetReport is the result of `gpuprep fleet check` (and `fleet run`):
// one entry per host, in inventory order, and a fleet-wide summary. Field
// names and meanings are stable; new fields may be added.
type FleetReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Mode is the --mode given ("": each host's own mode, else every mode).
	Mode string `json:"mode"`
	// Command is the gpuprep command line run on every host (fleet run).
	Command []string `json:"command,omitempty"`
	// Interrupted: the run was stopped (Ctrl-C) before every host finished.
	Interrupted bool `json:"interrupted,omitempty"`
	// Rollout (fleet apply): how the hosts were rolled out and why it stopped.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Planned is how many hosts the run set out to finish: written only
	// in the head of a --report file while the run goes on (so that a file
	// cut off by a killed run says how many hosts it lacks), never in a
	// finished report.
	Planned int          `json:"planned,omitempty"`
	Hosts   []FleetHost  `json:"hosts"`
	Summary FleetSummary `json:"summary"`
	// single: one host's check report rendered in a fleet format (AsFleet):
	// titled as gpuprep check, with the host's per-mode readiness
	single bool
	// from: a report rendered from its stream (FleetStream.Render), its
	// hosts read back from there one at a time (Hosts nil)
	from *FleetStream
}

// title names what made the report.
func (f *FleetReport) title() string {
	switch {
	case f.Rollout != nil:
		return "gpuprep fleet apply"
	case len(f.Command) > 0:
		return "gpuprep fleet run " + Clean(strings.Join(f.Command, " "))
	case f.single && len(f.Hosts) == 1:
		return "gpuprep check " + Clean(f.Hosts[0].Name)
	}
	return "gpuprep fleet check"
}

// FleetHost is one host of the fleet.
type FleetHost struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// Status: evaluated, unreachable, auth-failed, host-key-unknown,
	// host-key-changed, timeout, error, or cancelled (interrupted).
	Status string `json:"status"`
	Error  string `json:"error"`
	Mode   string `json:"mode,omitempty"`
	// Verdict (fleet check, evaluated hosts): ready, not-ready or unknown.
	Verdict    string `json:"verdict,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// Report is the host's ReadinessReport (fleet check).
	Report *Report `json:"report,omitempty"`
	// ExitCode, Output (the JSON the command printed) or Stdout (any other
	// output), and Stderr: fleet run.
	ExitCode *int            `json:"exitCode,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Stdout   string          `json:"stdout,omitempty"`
	Stderr   string          `json:"stderr,omitempty"`
	// Phase (fleet apply): canary, "batch N", or skipped (never started:
	// the rollout stopped first).
	Phase string `json:"phase,omitempty"`
	// Outcome (fleet apply): ready (applied and verified by check),
	// reboot-needed, failed, rolled-back, rollback-failed, cancelled or
	// skipped. fleet run: what gpuprep's exit code on the host says (see
	// RunOutcome); empty when gpuprep did not run there (Status says why).
	Outcome string `json:"outcome,omitempty"`
	// Rollback is gpuprep rollback's run on a failed host
	// (--rollback-on-failure).
	Rollback *HostRollback `json:"rollback,omitempty"`
	// Reboot is the reboot fleet apply --reboot had apply run, and the wait
	// for the host to come back and finish.
	Reboot *HostReboot `json:"reboot,omitempty"`
}

// HostReboot is a host's reboot in fleet apply --reboot: apply ran
// systemctl reboot at its reboot step; fleet apply then ran apply again
// (without --reboot) until it no longer asked for the reboot. A host that
// came back and whose apply asked for another reboot, for another reason,
// is rebooted again by apply --reboot, up to a bound (Reboots, Reasons).
type HostReboot struct {
	// Completed: the host came back and apply went on past the reboot.
	Completed bool  `json:"completed"`
	WaitedMs  int64 `json:"waitedMs"`
	// Attempts counts the runs of apply while waiting (connection
	// failures included).
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
	// Reboots counts the reboots apply ran on the host (0 in reports
	// written before it was counted: one); Reasons says why each, in
	// order, as apply said ("kernel-args", "nouveau", "vfio-unbind"; ""
	// where apply did not say).
	Reboots int      `json:"reboots,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
}

// Why lists the reasons of the reboots, "?" for one apply did not give.
func (rh *HostReboot) Why() string {
	var out []string
	known := false
	for _, r := range rh.Reasons {
		known = known || r != ""
		out = append(out, cmp.Or(Clean(r), "?"))
	}
	if !known {
		return ""
	}
	return strings.Join(out, ", ")
}

// Outcomes of a host in fleet apply.
const (
	OutcomeReady          = "ready"
	OutcomeRebootNeeded   = "reboot-needed"
	OutcomeFailed         = "failed"
	OutcomeRolledBack     = "rolled-back"
	OutcomeRollbackFailed = "rollback-failed"
	OutcomeCancelled      = "cancelled"
	OutcomeSkipped        = "skipped"
)

// Outcomes of a host in fleet run besides failed and reboot-needed: what
// gpuprep's exit code there says (docs/exit-codes.md).
const (
	OutcomeOK          = "ok"          // 0
	OutcomeUsageError  = "usage-error" // 2: gpuprep there refused the command line
	OutcomeUnknown     = "unknown"     // 3: could not evaluate, or another gpuprep was changing the host
	OutcomeInterrupted = "interrupted" // 130: interrupted between steps
)

// RunOutcome is a host's fleet run outcome from gpuprep's exit code there:
// 0 ok, 1 failed (not ready, a step failed, refused), 2 usage-error, 3
// unknown, 4 reboot-needed, 130 interrupted; any other code (a crash, a
// signal) failed.
func RunOutcome(code int) string {
	switch code {
	case 0:
		return OutcomeOK
	case 2:
		return OutcomeUsageError
	case 3:
		return OutcomeUnknown
	case 4:
		return OutcomeRebootNeeded
	case 130:
		return OutcomeInterrupted
	}
	return OutcomeFailed
}

// runOutcomes are fleet run's outcomes in the order the summary line gives them.
var runOutcomes = []string{OutcomeOK, OutcomeRebootNeeded, OutcomeFailed, OutcomeUsageError, OutcomeUnknown, OutcomeInterrupted}

// RunExitCode is fleet run's exit code: 2 when gpuprep refused the command
// line on a host (usage), else 1 when it failed on a host (exit 1, or a
// code gpuprep does not document), else 3 when a host could not be reached
// or run, could not evaluate (exit 3) or was interrupted (130), else 4
// when a host needs a reboot (exit 4), else 0.
func (f *FleetReport) RunExitCode() int {
	n := f.Summary.Outcomes
	switch {
	case n[OutcomeUsageError] > 0:
		return 2
	case n[OutcomeFailed] > 0:
		return 1
	case n[OutcomeUnknown] > 0 || n[OutcomeInterrupted] > 0 || f.Summary.Statuses["evaluated"] < f.Summary.Hosts:
		return 3
	case n[OutcomeRebootNeeded] > 0:
		return 4
	}
	return 0
}

// Rollout describes a fleet apply: its settings, the failures counted and,
// when it stopped early, why.
type Rollout struct {
	Canary            int  `json:"canary"`
	Batch             int  `json:"batch"`
	MaxFailures       int  `json:"maxFailures"`
	RollbackOnFailure bool `json:"rollbackOnFailure"`
	// Reboot: hosts were rebooted where apply needed it, and waited for;
	// MaxReboots, how many times at most each (0 in reports written before
	// it was bounded).
	Reboot     bool `json:"reboot,omitempty"`
	MaxReboots int  `json:"maxReboots,omitempty"`
	Failures   int  `json:"failures"`
	// Stopped says why hosts were skipped ("" when every host was started).
	Stopped string `json:"stopped,omitempty"`
}

// HostRollback is the result of gpuprep rollback on one host.
type HostRollback struct {
	Status   string          `json:"status"`
	Error    string          `json:"error,omitempty"`
	ExitCode *int            `json:"exitCode,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Stderr   string          `json:"stderr,omitempty"`
	// RebootRequired: the rollback is complete only after a reboot (it
	// restored kernel arguments, or the initramfs).
	RebootRequired bool `json:"rebootRequired,omitempty"`
}

// FleetSummary counts hosts and shows which checks fail where.
type FleetSummary struct {
	Hosts    int            `json:"hosts"`
	Statuses map[string]int `json:"statuses"`
	Ready    int            `json:"ready"`
	NotReady int            `json:"notReady"`
	Unknown  int            `json:"unknown"`
	// Outcomes counts the hosts' outcomes (fleet run and fleet apply).
	Outcomes map[string]int `json:"outcomes,omitempty"`
	// Checks is the fleet-wide view: each check that fails (or could not be
	// evaluated) somewhere, with the hosts, most widespread first.
	Checks []CheckSpread `json:"checks"`
}

// CheckSpread is one check's failures across the fleet.
type CheckSpread struct {
	Check  string   `json:"check"`
	Status string   `json:"status"` // fail or error
	Hosts  []string `json:"hosts"`
	Of     int      `json:"of"` // hosts that judged the check (for their mode)
}

// Sentence is the fleet-wide line: "iommu.kernel fails on 12 of 200 hosts: a, b, …".
func (c CheckSpread) Sentence(maxNames int) string {
	verb := "fails"
	if c.Status == string(preflight.Error) {
		verb = "could not be evaluated"
	}
	noun := "hosts"
	if c.Of == 1 {
		noun = "host"
	}
	names := c.Hosts
	more := ""
	if maxNames > 0 && len(names) > maxNames {
		more = fmt.Sprintf(", … (+%d more)", len(names)-maxNames)
		names = names[:maxNames]
	}
	return fmt.Sprintf("%s %s on %d of %d %s: %s%s", c.Check, verb, len(c.Hosts), c.Of, noun, strings.Join(names, ", "), more)
}

// Verdict is a host's readiness from its report, exactly as `gpuprep check`
// decides its exit code (cmd/gpuprep exitCode maps this verdict): without a
// judged mode nothing was judged (unknown: a report of every mode is not a
// verdict, however many modes are ready); with one, a failing check of that
// mode makes it not ready; otherwise a check that could not be evaluated, or
// was skipped (--skip), makes it unknown.
func Verdict(r *Report) string {
	if r.Mode == "" {
		return VerdictUnknown
	}
	if mr := r.Modes[preflight.Mode(r.Mode)]; mr != nil && len(mr.Blockers) > 0 {
		return VerdictNotReady
	}
	if r.Summary.Error > 0 || len(Skipped(r)) > 0 {
		return VerdictUnknown
	}
	if !r.Ready {
		return VerdictNotReady
	}
	return VerdictReady
}

// Finish fills the verdicts and the summary.
func (f *FleetReport) Finish() {
	f.APIVersion, f.Kind = APIVersion, FleetKind
	if f.Hosts == nil {
		f.Hosts = []FleetHost{}
	}
	sb := newSummaryBuilder(f)
	for i := range f.Hosts {
		sb.add(i, &f.Hosts[i])
	}
	f.Summary = sb.summary()
}

// summaryBuilder makes a fleet's summary host by host, in any order (a
// streamed fleet adds each host as it finishes): it keeps the counts and,
// per failing check, the names of its hosts, nothing else of a host.
type summaryBuilder struct {
	f      *FleetReport // Command and Rollout: what kind of fleet report
	s      FleetSummary
	spread map[spreadKey][]indexedName
	judged map[string]int // check → hosts that judged it (for their mode)
}

type spreadKey struct{ check, status string }

// indexedName is a host's name and its place in the inventory (the order
// the summary lists hosts in).
type indexedName struct {
	i    int
	name string
}

func newSummaryBuilder(f *FleetReport) *summaryBuilder {
	return &summaryBuilder{f: f, s: FleetSummary{Statuses: map[string]int{}, Checks: []CheckSpread{}},
		spread: map[spreadKey][]indexedName{}, judged: map[string]int{}}
}

// add counts host h, the i-th of the inventory, and fills its verdict
// (and a fleet run's outcome).
func (sb *summaryBuilder) add(i int, h *FleetHost) {
	sb.s.Hosts++
	sb.s.Statuses[h.Status]++
	sb.countOutcome(h)
	if h.Report != nil {
		h.Verdict = Verdict(h.Report)
	}
	verdict, ok := sb.verdict(h)
	if !ok {
		return
	}
	sb.countVerdict(verdict)
	if h.Report == nil || h.Rollback != nil {
		return // no report, or one of the node before its rollback
	}
	sb.spreadFindings(i, h)
}

// countOutcome counts h's outcome, first made from its exit code on a fleet
// run.
func (sb *summaryBuilder) countOutcome(h *FleetHost) {
	s := &sb.s
	if len(sb.f.Command) > 0 && sb.f.Rollout == nil && h.ExitCode != nil {
		h.Outcome = RunOutcome(*h.ExitCode)
	}
	if h.Outcome == "" {
		return
	}
	if s.Outcomes == nil {
		s.Outcomes = map[string]int{}
	}
	s.Outcomes[h.Outcome]++
}

// verdict is the verdict h counts under; false when it counts under none
// (no report, and no fleet apply outcome standing for one).
func (sb *summaryBuilder) verdict(h *FleetHost) (string, bool) {
	if sb.f.Rollout != nil && h.Outcome != "" && h.Outcome != OutcomeSkipped {
		// fleet apply: the outcome is the host's verdict (its
		// report, if any, is apply's closing check)
		return outcomeVerdict(h.Outcome), true
	}
	return h.Verdict, h.Report != nil
}

// outcomeVerdict is the verdict of a fleet apply outcome.
func outcomeVerdict(outcome string) string {
	switch outcome {
	case OutcomeReady:
		return VerdictReady
	case OutcomeCancelled:
		return VerdictUnknown
	}
	return VerdictNotReady // failed, reboot-needed, rolled back
}

func (sb *summaryBuilder) countVerdict(verdict string) {
	switch verdict {
	case VerdictReady:
		sb.s.Ready++
	case VerdictNotReady:
		sb.s.NotReady++
	default:
		sb.s.Unknown++
	}
}

// spreadFindings notes, per check, that h judged it and, per failing (or
// erring) check, h's name.
func (sb *summaryBuilder) spreadFindings(i int, h *FleetHost) {
	seen := map[spreadKey]bool{}
	seenCheck := map[string]bool{}
	for _, fd := range h.Report.Findings {
		if !Counts(h.Report, fd) || fd.Status == preflight.Skip {
			continue // a skip judged nothing (--skip, no GPU selected)
		}
		if !seenCheck[fd.Check] {
			seenCheck[fd.Check] = true
			sb.judged[fd.Check]++
		}
		if fd.Status != preflight.Fail && fd.Status != preflight.Error {
			continue
		}
		k := spreadKey{fd.Check, string(fd.Status)}
		if !seen[k] {
			seen[k] = true
			sb.spread[k] = append(sb.spread[k], indexedName{i, h.Name})
		}
	}
}

// summary is the summary of the hosts added, their names in inventory
// order.
func (sb *summaryBuilder) summary() FleetSummary {
	s := sb.s
	s.Checks = []CheckSpread{}
	for k, hosts := range sb.spread {
		slices.SortFunc(hosts, func(a, b indexedName) int { return a.i - b.i })
		names := make([]string, len(hosts))
		for j, h := range hosts {
			names[j] = h.name
		}
		s.Checks = append(s.Checks, CheckSpread{Check: k.check, Status: k.status, Hosts: names, Of: sb.judged[k.check]})
	}
	sort.Slice(s.Checks, func(i, j int) bool {
		a, b := s.Checks[i], s.Checks[j]
		if len(a.Hosts) != len(b.Hosts) {
			return len(a.Hosts) > len(b.Hosts)
		}
		if a.Status != b.Status {
			return a.Status == string(preflight.Fail)
		}
		return a.Check < b.Check
	})
	return s
}

// ExitCode is the fleet's exit code: 1 when a host is not ready, else 3
// when a host could not be evaluated (or its verdict is unknown), else 0.
func (f *FleetReport) ExitCode() int {
	if f.Summary.NotReady > 0 {
		return 1
	}
	if f.Summary.Unknown > 0 || f.Summary.Statuses["evaluated"] < f.Summary.Hosts {
		return 3
	}
	return 0
}

// FleetJSON writes the fleet report as indented JSON, byte for byte what
// json.Encoder with SetIndent("", "  ") writes, host by host: a fleet of 200
// HGX hosts is 5 MB of JSON, which the encoder would build and then indent
// whole in one growing buffer.
func FleetJSON(w io.Writer, f *FleetReport) error {
	if f.Hosts == nil { // "hosts": null, which the splice below does not make
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(f)
	}
	pre, post, err := fleetHead(f)
	if err != nil {
		return err
	}
	// every host first: on an error nothing is written, as with the encoder
	hosts, err := marshalHosts(f.Hosts)
	if err != nil {
		return err
	}
	return spliceHosts(w, pre, post, len(hosts), func(i int) ([]byte, error) { return hosts[i], nil })
}

// spliceHosts writes a fleet report's JSON from its head cut where the
// hosts go (pre, post: fleetHead) and the n hosts' entries (host(i) is the
// i-th, indented for its place), laid out as json.Encoder with
// SetIndent("", "  ") lays out the whole; an error from host stops it.
func spliceHosts(w io.Writer, pre, post []byte, n int, host func(i int) ([]byte, error)) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(pre); err != nil {
		return err
	}
	for i := range n {
		b, err := host(i)
		if err != nil {
			return err
		}
		sep := ",\n    "
		if i == 0 {
			sep = sep[1:]
		}
		if _, err := bw.WriteString(sep); err != nil {
			return err
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	end := string(post) + "\n"
	if n > 0 {
		end = "\n  " + end
	}
	if _, err := bw.WriteString(end); err != nil {
		return err
	}
	return bw.Flush()
}

// marshalHosts encodes each host's entry (indented as FleetJSON places
// it), on every CPU: the fleet client does it after the last host answered,
// when nothing else runs (200 HGX hosts: 25 ms on one core). The error is
// the first host's in order, as a serial encoding would return.
func marshalHosts(hosts []FleetHost) ([][]byte, error) {
	out := make([][]byte, len(hosts))
	errs := make([]error, len(hosts))
	workers := min(runtime.GOMAXPROCS(0), len(hosts)/8+1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(hosts) {
					return
				}
				out[k], errs[k] = json.MarshalIndent(&hosts[k], "    ", "  ")
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Clean makes an inventory or remote value safe to print on a terminal:
// it is sanitize.Terminal (controls, escape sequences, newlines and bidi
// controls shown escaped).
func Clean(s string) string { return sanitize.Terminal(s) }

// firstLine is s's first line, cleaned (Clean), cut to max characters
// (runes: never inside one, so the text stays valid UTF-8 as far as s was),
// with " …" when anything was left out.
func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	more := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, more = strings.TrimSpace(s[:i]), true
	}
	s = Clean(s)
	if max > 0 {
		n := 0
		for i := range s { // i: where each rune starts
			if n == max {
				s, more = s[:i], true
				break
			}
			n++
		}
	}
	if more {
		s += " …"
	}
	return s
}

// FleetText writes the terminal fleet report as FleetTextWith does by
// default.
func FleetText(w io.Writer, f *FleetReport) error { return FleetTextWith(w, f, TextOptions{}) }

// FleetTextWith writes the terminal fleet report, host by host (its table
// measured in a first pass over the hosts, written in a second), every
// line wrapped to o.Width (0: TermWidth of w; at least 20), never wider.
func FleetTextWith(w io.Writer, f *FleetReport, o TextOptions) error {
	width := o.Width
	if width <= 0 {
		width = TermWidth(w)
	}
	width = max(width, minWidth)
	re := Renderer(w)
	bold := re.NewStyle().Bold(true)
	line, err := summaryLine(f)
	if err != nil {
		return err
	}
	b := bufio.NewWriterSize(w, 64<<10)
	var s strings.Builder
	para(&s, bold.Render(Clean(f.title()))+"  "+Clean(line), 2, width)
	b.WriteString(s.String() + "\n")
	if err := fleetTable(b, f, width); err != nil {
		return err
	}
	s.Reset()
	if err := fleetTextEnd(&s, f, re, width); err != nil {
		return err
	}
	b.WriteString(s.String())
	return b.Flush()
}

// fleetTable writes the table of hosts: a fleet check's, run's or apply's.
func fleetTable(b *bufio.Writer, f *FleetReport, width int) error {
	head, row := textCheckHead, textCheckRow
	switch {
	case f.Rollout != nil:
		head, row = textRolloutHead, textRolloutRow
	case len(f.Command) > 0:
		head, row = textRunHead, textRunRow
	}
	t := table{width: width}
	t.measure(head...)
	if err := f.eachHost(func(_ int, h *FleetHost) error { t.measure(row(h)...); return nil }); err != nil {
		return err
	}
	t.writeHead(b, head...)
	return f.eachHost(func(_ int, h *FleetHost) error { t.write(b, row(h)...); return nil })
}

// fleetTextEnd writes what follows the table: the rollout, what the fleet
// has in common, and whether the run was interrupted.
func fleetTextEnd(b *strings.Builder, f *FleetReport, re *lipgloss.Renderer, width int) error {
	bold := re.NewStyle().Bold(true)
	if ro := f.Rollout; ro != nil {
		rb, err := rolloutText(f)
		if err != nil {
			return err
		}
		b.WriteString("\n")
		para(b, fmt.Sprintf("%s canary %d, then batches of %d; stop when more than %s failed%s: %d failed.", bold.Render("Rollout"),
			ro.Canary, ro.Batch, plural.N(ro.MaxFailures, "host"), rb, ro.Failures), 2, width)
		if ro.Stopped != "" {
			para(b, "Stopped: "+Clean(ro.Stopped), 2, width)
		}
	}
	if len(f.Summary.Checks) > 0 {
		b.WriteString("\n" + bold.Render("Across the fleet") + "\n")
		for _, c := range f.Summary.Checks {
			hang(b, "  ", Clean(c.Sentence(8)), 2, width)
		}
	}
	if f.Interrupted {
		b.WriteString("\n")
		para(b, re.NewStyle().Faint(true).Render("Interrupted: hosts marked cancelled were not (fully) run."), 2, width)
	}
	return nil
}

// rolloutText is what fleet apply did besides applying: rollbacks and
// reboots.
func rolloutText(f *FleetReport) (string, error) {
	ro, rb := f.Rollout, ""
	if ro.RollbackOnFailure {
		rb = ", failed hosts rolled back"
	}
	if !ro.Reboot {
		return rb, nil
	}
	rb += ", hosts rebooted where needed"
	if ro.MaxReboots > 0 {
		rb += fmt.Sprintf(" (at most %d times each)", ro.MaxReboots)
	}
	n, hosts, err := rebootCount(f)
	if n > 0 {
		rb += ": " + plural.N(n, "reboot") + " on " + plural.N(hosts, "host")
	}
	return rb, err
}

var textCheckHead = []string{"HOST", "ADDRESS", "VERDICT", "FAIL", "WARN", "ERROR", "BLOCKERS / ERROR"}

// textCheckRow is a fleet check's host in the terminal table: its verdict,
// or why it has none (unreachable, timeout, …), and the findings that need
// attention (passes are counted in the JSON, Markdown and HTML reports).
func textCheckRow(h *FleetHost) []string {
	if h.Report == nil {
		return []string{Clean(h.Name), Clean(h.Address), Clean(h.Status), "", "", "", firstLine(h.Error, 100)}
	}
	s := h.Report.Summary
	return []string{Clean(h.Name), Clean(h.Address), Clean(h.Verdict),
		strconv.Itoa(s.Fail), strconv.Itoa(s.Warn), strconv.Itoa(s.Error), Clean(strings.Join(blockers(h.Report), ", "))}
}

var textRunHead = []string{"HOST", "ADDRESS", "STATUS", "EXIT", "OUTCOME", "OUTPUT / ERROR"}

// textRunRow is a fleet run's host in the terminal table.
func textRunRow(h *FleetHost) []string {
	code, detail := "-", firstLine(h.Error, 100)
	if h.ExitCode != nil {
		code = strconv.Itoa(*h.ExitCode)
	}
	if h.Status == "evaluated" {
		detail = firstLine(h.Stdout, 100)
		if len(h.Output) > 0 {
			detail = "(JSON output)"
		}
		if detail == "" {
			detail = firstLine(h.Stderr, 100)
		}
	}
	return []string{Clean(h.Name), Clean(h.Address), Clean(h.Status), code, Clean(orDash(h.Outcome)), detail}
}

var textRolloutHead = []string{"HOST", "ADDRESS", "PHASE", "OUTCOME", "EXIT", "VERDICT", "BLOCKERS / ERROR"}

// textRolloutRow is fleet apply's host in the terminal table: phase and
// outcome, then the verdict of the check apply ended with, and what went
// wrong (led by the host's status where gpuprep did not run there to the
// end: unreachable, timeout, …).
func textRolloutRow(h *FleetHost) []string {
	code, verdict, detail := "-", "-", firstLine(h.Error, 100)
	if h.ExitCode != nil {
		code = strconv.Itoa(*h.ExitCode)
	}
	if h.Report != nil {
		verdict = h.Verdict
		if bl := blockers(h.Report); len(bl) > 0 && detail == "" {
			detail = strings.Join(bl, ", ")
		}
	}
	if rebooted := h.RebootNote(); rebooted != "" {
		detail = joinNotes(rebooted, detail)
	}
	detail = joinNotes(detail, h.RollbackNote())
	if h.Status != "evaluated" && h.Status != OutcomeSkipped && h.Status != h.Outcome {
		detail = joinNotes(h.Status, detail)
	}
	return []string{Clean(h.Name), Clean(h.Address), Clean(h.Phase), Clean(h.Outcome),
		code, Clean(verdict), Clean(detail)}
}

// RebootNote says how a host's reboots in fleet apply --reboot went when
// the host came back ("rebooted (42s)", "rebooted for kernel-args (42s)",
// "rebooted 2 times: vfio-unbind, nouveau (1m30s)"); "" otherwise (Error
// says what went wrong).
func (h *FleetHost) RebootNote() string {
	rh := h.Reboot
	if rh == nil || !rh.Completed {
		return ""
	}
	took := (time.Duration(rh.WaitedMs) * time.Millisecond).Round(time.Second)
	why := rh.Why()
	switch {
	case rh.Reboots > 1 && why != "":
		return fmt.Sprintf("rebooted %d times: %s (%s)", rh.Reboots, why, took)
	case rh.Reboots > 1:
		return fmt.Sprintf("rebooted %d times (%s)", rh.Reboots, took)
	case why != "":
		return fmt.Sprintf("rebooted for %s (%s)", why, took)
	}
	return fmt.Sprintf("rebooted (%s)", took)
}

// RollbackNote says whether and how a host was rolled back; "" when not.
func (h *FleetHost) RollbackNote() string {
	rb := h.Rollback
	switch {
	case rb == nil:
		return ""
	case h.Outcome == OutcomeRollbackFailed:
		return "rollback failed: " + firstLine(rb.Error, 80)
	case rb.RebootRequired:
		return "rolled back (reboot needed to complete)"
	}
	return "rolled back"
}

// rebootCount is the reboots fleet apply --reboot had apply run, and on
// how many hosts.
func rebootCount(f *FleetReport) (n, hosts int, err error) {
	err = f.eachHost(func(_ int, h *FleetHost) error {
		if rh := h.Reboot; rh != nil {
			n += max(rh.Reboots, 1)
			hosts++
		}
		return nil
	})
	return n, hosts, err
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// summaryLine is the fleet's counts in one line (fleet apply's outcomes
// counted over its hosts).
func summaryLine(f *FleetReport) (string, error) {
	if f.single && f.Mode == "" && len(f.Hosts) == 1 && f.Hosts[0].Report != nil {
		return modesLine(f.Hosts[0].Report), nil
	}
	if f.Rollout != nil {
		return rolloutLine(f)
	}
	s := f.Summary
	parts := []string{plural.N(s.Hosts, "host")}
	if len(f.Command) > 0 {
		parts = append(parts, runOutcomeCounts(s)...)
	} else {
		parts = append(parts, fmt.Sprintf("%d ready", s.Ready), fmt.Sprintf("%d not ready", s.NotReady))
		if s.Unknown > 0 {
			parts = append(parts, fmt.Sprintf("%d unknown", s.Unknown))
		}
	}
	if st := notEvaluated(s); len(st) > 0 {
		parts = append(parts, "not evaluated: "+strings.Join(st, ", "))
	}
	return strings.Join(parts, ", "), nil
}

// modesLine is one host judged for every mode: each mode's readiness, as
// check's own report says it (its "ready" is for every mode at once).
func modesLine(r *Report) string {
	var parts []string
	for _, m := range preflight.Modes {
		if mr := r.Modes[m]; mr != nil {
			parts = append(parts, string(m)+" "+modeReadiness(mr))
		}
	}
	return strings.Join(parts, "; ")
}

// modeReadiness is "ready", "not ready (BLOCKERS)", "unknown (WHY)" or
// "not evaluated (skipped: IDS)".
func modeReadiness(mr *preflight.ModeResult) string {
	switch {
	case mr.Ready:
		return "ready"
	case len(mr.Blockers) > 0:
		return "not ready (" + strings.Join(mr.Blockers, ", ") + ")"
	case len(mr.Unknown) > 0:
		why := strings.Join(mr.Unknown, ", ")
		if len(mr.Skipped) > 0 {
			why += "; skipped: " + strings.Join(mr.Skipped, ", ")
		}
		return "unknown (" + why + ")"
	}
	return "not evaluated (skipped: " + strings.Join(mr.Skipped, ", ") + ")"
}

// rolloutLine is fleet apply's summary line: the hosts, then how many
// ended in each outcome (ready always, the others when some did).
func rolloutLine(f *FleetReport) (string, error) {
	n := map[string]int{}
	if err := f.eachHost(func(_ int, h *FleetHost) error { n[h.Outcome]++; return nil }); err != nil {
		return "", err
	}
	parts := []string{plural.N(f.Summary.Hosts, "host")}
	for _, o := range []string{OutcomeReady, OutcomeRebootNeeded, OutcomeFailed, OutcomeRolledBack, OutcomeRollbackFailed, OutcomeCancelled, OutcomeSkipped} {
		if n[o] > 0 || o == OutcomeReady {
			parts = append(parts, fmt.Sprintf("%d %s", n[o], o))
		}
	}
	return strings.Join(parts, ", "), nil
}

// runOutcomeCounts are fleet run's outcomes counted: ok always, the others
// when some host had them.
func runOutcomeCounts(s FleetSummary) []string {
	var parts []string
	for _, o := range runOutcomes {
		if s.Outcomes[o] > 0 || o == OutcomeOK {
			parts = append(parts, fmt.Sprintf("%d %s", s.Outcomes[o], o))
		}
	}
	return parts
}

// notEvaluated counts the hosts not evaluated, by status ("2 unreachable"),
// sorted.
func notEvaluated(s FleetSummary) []string {
	var st []string
	for k, n := range s.Statuses {
		if k != "evaluated" {
			st = append(st, fmt.Sprintf("%d %s", n, k))
		}
	}
	sort.Strings(st)
	return st
}

// Counts reports whether a finding counts for the report's mode (every
// finding does when the report covers every mode).
func Counts(r *Report, fd preflight.Finding) bool {
	if r.Mode == "" || len(fd.Modes) == 0 {
		return true
	}
	for _, m := range fd.Modes {
		if string(m) == r.Mode {
			return true
		}
	}
	return false
}

// Skipped are the checks a report's modes were not judged on (--skip),
// sorted.
func Skipped(r *Report) []string {
	var out []string
	for _, m := range r.Modes {
		if m == nil {
			continue
		}
		for _, id := range m.Skipped {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

// blockers are the failing (or unevaluated: "ID?", or skipped: "ID
// (skipped)") check IDs of a report, sorted.
func blockers(r *Report) []string {
	set := map[string]bool{}
	for _, m := range r.Modes {
		if m == nil {
			continue
		}
		for _, b := range m.Blockers {
			set[string(b)] = true
		}
	}
	for _, fd := range r.Findings {
		if fd.Status == preflight.Error {
			set[fd.Check+"?"] = true
		}
	}
	for _, id := range Skipped(r) {
		set[id+" (skipped)"] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
