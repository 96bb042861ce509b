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
