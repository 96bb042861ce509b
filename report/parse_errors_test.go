package report

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseSaysWhatTheFileIsNot: report render on a file that is not a
// report says what the file is and what a report is, in JSON's words, at a
// line; never Go's type names. A report with only apiVersion and kind is
// refused (it rendered as "No GPU selected ()" with exit 0).
func TestParseSaysWhatTheFileIsNot(t *testing.T) {
	const want = "a gpuprep report is the JSON that gpuprep check -o json or gpuprep fleet check -o json writes (apiVersion gpuprep/v1, kind ReadinessReport or FleetReport)"
	for _, tc := range []struct{ name, data, err string }{
		{"text", "hello\n", "r.json:1: not a gpuprep report: not JSON (invalid character 'h' looking for beginning of value); " + want},
		{"a list", "[1, 2]\n", "r.json: not a gpuprep report: the file is a JSON list, not an object; " + want},
		{"another object", `{"a": 1}`, "r.json: not a gpuprep report: a JSON object without apiVersion and kind; " + want},
		{"only apiVersion and kind", `{"apiVersion": "gpuprep/v1", "kind": "ReadinessReport"}`,
			"r.json: a ReadinessReport without host and findings: not a report gpuprep wrote (it always writes host and findings)"},
		{"no findings", `{"apiVersion": "gpuprep/v1", "kind": "ReadinessReport", "host": {"name": "h"}, "findings": null}`,
			"r.json: a ReadinessReport without findings: not a report gpuprep wrote (it always writes host and findings)"},
		{"a fleet without hosts", `{"apiVersion": "gpuprep/v1", "kind": "FleetReport"}`,
			"r.json: a FleetReport without hosts: not a report gpuprep wrote (it always writes hosts)"},
		// line 3 holds findings
		{"a field of the wrong kind", "{\"apiVersion\": \"gpuprep/v1\", \"kind\": \"ReadinessReport\",\n\"host\": {},\n\"findings\": \"none\"}\n",
			"r.json:3: findings: a string where a report has a list"},
		{"a nested field of the wrong kind", "{\"apiVersion\": \"gpuprep/v1\", \"kind\": \"FleetReport\",\n\"hosts\": [\n {\"name\": 7}]}\n",
			"r.json:3: hosts.name: a number where a report has a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("r.json", []byte(tc.data))
			require.EqualError(t, err, tc.err)
		})
	}
}

// TestFleetSummaryCountsInEnglish: one host is "1 host", not "1 hosts".
func TestFleetSummaryCountsInEnglish(t *testing.T) {
	for n, want := range map[int]string{1: `^1 host\b`, 2: `^2 hosts\b`} {
		line, err := summaryLine(&FleetReport{Summary: FleetSummary{Hosts: n}})
		require.NoError(t, err)
		require.Regexp(t, want, line)
	}
}
