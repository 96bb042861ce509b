package rollout

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
)

// heapNow is the live heap after two collections (the second empties the
// pools' victim caches).
func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// bigAnswer is a ready apply whose answer carries a log of size bytes, made
// afresh for each run (as each host's output is its own).
func bigAnswer(size int) reply {
	return func(h *fleet.Host) *fleet.Result {
		return answer(ExitOK, &provision.Outcome{BootID: "b1"}, "", readyReport(), strings.Repeat("x", size))(h)
	}
}

// One batch of 64 hosts, each answering 64 KiB: while the last host runs,
// the 63 finished ones are in the stream, not in memory (held whole, they
// were 4 MiB and more); a host whose entry the phase may still change (a
// failure to roll back) stays held until the phase ends, and the report
// equals what the whole report renders (rig.run's sameFromStream).
func TestPhaseHoldsOnlyTheHostsUnderWay(t *testing.T) {
	const n, size = 64, 64 << 10
	r := newRig()
	r.opts.Canary, r.opts.Batch, r.opts.RollbackOnFailure, r.opts.MaxFailures = 0, n, true, n
	var names []string
	var before, atLast uint64
	for i := range n {
		name := fmt.Sprintf("h%02d", i)
		names = append(names, name)
		switch i {
		case 0:
			r.fake.on(name, applyCmd, func(h *fleet.Host) *fleet.Result {
				before = heapNow()
				return bigAnswer(size)(h)
			})
		case 1:
			r.fake.on(name, applyCmd, stepFailed("kernel-args: grub-mkconfig exited 1")).on(name, "rollback", rolledBackOK())
		case n - 1:
			r.fake.on(name, applyCmd, func(h *fleet.Host) *fleet.Result {
				atLast = heapNow()
				return bigAnswer(size)(h)
			})
		default:
			r.fake.on(name, applyCmd, bigAnswer(size))
		}
	}
	fr := r.run(t, hostsNamed(names...))
	grown := int64(atLast) - int64(before)
	t.Logf("heap grew %d B over %d finished hosts of %d B answers (%d B/host)", grown, n-2, size, grown/(n-2))
	assert.Less(t, grown, int64(n*size/8), "the finished hosts' answers are still held")
	require.Len(t, fr.Hosts, n)
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeRolledBack, hosts["h01"].Outcome)
	assert.Equal(t, report.OutcomeReady, hosts["h63"].Outcome)
	assert.Equal(t, "batch 1", hosts["h00"].Phase)
	assert.Len(t, hosts["h05"].Output, len(hosts["h63"].Output), "a finished host's entry went out whole")
}
