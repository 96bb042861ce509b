package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet"
)

// cannedCheck is one hgx-h200 host's `check -o json --compact`, as the
// agent prints it (built once per test binary).
func cannedCheck(tb testing.TB) []byte {
	tb.Helper()
	dir := tb.TempDir()
	if err := fixture.Build("hgx-h200", dir); err != nil {
		tb.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := execute([]string{"--root", dir, "check", "--mode", "vm-passthrough", "-o", "json", "--compact"}, &out, &errb) // a gate names its mode
	if code != 0 && code != 1 && code != 3 {
		tb.Fatalf("check exited %d: %s", code, errb.String())
	}
	return out.Bytes()
}

// fakeFleet is n hosts and a Runner whose Remote answers each at once with
// stdout (a copy per host, as each SSH session reads its own).
func fakeFleet(n int, stdout []byte) ([]*fleet.Host, *fleet.Runner) {
	hosts := make([]*fleet.Host, n)
	for i := range hosts {
		hosts[i] = &fleet.Host{Name: fmt.Sprintf("node-%05d", i), Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 22, User: "ops"}
	}
	c := &fleetCmd{}
	r := &fleet.Runner{
		Parallel: 32,
		Args:     func(h *fleet.Host) ([]string, error) { return c.remoteArgs(h, nil) },
		Remote: func(context.Context, *fleet.Host, []string) (fleet.Output, error) {
			return fleet.Output{Stdout: bytes.Clone(stdout), ExitCode: 1}, nil
		},
	}
	return hosts, r
}

// BenchmarkFleetCoordinator is `fleet check`'s client alone on a fake
// fleet that answers at once (every host the hgx-h200 fixture's report):
// the runner, each host's parse and merge, the summary, and the JSON
// report written out. retained-B/host is the heap still held, after a GC,
// once every host has answered and before the report is written (what the
// client keeps per finished host); peak-heap-B/host the most the heap
// held during the run and the writing; CPU-µs/host the whole run's CPU.
func BenchmarkFleetCoordinator(b *testing.B) {
	stdout := cannedCheck(b)
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			hosts, r := fakeFleet(n, stdout)
			c := &fleetCmd{output: "json"}
			var retained, peak float64
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				var before runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				stop := peakHeap()
				out, err := c.benchRun(context.Background(), r, hosts, func() {
					var m runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&m)
					retained = float64(int64(m.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
				})
				if err != nil {
					b.Fatal(err)
				}
				peak = float64(int64(stop())-int64(before.HeapAlloc)) / float64(n)
				_ = out
			}
			el := cpuTime() - cpu0
			b.ReportMetric(retained, "retained-B/host")
			b.ReportMetric(peak, "peak-heap-B/host")
			b.ReportMetric(float64(el.Microseconds())/float64(b.N)/float64(n), "CPU-µs/host")
		})
	}
}

// cpuTime is this process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakHeap samples the heap every millisecond until stop is called, which
// returns the largest HeapAlloc seen.
func peakHeap() (stop func() uint64) {
	done := make(chan struct{})
	res := make(chan uint64)
	go func() {
		var m runtime.MemStats
		var top uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapAlloc)
			select {
			case <-done:
				res <- top
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-res }
}

// benchRun is one fleet check on r's fake fleet, the report written to
// io.Discard; answered runs once every host has answered, before the
// report is written.
func (c *fleetCmd) benchRun(ctx context.Context, r *fleet.Runner, hosts []*fleet.Host, answered func()) (_ int, err error) {
	st, err := c.gather(ctx, r, hosts, nil, "")
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, st.Close(false)) }()
	answered()
	if err := st.WriteJSON(io.Discard, false); err != nil {
		return 0, err
	}
	return st.Summary().Hosts, nil
}
