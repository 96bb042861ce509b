package main

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/report"
)

// BenchmarkFleetCollect200 is the fleet client's own work on a warm run's
// answers, after the SSH sessions: 200 hosts' `check -o json` reports (the
// hgx-h200 fixture's, as the agent prints them) parsed, merged into the
// fleet report and written as JSON (what bench/fleet.sh asks for).
func BenchmarkFleetCollect200(b *testing.B) {
	dir := b.TempDir()
	if err := fixture.Build("hgx-h200", dir); err != nil {
		b.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := execute([]string{"--root", dir, "check", "-o", "json", "--compact"}, &out, &errb)
	if code != 0 && code != 1 && code != 3 {
		b.Fatalf("check exited %d: %s", code, errb.String())
	}
	stdout := out.Bytes()
	b.SetBytes(int64(200 * len(stdout)))
	c := &fleetCmd{}
	results := make([]*fleet.Result, 200)
	for i := range results {
		h := &fleet.Host{Name: fmt.Sprintf("node-%03d", i), Address: fmt.Sprintf("127.77.0.%d", i)}
		results[i] = &fleet.Result{Host: h, Status: fleet.StatusEvaluated, Output: fleet.Output{Stdout: stdout, ExitCode: 1}}
	}
	b.ReportAllocs()
	for b.Loop() {
		fr := &report.FleetReport{}
		for _, res := range results {
			rep, err := parseReport(res.Output)
			if err != nil {
				b.Fatal(err)
			}
			fr.Hosts = append(fr.Hosts, c.fleetHost(res, nil, rep))
		}
		fr.Finish()
		if err := report.Render(io.Discard, &report.Document{Fleet: fr}, "json"); err != nil {
			b.Fatal(err)
		}
	}
}
