package report

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// heapProbe is an output that notes, at every write, the heap still live
// after a GC: what the renderer holds while it writes.
type heapProbe struct{ top uint64 }

func (p *heapProbe) Write(b []byte) (int, error) {
	p.top = max(p.top, liveHeap())
	return len(b), nil
}

// liveHeap is the heap live after two GCs: the first moves sync.Pools'
// items to their victim caches, the second drops them — the text wrap's
// 4 MiB ansi parsers (charmbracelet/x/ansi parser_sync.go, through
// lipgloss and cellbuf's Wrap) are pooled, and one GC alone left 0, 4 or
// 8 MiB of them live at random, which is no host's.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// bigHost is a host with a report of 40 findings (as a GPU node's with a
// few GPUs), one of them failing.
func bigHost(i int) FleetHost {
	var fs []preflight.Finding
	for k := range 40 {
		st := preflight.Pass
		if k == 7 {
			st = preflight.Fail
		}
		fs = append(fs, preflight.Finding{Check: fmt.Sprintf("check.n%02d", k), Status: st, Subject: fmt.Sprintf("0000:%02x:00.0", k),
			Message: "a finding's message, as long as a real one is, give or take a few words", Remedy: "gpuprep grub ensure --yes"})
	}
	return FleetHost{Name: fmt.Sprintf("node-%05d", i), Address: fmt.Sprintf("10.0.%d.%d:22", i>>8, i&255), Status: "evaluated",
		Mode: "vm-passthrough", Report: hostReport("vm-passthrough", fs...)}
}

// liveWhileRendering is the heap held above what the stream itself holds
// while a stream of n hosts renders in format.
func liveWhileRendering(t *testing.T, n int, format string) uint64 {
	st, err := NewFleetStream(filepath.Join(t.TempDir(), "fleet.json"), &FleetReport{Mode: "vm-passthrough"}, n)
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close(false)) }()
	for i := range n {
		h := bigHost(i)
		require.NoError(t, st.Add(i, &h))
	}
	base := liveHeap()
	p := &heapProbe{}
	require.NoError(t, st.Render(p, format, false))
	return p.top - min(p.top, base)
}

// A fleet report rendered from its stream holds one host at a time, not
// the fleet: the heap it holds while writing does not grow with the hosts
// (200 and 2,000 hosts: under 256 bytes per host more; every host read
// back at once held some 20 KB each).
func TestFleetStreamRendersInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 2,200 hosts four times")
	}
	for _, format := range []string{"text", "junit", "markdown", "html"} {
		small, big := liveWhileRendering(t, 200, format), liveWhileRendering(t, 2000, format)
		perHost := (float64(big) - float64(small)) / 1800
		t.Logf("%s: %d B live at 200 hosts, %d B at 2,000: %.0f B per host", format, small, big, perHost)
		require.Less(t, perHost, 256.0, "%s: the heap grows with the hosts rendered", format)
	}
}
