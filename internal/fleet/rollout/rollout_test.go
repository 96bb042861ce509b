package rollout

import (
	"context"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/report"
)

func TestPhasesCanaryAndBatches(t *testing.T) {
	hosts := hostsNamed("a", "b", "c", "d", "e", "f")
	cases := []struct {
		canary, batch int
		order         []string
	}{
		{1, 2, []string{"canary:a", "batch 1:b,c", "batch 2:d,e", "batch 3:f"}},
		{0, 4, []string{"batch 1:a,b,c,d", "batch 2:e,f"}},
		{2, 10, []string{"canary:a,b", "batch 1:c,d,e,f"}},
		{9, 1, []string{"canary:a,b,c,d,e,f"}},
	}
	for _, tc := range cases {
		var got []string
		for _, ph := range Phases(hosts, tc.canary, tc.batch) {
			s := ph.Name + ":"
			for i, h := range ph.Hosts {
				if i > 0 {
					s += ","
				}
				s += h.Name
			}
			got = append(got, s)
		}
		assert.Equal(t, tc.order, got, "canary %d batch %d", tc.canary, tc.batch)
	}
}

func TestRolloutAllReadyRunsEveryPhase(t *testing.T) {
	r := newRig()
	r.opts.Batch = 2
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		r.fake.on(n, applyCmd, ready("b1"))
	}
	fr := r.run(t, hostsNamed("a", "b", "c", "d", "e"))
	require.Len(t, fr.Hosts, 5)
	phases := map[string]string{}
	for _, h := range fr.Hosts {
		assert.Equal(t, report.OutcomeReady, h.Outcome, h.Name)
		phases[h.Name] = h.Phase
		assert.Equal(t, []string{applyCmd}, r.fake.callsOf(h.Name))
	}
	assert.Equal(t, map[string]string{"a": "canary", "b": "batch 1", "c": "batch 1", "d": "batch 2", "e": "batch 2"}, phases)
	assert.Empty(t, fr.Rollout.Stopped)
	assert.Equal(t, ExitOK, ExitCode(fr))
	assert.Contains(t, r.log.String(), "gpuprep fleet apply: batch 2: 2 hosts")
}

func TestRolloutFailingCanaryStopsIt(t *testing.T) {
	r := newRig()
	r.fake.on("a", applyCmd, stepFailed("kernel-args: grub-mkconfig exited 1"))
	r.fake.on("b", applyCmd, ready("b1")).on("c", applyCmd, ready("b1"))
	fr := r.run(t, hostsNamed("a", "b", "c"))
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeFailed, hosts["a"].Outcome)
	assert.Equal(t, "kernel-args: grub-mkconfig exited 1", hosts["a"].Error)
	for _, n := range []string{"b", "c"} {
		assert.Equal(t, report.OutcomeSkipped, hosts[n].Outcome, n)
		assert.Empty(t, r.fake.callsOf(n), "%s was started after the canary failed", n)
	}
	assert.Equal(t, "canary a failed: no other host was started", fr.Rollout.Stopped)
	assert.Equal(t, "not started: canary a failed: no other host was started", hosts["b"].Error)
	assert.Equal(t, ExitNotReady, ExitCode(fr))
}

func TestRolloutCanaryNeedingRebootStopsIt(t *testing.T) {
	r := newRig() // without --reboot: the canary's reboot is the user's
	r.fake.on("a", applyCmd, asks("b1", "kernel-args"))
	fr := r.run(t, hostsNamed("a", "b"))
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeRebootNeeded, hosts["a"].Outcome)
	assert.Equal(t, report.OutcomeSkipped, hosts["b"].Outcome)
	assert.Contains(t, fr.Rollout.Stopped, "canary a not verified ready (reboot needed)")
	assert.Equal(t, ExitNeedReboot, ExitCode(fr))
}

func TestRolloutStopsAfterBatchOverMaxFailures(t *testing.T) {
	r := newRig()
	r.opts.Canary, r.opts.Batch, r.opts.MaxFailures = 1, 2, 1
	r.fake.on("a", applyCmd, ready("b1"))
	r.fake.on("b", applyCmd, stepFailed("vfio-bind: device busy")) // batch 1
	r.fake.on("c", applyCmd, ready("b1"))
	// d (batch 2): unreachable, one more failure: 2 > 1
	r.fake.on("e", applyCmd, ready("b1"))
	r.fake.on("f", applyCmd, ready("b1")) // batch 3
	fr := r.run(t, hostsNamed("a", "b", "c", "d", "e", "f"))
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeReady, hosts["c"].Outcome, "one failure is within --max-failures 1")
	assert.Equal(t, report.OutcomeFailed, hosts["d"].Outcome)
	assert.Equal(t, report.OutcomeSkipped, hosts["f"].Outcome)
	assert.Empty(t, r.fake.callsOf("f"))
	assert.Equal(t, 2, fr.Rollout.Failures)
	assert.Equal(t, "2 hosts failed, more than --max-failures 1: stopped after batch 2", fr.Rollout.Stopped)
	assert.Equal(t, ExitNotReady, ExitCode(fr))
}

