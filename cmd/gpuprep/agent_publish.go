package main

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// ConditionType is the Node condition the agent sets.
const ConditionType = "GPUPrepReady"

// writeFeatureFile replaces the NFD feature file with rep's labels; when
// the node could not be evaluated, with none but the version, so that no
// stale "ready" stays (NFD drops the labels that left the file).
func (a *agent) writeFeatureFile(rep *report.Report, now time.Time) error {
	if rep == nil {
		rep = &report.Report{}
	}
	var b bytes.Buffer
	if err := report.NFD(&b, rep, report.NFDOptions{Version: version, Expiry: now.Add(a.c.nfdTTL)}); err != nil {
		return err
	}
	p := path.Clean("/" + a.c.featureFile)
	if err := a.root.MkdirAll(path.Dir(p), 0o755); err != nil {
		return fmt.Errorf("feature file %s: %w", p, err)
	}
	if _, err := a.root.ReplaceFile(p, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("feature file %s: %w", p, err)
	}
	return nil
}

func (a *agent) setCondition(ctx context.Context, rep *report.Report, evalErr error, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, a.c.timeout)
	defer cancel()
	cond := conditionFor(rep, a.mode, evalErr)
	changed, err := a.client.SetNodeCondition(ctx, a.c.node, cond, now)
	if err != nil {
		return err
	}
	if changed {
		fmt.Fprintf(a.log, "gpuprep agent: node %s: %s=%s (%s)\n", a.c.node, cond.Type, cond.Status, cond.Reason)
	}
	return nil
}

// conditionFor is GPUPrepReady for mode: True only when the mode is ready;
// False when checks failed, with them and their findings as the message;
// Unknown when the node or a check could not be evaluated, or a check was
// skipped (never True without the evidence).
func conditionFor(rep *report.Report, mode preflight.Mode, evalErr error) kube.Condition {
	c := kube.Condition{Type: ConditionType, Status: "Unknown", Reason: "EvaluationFailed"}
	if evalErr != nil || rep == nil {
		c.Message = "gpuprep could not evaluate the node: " + oneLine(fmt.Sprint(evalErr))
		return c
	}
	mr := rep.Modes[mode]
	switch {
	case mr == nil:
		c.Message = "mode " + string(mode) + " was not evaluated"
	case mr.Ready:
		c.Status, c.Reason, c.Message = "True", "Ready", "ready for "+string(mode)
	case len(mr.Blockers) > 0:
		c.Status, c.Reason = "False", "ChecksFailed"
		c.Message = "not ready for " + string(mode) + ": " + blockerText(rep, mode, mr.Blockers)
	default:
		c.Reason = "NotEvaluated"
		c.Message = "not evaluated for " + string(mode) + ": " + strings.Join(append(append([]string{}, mr.Unknown...), mr.Skipped...), ", ")
	}
	return c
}

// blockerText: "check: message; …" for the failing findings of mode.
func blockerText(rep *report.Report, mode preflight.Mode, ids []string) string {
	var parts []string
	for _, id := range ids {
		var msgs []string
		for _, f := range rep.Findings {
			if f.Check == id && f.Status == preflight.Fail && f.AppliesTo(mode) {
				msgs = append(msgs, oneLine(f.Subject+": "+f.Message))
			}
		}
		parts = append(parts, id+" ("+strings.Join(msgs, "; ")+")")
	}
	return strings.Join(parts, "; ")
}

// oneLine: a host string made safe and short for a Node condition.
func oneLine(s string) string {
	if len(s) > kube.MaxConditionMessage {
		s = strings.ToValidUTF8(s[:kube.MaxConditionMessage], "")
	}
	return strings.Join(strings.Fields(sanitize.Lines(s)), " ")
}
