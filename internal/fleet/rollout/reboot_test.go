package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/report"
)

func rebootRig() *rig {
	r := newRig()
	r.opts.Reboot = true
	r.opts.Canary = 0
	return r
}

func TestRebootWaitUntilBackAndReady(t *testing.T) {
	r := rebootRig()
	r.fake.on("a", rebootCmd, asks("b1", "kernel-args"))
	// going down, then still the boot that asked, then back
	r.fake.on("a", applyCmd, unreachable(), asks("b1", "kernel-args"), readyAfter("b2", "kernel-args"))
	fr := r.run(t, hostsNamed("a"))
	h := fr.Hosts[0]
	assert.Equal(t, report.OutcomeReady, h.Outcome, h.Error)
	require.NotNil(t, h.Reboot)
	assert.True(t, h.Reboot.Completed)
	assert.Equal(t, 1, h.Reboot.Reboots)
	assert.Equal(t, 3, h.Reboot.Attempts)
	assert.Equal(t, []string{"kernel-args"}, h.Reboot.Reasons)
	assert.Equal(t, "batch 1", h.Phase, "the phase of an entry the reboot wait replaced")
	assert.Equal(t, (45 * time.Second).Milliseconds(), h.Reboot.WaitedMs, "three polls of 15s on the clock given")
	assert.Equal(t, []string{rebootCmd, applyCmd, applyCmd, applyCmd}, r.fake.callsOf("a"))
	assert.Contains(t, r.log.String(), "gpuprep fleet: a ready after its reboot (45s)")
	assert.Equal(t, ExitOK, ExitCode(fr))
}

func TestRebootNeverBackTimesOut(t *testing.T) {
	r := rebootRig()
	r.opts.RebootTimeout, r.opts.RollbackOnFailure = 2*time.Minute, true
	r.fake.on("a", rebootCmd, lost()).on("a", rollbackCmd, rolledBackOK())
	// a: apply again is unreachable for ever
	fr := r.run(t, hostsNamed("a"))
	h := fr.Hosts[0]
	assert.Equal(t, report.OutcomeFailed, h.Outcome, "never back: failed, and not rolled back (its state is unknown)")
	require.NotNil(t, h.Reboot)
	assert.False(t, h.Reboot.Completed)
	assert.Equal(t, 7, h.Reboot.Attempts, "tries at 15s … 105s; at 120s the time is up")
	assert.Equal(t, "reboot: not back from the reboot within 2m0s (last try: dial tcp: connection refused)", h.Error)
	assert.NotContains(t, r.fake.callsOf("a"), rollbackCmd)
	assert.Equal(t, 1, fr.Rollout.Failures)
	assert.Equal(t, ExitNotReady, ExitCode(fr))
}

func TestRebootLostAndNoTrySaysSo(t *testing.T) {
	r := rebootRig()
	r.opts.RebootTimeout, r.opts.RebootPoll = time.Minute, 2*time.Minute // the time is up before the first try
	r.fake.on("a", rebootCmd, lost())
	fr := r.run(t, hostsNamed("a"))
	assert.Contains(t, fr.Hosts[0].Error, "not back from the reboot within 1m0s (apply still asks for the reboot; the connection was lost before apply answered, so the reboot may never have started")
	assert.Equal(t, 0, fr.Hosts[0].Reboot.Attempts)
}

func TestRebootTimeoutSaysLastTry(t *testing.T) {
	r := rebootRig()
	r.opts.RebootTimeout = 30 * time.Second
	r.fake.on("a", rebootCmd, asks("b1", "kernel-args"))
	r.fake.on("a", applyCmd, authFailed)
	fr := r.run(t, hostsNamed("a"))
	assert.Contains(t, fr.Hosts[0].Error, "not back from the reboot within 30s (last try: permission denied (publickey))")
}

