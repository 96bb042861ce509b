package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/report"
)

// ansibleCheck is gpuprep.node.check: gpuprep check -o json. It only
// reads, so check mode runs it the same. It fails only when no report came
// (a usage error, a host that could not be read); a node not ready, or not
// evaluated (a check skipped or unevaluable: check's exit 3), is a result
// with ready false, which a play asserts on.
func ansibleCheck(a *ansibleArgs) ansibleResult {
	argv := a.commonArgv("check", "-o", "json", "--compact")
	if l := a.list("ignore"); len(l) > 0 {
		argv = append(argv, "--ignore", strings.Join(l, ","))
	}
	if l := a.list("skip"); len(l) > 0 {
		argv = append(argv, "--skip", strings.Join(l, ","))
	}
	code, out, stderr := a.gpuprep(argv...)
	if code != exitOK && code != exitNotReady && code != exitUnknown {
		return failedRun("gpuprep check", code, stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return failedRun("gpuprep check", code, fmt.Sprintf("no report (%v): %s", err, stderr))
	}
	evaluated := rep.Summary.Error == 0 && len(report.Skipped(&rep)) == 0
	return ansibleResult{
		"changed":   false,
		"ready":     rep.Ready,
		"evaluated": evaluated,
		"exit_code": code,
		"report":    json.RawMessage(out),
		"msg":       checkMessage(&rep, evaluated),
	}
}

// checkMessage: one line, for the play's output.
func checkMessage(rep *report.Report, evaluated bool) string {
	what := "every mode"
	if rep.Mode != "" {
		what = rep.Mode
	}
	if rep.Ready {
		return "ready for " + what
	}
	var blockers []string
	seen := map[string]bool{}
	for _, m := range rep.Modes {
		for _, b := range m.Blockers {
			if !seen[b] {
				seen[b] = true
				blockers = append(blockers, b)
			}
		}
	}
	sort.Strings(blockers)
	msg := "not ready for " + what
	if len(blockers) > 0 {
		msg += ": " + strings.Join(blockers, ", ")
	}
	if !evaluated {
		msg += " (not evaluated: a check was skipped or could not be evaluated)"
	}
	return msg
}