func TestRolloutRollsBackFailedHosts(t *testing.T) {
	r := newRig()
	r.opts.Canary, r.opts.MaxFailures, r.opts.RollbackOnFailure = 0, 5, true
	r.fake.on("a", applyCmd, stepFailed("vgpu-install: installer exited 1")).on("a", rollbackCmd, rolledBackOK())
	r.fake.on("b", applyCmd, stepFailed("label: node not found")).on("b", rollbackCmd, rollbackFails())
	r.fake.on("c", applyCmd, ready("b1"))
	// d: unreachable, apply never ran: nothing to roll back
	fr := r.run(t, hostsNamed("a", "b", "c", "d"))
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeRolledBack, hosts["a"].Outcome)
	assert.Equal(t, report.OutcomeRollbackFailed, hosts["b"].Outcome)
	require.NotNil(t, hosts["b"].Rollback)
	assert.Contains(t, hosts["b"].Rollback.Error, "gpuprep rollback exited 1: restore /etc/default/grub: permission denied")
	assert.Equal(t, report.OutcomeReady, hosts["c"].Outcome)
	assert.Equal(t, report.OutcomeFailed, hosts["d"].Outcome)
	assert.Nil(t, hosts["d"].Rollback)
	assert.Equal(t, []string{applyCmd, rollbackCmd}, r.fake.callsOf("a"))
	assert.Equal(t, []string{applyCmd}, r.fake.callsOf("c"))
	assert.Equal(t, []string{applyCmd}, r.fake.callsOf("d"))
	assert.Equal(t, 3, fr.Rollout.Failures)
	assert.Contains(t, r.log.String(), "rolling back a, b")
}

func TestRolloutWithoutRollbackLeavesFailedHosts(t *testing.T) {
	r := newRig()
	r.fake.on("a", applyCmd, stepFailed("nouveau: modprobe -r exited 1")).on("a", rollbackCmd, rolledBackOK())
	fr := r.run(t, hostsNamed("a"))
	assert.Equal(t, report.OutcomeFailed, fr.Hosts[0].Outcome)
	assert.Equal(t, []string{applyCmd}, r.fake.callsOf("a"))
}

func TestRolloutApplyWithoutAnswer(t *testing.T) {
	r := newRig()
	r.fake.on("a", applyCmd, func(h *fleet.Host) *fleet.Result {
		return &fleet.Result{Host: h, Status: fleet.StatusEvaluated, Output: fleet.Output{ExitCode: ExitUsage, Stderr: []byte("unknown flag: --nvswitch")}}
	}).on("a", rollbackCmd, rolledBackOK())
	r.opts.RollbackOnFailure = true
	fr := r.run(t, hostsNamed("a"))
	h := fr.Hosts[0]
	assert.Equal(t, report.OutcomeFailed, h.Outcome, "a usage error changed nothing: no rollback")
	assert.Equal(t, "gpuprep apply exited 2 without an ApplyResult: unknown flag: --nvswitch", h.Error)
	assert.Equal(t, []string{applyCmd}, r.fake.callsOf("a"))
}

func TestRolloutInterruptedSkipsTheRest(t *testing.T) {
	r := newRig()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.ctx = ctx
	r.fake.on("a", applyCmd, func(h *fleet.Host) *fleet.Result {
		cancel() // Ctrl-C while the canary runs
		return &fleet.Result{Host: h, Status: fleet.StatusCancelled, Err: "interrupted while running"}
	})
	fr := r.run(t, hostsNamed("a", "b"))
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeCancelled, hosts["a"].Outcome)
	assert.Equal(t, report.OutcomeSkipped, hosts["b"].Outcome)
	assert.Equal(t, "interrupted", fr.Rollout.Stopped)
	assert.True(t, fr.Interrupted)
	assert.Empty(t, r.fake.callsOf("b"))
	assert.Equal(t, ExitUnknown, ExitCode(fr))
	assert.Contains(t, r.log.String(), "interrupted; the report shows the hosts that finished")
}
