package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/report"
)

// hostsSoFar decodes the host entries of a fleet report file being
// written: its head, then each complete entry, up to where it ends.
func hostsSoFar(t *testing.T, b []byte) []report.FleetHost {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if tok == "hosts" {
			break
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil
	}
	var out []report.FleetHost
	for dec.More() {
		var h report.FleetHost
		if dec.Decode(&h) != nil {
			break
		}
		out = append(out, h)
	}
	return out
}

// A fleet check's report file has each host's entry as soon as the host
// finishes: with the first host still running, the others' entries are in
// the file; at the end the file is the whole report, byte for byte what
// -o json prints, and what every format renders from it is what the
// report held in memory (as fleet check made it before it streamed)
// renders.
func TestFleetReportStreamsAsHostsFinish(t *testing.T) {
	stdout := cannedCheck(t)
	hosts, r := fakeFleet(6, stdout)
	hosts[3].Problem = "a problem of its own in the inventory" // never contacted
	release := make(chan struct{})
	remote := r.Remote
	r.Remote = func(ctx context.Context, h *fleet.Host, args []string) (fleet.Output, error) {
		if h == hosts[0] {
			<-release // the first host answers last
		}
		return remote(ctx, h, args)
	}
	r.Parallel = 3
	c := &fleetCmd{}
	file := filepath.Join(t.TempDir(), "fleet.json")
	type got struct {
		st  *report.FleetStream
		err error
	}
	done := make(chan got, 1)
	go func() {
		st, err := c.gather(context.Background(), r, hosts, nil, file)
		done <- got{st, err}
	}()

	var seen []report.FleetHost
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if seen = hostsSoFar(t, b); len(seen) == 5 {
			break
		}
	}
	require.Len(t, seen, 5, "the five other hosts' entries while the first still runs")
	var names []string
	for _, h := range seen {
		names = append(names, h.Name)
		if h.Name != hosts[3].Name {
			assert.NotNil(t, h.Report, h.Name)
			assert.Equal(t, report.VerdictNotReady, h.Verdict, h.Name)
		}
	}
	assert.NotContains(t, names, hosts[0].Name)
	select {
	case <-done:
		t.Fatal("gather returned before the first host answered")
	default:
	}
	close(release)
	g := <-done
	require.NoError(t, g.err)

	var js bytes.Buffer
	require.NoError(t, g.st.WriteJSON(&js, false))
	require.NoError(t, g.st.Close(false))
	saved, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, js.String(), string(saved), "the file ends as -o json's document")

	// The same results as fleet check held them before: every host's
	// report in memory, then Finish.
	want := &report.FleetReport{}
	for i, h := range hosts {
		res := &fleet.Result{Host: h, Index: i, Status: fleet.StatusEvaluated, Output: fleet.Output{Stdout: stdout, ExitCode: 1}}
		var rep *report.Report
		if h.Problem != "" {
			res.Status, res.Err = fleet.StatusError, h.Problem
		} else {
			rep, err = parseReport(res.Output)
			require.NoError(t, err)
		}
		fh := c.fleetHost(res, nil, rep)
		fh.DurationMs = 0
		want.Hosts = append(want.Hosts, fh)
	}
	want.Finish()
	doc, err := report.Parse(file, saved)
	require.NoError(t, err)
	require.Len(t, doc.Fleet.Hosts, len(hosts))
	for i := range doc.Fleet.Hosts {
		assert.Equal(t, hosts[i].Name, doc.Fleet.Hosts[i].Name, "inventory order")
		doc.Fleet.Hosts[i].DurationMs = 0 // the one thing that differs between runs
	}
	for _, format := range report.Formats {
		var a, b bytes.Buffer
		require.NoError(t, report.Render(&a, &report.Document{Fleet: want}, format))
		require.NoError(t, report.Render(&b, doc, format))
		assert.Equal(t, a.String(), b.String(), format)
	}
}
