package main

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// scrapeMetrics is GET /metrics of m, read as Prometheus reads it: the
// Content-Type negotiated to the text format, the body through
// Prometheus' own text parser (github.com/prometheus/common/expfmt), metric
// names held to the legacy character set.
func scrapeMetrics(t *testing.T, m *agentMetrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	assert.Equal(t, expfmt.TypeTextPlain, expfmt.ResponseFormat(rec.Header()).FormatType(), rec.Header().Get("Content-Type"))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	require.NoError(t, err, rec.Body.String())
	return fams
}

// series: each sample of family name, by its labels (name=value, joined
// by commas), as Prometheus parsed it.
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType) map[string]float64 {
	t.Helper()
	f := fams[name]
	require.NotNil(t, f, name)
	assert.Equal(t, typ, f.GetType(), name)
	assert.NotEmpty(t, f.GetHelp(), name)
	out := map[string]float64{}
	for _, s := range f.GetMetric() {
		var ls []string
		for _, l := range s.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := s.GetGauge().GetValue()
		if typ == dto.MetricType_COUNTER {
			v = s.GetCounter().GetValue()
		}
		out[strings.Join(ls, ",")] = v
	}
	return out
}

// The agent's /metrics as Prometheus' own parser reads it, from a real
// report (iommu-off-kernel: container ready, the VM modes not) with a
// hostile check ID and version among its strings: every family with its
// type, the values the report has, and the label values back as they were
// (bounded to 256 bytes) however they are escaped. After an evaluation that
// failed, no readiness at all.
func TestAgentMetricsParseAsPrometheus(t *testing.T) {
	out, errs, _ := gpuprep(t, "check", "--root", fixtureRoot(t, "iommu-off-kernel"), "-o", "json")
	var rep report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), errs)
	hostile := "a\"b\\c\nd" + strings.Repeat("x", 300) + "\xff"
	rep.Modes[preflight.VMPassthrough].Blockers = append(rep.Modes[preflight.VMPassthrough].Blockers, hostile)
	version := "v1 \"q\" \\ \n"
	m := &agentMetrics{version: version}
	at := time.Unix(1764460800, 0)
	m.record(nil, errors.New("unreadable"), at.Add(-time.Minute))
	m.record(&rep, nil, at)

	fams := scrapeMetrics(t, m)
	assert.Equal(t, map[string]float64{"version=" + version: 1}, series(t, fams, "gpuprep_build_info", dto.MetricType_GAUGE))
	assert.Equal(t, map[string]float64{"": 1}, series(t, fams, "gpuprep_evaluation_success", dto.MetricType_GAUGE))
	assert.Equal(t, map[string]float64{"": 1}, series(t, fams, "gpuprep_evaluation_errors_total", dto.MetricType_COUNTER))
	assert.Equal(t, map[string]float64{"": 1764460800}, series(t, fams, "gpuprep_last_evaluation_timestamp_seconds", dto.MetricType_GAUGE))

	ready := map[string]float64{}
	for mode, mr := range rep.Modes {
		ready["mode="+string(mode)] = float64(b2i(mr.Ready))
	}
	require.Len(t, ready, 3)
	assert.Equal(t, float64(1), ready["mode=container"])
	assert.Equal(t, float64(0), ready["mode=vm-passthrough"])
	assert.Equal(t, ready, series(t, fams, "gpuprep_ready", dto.MetricType_GAUGE))

	failing := map[string]float64{}
	for id, st := range report.FailingChecks(&rep) {
		if id == hostile {
			id = hostile[:256] // bounded
		}
		failing["check="+id+",status="+string(st)] = 1
	}
	assert.Contains(t, failing, "check="+hostile[:256]+",status=fail")
	assert.Equal(t, failing, series(t, fams, "gpuprep_check_failing", dto.MetricType_GAUGE))

	s := rep.Summary
	assert.Equal(t, map[string]float64{"status=pass": float64(s.Pass), "status=warn": float64(s.Warn), "status=fail": float64(s.Fail), "status=skip": float64(s.Skip), "status=error": float64(s.Error)},
		series(t, fams, "gpuprep_findings", dto.MetricType_GAUGE))

	m.record(nil, errors.New("unreadable"), at.Add(time.Minute))
	fams = scrapeMetrics(t, m)
	assert.Equal(t, map[string]float64{"": 0}, series(t, fams, "gpuprep_evaluation_success", dto.MetricType_GAUGE))
	assert.Equal(t, map[string]float64{"": 2}, series(t, fams, "gpuprep_evaluation_errors_total", dto.MetricType_COUNTER))
	for _, name := range []string{"gpuprep_ready", "gpuprep_check_failing", "gpuprep_findings"} {
		assert.NotContains(t, fams, name, "no verdict after a failed evaluation")
	}
}
