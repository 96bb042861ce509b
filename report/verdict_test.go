package report

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpuprep/gpuprep/preflight"
)

// A host's fleet verdict is the local check's exit code (cmd/gpuprep
// exitCode maps Verdict): a report of every mode judged none, however many
// modes are ready, is unknown — fleet check once called it ready when every
// mode was, where the same node's check exits 3.
func TestVerdictIsTheLocalCheckExitCode(t *testing.T) {
	all := func(ready bool, blockers ...string) map[preflight.Mode]*preflight.ModeResult {
		m := map[preflight.Mode]*preflight.ModeResult{}
		for _, mode := range preflight.Modes {
			m[mode] = &preflight.ModeResult{Ready: ready, Blockers: blockers}
		}
		return m
	}
	for _, c := range []struct {
		name string
		r    Report
		want string
	}{
		{"no mode, every mode ready", Report{Ready: true, Modes: all(true)}, VerdictUnknown},
		{"no mode, a mode blocked", Report{Modes: all(false, "vfio.binding")}, VerdictUnknown},
		{"mode ready", Report{Mode: "container", Ready: true, Modes: all(true)}, VerdictReady},
		{"mode blocked", Report{Mode: "vm-passthrough", Modes: all(false, "vfio.binding")}, VerdictNotReady},
		{"mode ready, a check errored", Report{Mode: "container", Ready: true, Modes: all(true), Summary: preflight.Summary{Error: 1}}, VerdictUnknown},
		{"mode not ready, no blocker", Report{Mode: "container", Modes: all(false)}, VerdictNotReady},
	} {
		assert.Equal(t, c.want, Verdict(&c.r), c.name)
	}
}
