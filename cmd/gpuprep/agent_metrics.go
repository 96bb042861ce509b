package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// agentMetrics holds the agent's last evaluation for /metrics, written in
// Prometheus's text exposition format 0.0.4 (prometheus/docs,
// content/docs/instrumenting/exposition_formats.md: "# HELP"/"# TYPE" lines,
// then `name{label="value"} value`; label values escape \, " and newline):
// a dozen series that need no client library.
type agentMetrics struct {
	mu      sync.Mutex
	rep     *report.Report // nil before the first evaluation, and after one that failed
	last    time.Time      // when the last evaluation ended
	ok      bool           // whether it produced a report
	errs    int            // evaluations that failed
	version string
}

func (m *agentMetrics) record(rep *report.Report, err error, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last, m.ok = now, err == nil
	if err != nil {
		m.rep = nil
		m.errs++
		return
	}
	m.rep = rep
}

// ServeHTTP answers /metrics.
func (m *agentMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.write(w)
}

func (m *agentMetrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	family(&b, "gpuprep_build_info", "gauge", "gpuprep's version (always 1).")
	fmt.Fprintf(&b, "gpuprep_build_info{version=\"%s\"} 1\n", promEscape(m.version))
	family(&b, "gpuprep_evaluation_success", "gauge", "1 when the last evaluation of the node produced a report, 0 when the node could not be evaluated.")
	fmt.Fprintf(&b, "gpuprep_evaluation_success %d\n", b2i(m.ok))
	family(&b, "gpuprep_evaluation_errors_total", "counter", "Evaluations that failed since the agent started.")
	fmt.Fprintf(&b, "gpuprep_evaluation_errors_total %d\n", m.errs)
	if !m.last.IsZero() {
		family(&b, "gpuprep_last_evaluation_timestamp_seconds", "gauge", "When the last evaluation ended (Unix time).")
		fmt.Fprintf(&b, "gpuprep_last_evaluation_timestamp_seconds %d\n", m.last.Unix())
	}
	if m.rep != nil {
		writeReadiness(&b, m.rep)
	}
	_, _ = io.WriteString(w, b.String())
}

// writeReadiness: per mode readiness and the checks that keep modes from
// being ready. No series for a mode or check without evidence: a failed
// evaluation leaves gpuprep_ready out rather than reporting a stale verdict.
func writeReadiness(b *strings.Builder, r *report.Report) {
	family(b, "gpuprep_ready", "gauge", "1 when the node is ready for the GPU workload type, 0 when not (a check failed, could not be evaluated or was skipped).")
	for _, m := range preflight.Modes {
		if mr := r.Modes[m]; mr != nil {
			fmt.Fprintf(b, "gpuprep_ready{mode=\"%s\"} %d\n", m, b2i(mr.Ready))
		}
	}
	status := report.FailingChecks(r)
	family(b, "gpuprep_check_failing", "gauge", "1 for each check that keeps a mode from being ready; status fail, error (not evaluated) or skip.")
	ids := make([]string, 0, len(status))
	for id := range status {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(b, "gpuprep_check_failing{check=\"%s\",status=\"%s\"} 1\n", promEscape(id), status[id])
	}
	family(b, "gpuprep_findings", "gauge", "Findings of the last evaluation, by status.")
	s := r.Summary
	for _, x := range []struct {
		st string
		n  int
	}{{"pass", s.Pass}, {"warn", s.Warn}, {"fail", s.Fail}, {"skip", s.Skip}, {"error", s.Error}} {
		fmt.Fprintf(b, "gpuprep_findings{status=\"%s\"} %d\n", x.st, x.n)
	}
}

func family(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

var promEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// promEscape escapes a label value; host strings are bounded first.
func promEscape(s string) string {
	if len(s) > 256 {
		s = strings.ToValidUTF8(s[:256], "")
	}
	return promEscaper.Replace(strings.ToValidUTF8(s, ""))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
