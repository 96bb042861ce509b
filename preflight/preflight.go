// Package preflight holds gpuprep's read-only checks: whether a node is ready
// for each GPU workload type the NVIDIA GPU Operator supports, why not, and
// how to fix it.
package preflight

import (
	"fmt"
	"strings"
)

// Mode is a GPU workload type (the value of nvidia.com/gpu.workload.config).
type Mode string

// The workload types.
const (
	Container     Mode = "container"
	VMPassthrough Mode = "vm-passthrough"
	VMVGPU        Mode = "vm-vgpu"
)

// Modes lists every mode, in report order.
var Modes = []Mode{Container, VMPassthrough, VMVGPU}

// VMModes are the modes that run VMs.
var VMModes = []Mode{VMPassthrough, VMVGPU}

// ParseMode validates a mode name strictly.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown mode %q: want container, vm-passthrough or vm-vgpu", s)
}

// Status is a finding's verdict.
type Status string

// Statuses. Error means the check could not be evaluated: it is never
// reported as a pass or a fail.
const (
	Pass  Status = "pass"
	Warn  Status = "warn"
	Fail  Status = "fail"
	Skip  Status = "skip"
	Error Status = "error"
)

// Finding is one verdict about one subject.
type Finding struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Subject string `json:"subject"`
	Message string `json:"message"`
	Remedy  string `json:"remedy"`
	Fixable bool   `json:"fixable"`
	// FixCommand is the gpuprep command that fixes it, when Fixable.
	FixCommand string `json:"fixCommand,omitempty"`
	// Modes are the modes this finding counts for; empty means all the
	// check's modes.
	Modes []Mode `json:"modes,omitempty"`
	// Ignored: a fail demoted to a warn by --ignore.
	Ignored bool `json:"ignored,omitempty"`
	// Facts are typed data the check found, for programs to read instead
	// of the message.
	Facts *Facts `json:"facts,omitempty"`
}

// AppliesTo reports whether f counts for mode m.
func (f Finding) AppliesTo(m Mode) bool {
	for _, x := range f.Modes {
		if x == m {
			return true
		}
	}
	return false
}

// Check is one preflight check with a stable ID. It describes itself:
// what it verifies (Doc), which provision steps change its verdict
// (ChangedBy) and whether a fail is beyond what a plan changes (Beyond).
type Check struct {
	ID    string
	Title string
	Modes []Mode
	Doc   Doc
	// ChangedBy are the provision step IDs whose run can change the verdict.
	ChangedBy []string
	Beyond    Beyond
	// Remedies are the usual fixes of its fails (each finding says its own).
	Remedies []string
	Run      func(e *Env) []Finding
}

// Options control a run.
type Options struct {
	Mode Mode // "" for every mode
	// Skip are checks not to run: a mode they belong to is not ready (its
	// readiness was not established), and lists them in Skipped.
	Skip map[string]bool
	// Ignore are checks whose fails (and errors: the user vouches for
	// them) become warns; "all" for every check.
	Ignore map[string]bool
}

// ModeResult is the readiness for one mode.
type ModeResult struct {
	Ready    bool     `json:"ready"`
	Blockers []string `json:"blockers"`
	// Unknown lists checks that could not be evaluated for this mode.
	Unknown []string `json:"unknown,omitempty"`
	// Skipped lists checks of this mode not run (--skip): Ready is false,
	// as for Unknown; --ignore is how to accept a check's failure.
	Skipped []string `json:"skipped,omitempty"`
}

// Result is the outcome of a run.
type Result struct {
	Findings []Finding
	Modes    map[Mode]*ModeResult
	Ran      []string
}

// Run runs the checks, demotes ignored fails and computes per-mode readiness.
func Run(e *Env, checks []Check, o Options) (*Result, error) {
	for id := range o.Skip {
		if !known(checks, id) {
			return nil, fmt.Errorf("--skip %s: no such check (gpuprep checks lists them)", id)
		}
	}
	for id := range o.Ignore {
		if id != "all" && !known(checks, id) {
			return nil, fmt.Errorf("--ignore %s: no such check (gpuprep checks lists them)", id)
		}
	}
	res := &Result{Modes: map[Mode]*ModeResult{}}
	for _, m := range Modes {
		res.Modes[m] = &ModeResult{Ready: true, Blockers: []string{}}
	}
	for _, c := range checks {
		if o.Mode != "" && !hasMode(c.Modes, o.Mode) {
			continue
		}
		if o.Skip[c.ID] {
			// said, so that a reader of the report (or of its JSON) sees
			// that it was not judged: never a silent pass
			res.Findings = append(res.Findings, Finding{Check: c.ID, Status: Skip, Subject: "--skip " + c.ID,
				Message: "not run (--skip): the modes it belongs to are not evaluated, so not ready",
				Remedy:  "run it; to accept its failure, --ignore " + c.ID + " instead", Modes: c.Modes})
			for _, m := range c.Modes {
				if mr := res.Modes[m]; mr != nil && (o.Mode == "" || m == o.Mode) {
					mr.Ready = false
					mr.Skipped = appendOnce(mr.Skipped, c.ID)
				}
			}
			continue
		}
		res.Ran = append(res.Ran, c.ID)
		for _, f := range safeRun(c, e) {
			f.Check = c.ID
			if len(f.Modes) == 0 {
				f.Modes = c.Modes
			}
			if o.Mode != "" && !f.AppliesTo(o.Mode) {
				continue
			}
			if (f.Status == Fail || f.Status == Error) && (o.Ignore[c.ID] || o.Ignore["all"]) {
				f.Status = Warn
				f.Ignored = true
				f.Message += " (ignored)"
			}
			res.Findings = append(res.Findings, f)
			for _, m := range f.Modes {
				mr := res.Modes[m]
				switch f.Status {
				case Fail:
					mr.Ready = false
					mr.Blockers = appendOnce(mr.Blockers, c.ID)
				case Error:
					mr.Ready = false
					mr.Unknown = appendOnce(mr.Unknown, c.ID)
				}
			}
		}
	}
	return res, nil
}

// safeRun turns a panicking check into an error finding: one broken check
// must not hide the others' verdicts.
func safeRun(c Check, e *Env) (out []Finding) {
	defer func() {
		if r := recover(); r != nil {
			out = []Finding{{Status: Error, Subject: c.ID, Message: fmt.Sprintf("check crashed: %v", r),
				Remedy: "report this as a gpuprep bug, with `gpuprep check -o json` output"}}
		}
	}()
	return c.Run(e)
}

func known(checks []Check, id string) bool {
	for _, c := range checks {
		if c.ID == id {
			return true
		}
	}
	return false
}

func hasMode(ms []Mode, m Mode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// Summary counts findings by status.
type Summary struct {
	Pass  int `json:"pass"`
	Warn  int `json:"warn"`
	Fail  int `json:"fail"`
	Skip  int `json:"skip"`
	Error int `json:"error"`
}

// Summarize counts the findings.
func (r *Result) Summarize() Summary {
	var s Summary
	for _, f := range r.Findings {
		switch f.Status {
		case Pass:
			s.Pass++
		case Warn:
			s.Warn++
		case Fail:
			s.Fail++
		case Skip:
			s.Skip++
		case Error:
			s.Error++
		}
	}
	return s
}

// ParseIDList splits "a,b , c" into a set.
func ParseIDList(vals []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range vals {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				out[id] = true
			}
		}
	}
	return out
}
