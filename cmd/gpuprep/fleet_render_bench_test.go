package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// BenchmarkFleetRender is `fleet check -o FORMAT`'s rendering alone, from
// the stream of a fake fleet that answered at once (every host the
// hgx-h200 fixture's report): peak-heap-B/host is the most the heap held
// above what it held before rendering (sampled every millisecond, garbage
// included), divided by the hosts; flat from 1,000 to 10,000 hosts when
// rendering holds no host but the one it writes. CPU-µs/host: rendering's
// CPU per host.
func BenchmarkFleetRender(b *testing.B) {
	stdout := cannedCheck(b)
	for _, n := range []int{1000, 10000} {
		hosts, r := fakeFleet(n, stdout)
		c := &fleetCmd{}
		st, err := c.gather(context.Background(), r, hosts, nil, "")
		if err != nil {
			b.Fatal(err)
		}
		for _, format := range []string{"text", "junit", "markdown", "html"} {
			b.Run(fmt.Sprintf("%s/%d", format, n), func(b *testing.B) {
				var peak float64
				cpu0 := cpuTime()
				for b.Loop() {
					var before runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					stop := peakHeap()
					if err := st.Render(io.Discard, format, false); err != nil {
						b.Fatal(err)
					}
					peak = float64(int64(stop())-int64(before.HeapAlloc)) / float64(n)
				}
				b.ReportMetric(peak, "peak-heap-B/host")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N)/float64(n), "CPU-µs/host")
			})
		}
		if err := st.Close(false); err != nil {
			b.Fatal(err)
		}
	}
}
