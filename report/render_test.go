package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFleetApplyPhasesInEveryFormat(t *testing.T) {
	f := &FleetReport{Mode: "vm-passthrough", Rollout: &Rollout{Canary: 1, Batch: 2, MaxFailures: 0, Failures: 1, Stopped: "canary gpu-1 failed"},
		Hosts: []FleetHost{
			{Name: "gpu-1", Status: "evaluated", Phase: "canary", Outcome: OutcomeRolledBack, Error: "apply failed"},
			{Name: "gpu-2", Status: "skipped", Phase: "skipped", Outcome: OutcomeSkipped},
		}}
	f.Finish()
	for _, format := range []string{"junit", "markdown", "html"} {
		var b bytes.Buffer
		require.NoError(t, Render(&b, &Document{Fleet: f}, format), format)
		out := b.String()
		for _, want := range []string{"canary", OutcomeRolledBack, OutcomeSkipped} {
			require.True(t, strings.Contains(out, want), "%s lacks %q:\n%s", format, want, out)
		}
		if format != "junit" {
			require.Contains(t, out, "canary gpu-1 failed", format)
		}
	}
}

// A host's reboot and rollback in fleet apply are told in every format,
// not only in JSON and the terminal table.
func TestFleetApplyRebootAndRollbackInEveryFormat(t *testing.T) {
	f := &FleetReport{Mode: "vm-passthrough", Rollout: &Rollout{Canary: 1, Batch: 2, Reboot: true, Failures: 2},
		Hosts: []FleetHost{
			{Name: "gpu-1", Status: "evaluated", Phase: "canary", Outcome: OutcomeReady, Reboot: &HostReboot{Completed: true, WaitedMs: 41600}},
			{Name: "gpu-2", Status: "evaluated", Phase: "batch 1", Outcome: OutcomeRolledBack, Error: "apply failed",
				Rollback: &HostRollback{RebootRequired: true}},
			{Name: "gpu-3", Status: "evaluated", Phase: "batch 1", Outcome: OutcomeRollbackFailed, Error: "apply failed",
				Rollback: &HostRollback{Error: "grub.cfg: permission denied\nsecond line"}},
		}}
	f.Finish()
	for _, format := range []string{"text", "junit", "markdown", "html"} {
		var b bytes.Buffer
		require.NoError(t, Render(&b, &Document{Fleet: f}, format), format)
		out := b.String()
		flat := strings.Join(strings.Fields(out), " ") // the text wrapped to the width
		for _, want := range []string{"rebooted (42s)", "rolled back (reboot needed to complete)", "rollback failed: grub.cfg: permission denied"} {
			require.True(t, strings.Contains(flat, want), "%s lacks %q:\n%s", format, want, out)
		}
		require.NotContains(t, out, "second line", format)
	}
}
