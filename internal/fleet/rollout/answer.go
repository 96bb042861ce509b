package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
)

// applyAnswer is what the rollout reads of gpuprep apply -o json (its
// ApplyResult, written by cmd/gpuprep's apply).
type applyAnswer struct {
	Kind    string             `json:"kind"`
	Outcome *provision.Outcome `json:"outcome"`
	Error   string             `json:"error,omitempty"`
	Report  *report.Report     `json:"report,omitempty"`
	Log     []string           `json:"log,omitempty"`
}

// applyResultKind is the kind of apply's -o json document.
const applyResultKind = "ApplyResult"

// applied turns a host's apply run into its report entry; started says
// whether apply may have changed the host (so a rollback makes sense).
func (r *rollout) applied(res *fleet.Result) (report.FleetHost, bool) {
	h := report.FleetHost{Name: res.Host.Name, Address: res.Host.Target(), Status: res.Status, Error: res.Err,
		Mode: r.plan.HostMode(res.Host), DurationMs: res.Duration.Milliseconds()}
	switch res.Status {
	case fleet.StatusEvaluated:
	case fleet.StatusCancelled:
		h.Outcome = report.OutcomeCancelled
		return h, false
	case fleet.StatusTimeout, fleet.StatusError: // apply may have run
		h.Outcome = report.OutcomeFailed
		return h, true
	default: // never ran: unreachable, auth, host keys
		h.Outcome = report.OutcomeFailed
		return h, false
	}
	o := res.Output
	code := o.ExitCode
	h.ExitCode, h.Stderr = &code, string(o.Stderr)
	var ar applyAnswer
	if json.Unmarshal(o.Stdout, &ar) != nil || ar.Kind != applyResultKind {
		h.Stdout = string(o.Stdout)
		h.Outcome = report.OutcomeFailed
		h.Error = fmt.Sprintf("gpuprep apply exited %d without an ApplyResult: %s", code, tail(o.Stderr))
		return h, code != ExitUsage
	}
	h.Output = json.RawMessage(o.Stdout)
	h.Report = ar.Report
	h.Outcome, h.Error = answerOutcome(code, ar, o.Stderr)
	return h, true
}

// answerOutcome is the outcome of an apply that answered with ar and
// exit code code, and the error that goes with it.
func answerOutcome(code int, ar applyAnswer, stderr []byte) (string, string) {
	switch {
	case code == ExitOK && ar.Report != nil && report.Verdict(ar.Report) == report.VerdictReady:
		return report.OutcomeReady, ""
	case code == ExitNeedReboot:
		return report.OutcomeRebootNeeded, ""
	case ar.Error != "":
		return report.OutcomeFailed, ar.Error
	case ar.Report != nil:
		return report.OutcomeFailed, "not ready after apply: " + report.Verdict(ar.Report)
	}
	return report.OutcomeFailed, fmt.Sprintf("gpuprep apply exited %d: %s", code, tail(stderr))
}

// rolledBack is a host's rollback run, for its report entry.
func rolledBack(res *fleet.Result) *report.HostRollback {
	rb := &report.HostRollback{Status: res.Status, Error: res.Err}
	if res.Status != fleet.StatusEvaluated {
		return rb
	}
	code := res.Output.ExitCode
	rb.ExitCode, rb.Stderr = &code, string(res.Output.Stderr)
	if json.Valid(res.Output.Stdout) && strings.TrimSpace(string(res.Output.Stdout)) != "" {
		rb.Output = json.RawMessage(res.Output.Stdout)
	}
	if code != ExitOK && code != ExitNeedReboot {
		rb.Error = fmt.Sprintf("gpuprep rollback exited %d: %s", code, tail(res.Output.Stderr))
	}
	rb.RebootRequired = code == ExitNeedReboot
	return rb
}

// applyOutcome is apply's outcome in e's output, and its log; nil without one.
func applyOutcome(e report.FleetHost) (*provision.Outcome, []string) {
	var ar applyAnswer
	if len(e.Output) == 0 || json.Unmarshal(e.Output, &ar) != nil || ar.Outcome == nil {
		return nil, nil
	}
	return ar.Outcome, ar.Log
}

// applyNotes are apply's own notes in its log (why the step could not do
// without the reboot), else its last line.
func applyNotes(log []string) string {
	var notes []string
	for _, l := range log {
		if n, ok := strings.CutPrefix(l, "note: "); ok {
			notes = append(notes, n)
		}
	}
	if len(notes) == 0 && len(log) > 0 {
		notes = log[len(log)-1:]
	}
	return strings.Join(notes, "; ")
}

// tail is the end of a host's output for an error: at most 500 bytes,
// never cut inside a character.
func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		i := len(s) - 500
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		s = "…" + s[i:]
	}
	return s
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