func TestRebootSecondApplyRebootsAgain(t *testing.T) {
	r := rebootRig()
	r.fake.on("a", rebootCmd,
		asks("b1", "vfio-unbind"),
		lost()) // the second reboot cuts the connection
	r.fake.on("a", applyCmd,
		asks("b2", "nouveau", "vfio-unbind"), // back, and asks for another reason
		unreachable(),
		readyAfter("b3", "vfio-unbind", "nouveau"))
	fr := r.run(t, hostsNamed("a"))
	h := fr.Hosts[0]
	assert.Equal(t, report.OutcomeReady, h.Outcome, h.Error)
	require.NotNil(t, h.Reboot)
	assert.Equal(t, 2, h.Reboot.Reboots)
	assert.Equal(t, []string{"vfio-unbind", "nouveau"}, h.Reboot.Reasons)
	assert.Equal(t, []string{rebootCmd, applyCmd, rebootCmd, applyCmd, applyCmd}, r.fake.callsOf("a"))
	assert.Contains(t, r.log.String(), "a is back after its reboot for vfio-unbind, and apply asks for another, for nouveau: apply --reboot reboots it again (reboot 2 of at most 3)")
	assert.Contains(t, r.log.String(), "a ready after 2 reboots")
}

func TestRebootAskedAgainForSameReasonFails(t *testing.T) {
	for name, again := range map[string]reply{
		"another boot ID":          asks("b2", "kernel-args"),
		"the journal's rebooted":   asks("b1", "kernel-args", "kernel-args"),
		"both, as gpuprep says it": asks("b2", "kernel-args", "kernel-args"),
	} {
		t.Run(name, func(t *testing.T) {
			r := rebootRig()
			r.fake.on("a", rebootCmd, asks("b1", "kernel-args"))
			r.fake.on("a", applyCmd, again)
			fr := r.run(t, hostsNamed("a"))
			h := fr.Hosts[0]
			assert.Equal(t, report.OutcomeFailed, h.Outcome)
			assert.Equal(t, "apply asks again for a reboot for kernel-args after its reboot for kernel-args: the reboot did not make the change effective; not rebooted again (apply: kernel-args needs a reboot)", h.Error)
			assert.Equal(t, []string{rebootCmd, applyCmd}, r.fake.callsOf("a"), "never rebooted again")
		})
	}
}

func TestRebootAtMostMaxReboots(t *testing.T) {
	r := rebootRig()
	r.fake.on("a", rebootCmd, asks("b1", "r1"), asks("b2", "r2"), asks("b3", "r3"))
	r.fake.on("a", applyCmd, asks("b2", "r2", "r1"), asks("b3", "r3", "r2"), asks("b4", "r4", "r3"))
	fr := r.run(t, hostsNamed("a"))
	h := fr.Hosts[0]
	assert.Equal(t, report.OutcomeRebootNeeded, h.Outcome)
	assert.Equal(t, MaxReboots, h.Reboot.Reboots)
	assert.Contains(t, h.Error, "apply asks for reboot 4, for r4, after 3 (r1, r2, r3): fleet apply reboots a host at most 3 times")
	assert.Equal(t, ExitNeedReboot, ExitCode(fr))
}

func TestRebootLostAskTakesReasonFromApplyAfter(t *testing.T) {
	r := rebootRig()
	r.fake.on("a", rebootCmd, lost())
	r.fake.on("a", applyCmd, readyAfter("b2", "kernel-args"))
	fr := r.run(t, hostsNamed("a"))
	h := fr.Hosts[0]
	assert.Equal(t, report.OutcomeReady, h.Outcome)
	assert.Equal(t, []string{"kernel-args"}, h.Reboot.Reasons)
}

func TestRebootCanaryWaitedForBeforeOthers(t *testing.T) {
	r := rebootRig()
	r.opts.Canary = 1
	r.fake.on("a", rebootCmd, asks("b1", "kernel-args")).on("a", applyCmd, readyAfter("b2", "kernel-args"))
	r.fake.on("b", rebootCmd, ready("b1"))
	fr := r.run(t, hostsNamed("a", "b"))
	hosts := byName(fr)
	assert.Equal(t, report.OutcomeReady, hosts["a"].Outcome)
	assert.Equal(t, report.OutcomeReady, hosts["b"].Outcome)
	log := r.log.String()
	assert.Less(t, indexOf(log, "a ready after its reboot"), indexOf(log, "batch 1: 1 host"))
}
