package preflight

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every registered check describes itself: what it verifies, what it
// reads, why it matters; and says how a plan reaches it.
func TestChecksDescribeThemselves(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range All() {
		require.False(t, seen[c.ID], "%s registered twice", c.ID)
		seen[c.ID] = true
		require.NotEmpty(t, c.Title, c.ID)
		require.NotEmpty(t, c.Modes, c.ID)
		require.NotEmpty(t, c.Doc.Verifies, "%s: Doc.Verifies", c.ID)
		require.NotEmpty(t, c.Doc.Reads, "%s: Doc.Reads", c.ID)
		require.NotEmpty(t, c.Doc.Matters, "%s: Doc.Matters", c.ID)
		// a plan must know what to do with its fail: beyond it, or the
		// steps that change it
		require.True(t, c.Beyond == BeyondPlan || len(c.ChangedBy) > 0, "%s: neither beyond a plan nor changed by a step", c.ID)
		require.Contains(t, []Beyond{"", BeyondPlan, BeyondUnlessReboot}, c.Beyond, c.ID)
		if c.Beyond == BeyondPlan {
			require.Empty(t, c.ChangedBy, "%s: beyond a plan, yet changed by steps", c.ID)
		}
		got, ok := Lookup(c.ID)
		require.True(t, ok, c.ID)
		require.Equal(t, c.Doc, got.Doc)
	}
	_, ok := Lookup("no.such")
	require.False(t, ok)
}

// A fail stays after a plan when it is beyond any plan, when only a reboot
// changes it and none is pending, or when none of the steps that change it
// is planned.
func TestStaysAfterPlan(t *testing.T) {
	planned := func(ids ...string) func(string) bool {
		return func(s string) bool {
			for _, id := range ids {
				if id == s {
					return true
				}
			}
			return false
		}
	}
	hw := Check{Beyond: BeyondPlan}
	require.True(t, hw.StaysAfterPlan(planned(stepKernelArgs, stepReboot), true))

	running := Check{Beyond: BeyondUnlessReboot, ChangedBy: []string{stepKernelArgs, stepReboot}}
	require.True(t, running.StaysAfterPlan(planned(stepReboot), false))
	require.False(t, running.StaysAfterPlan(planned(stepKernelArgs, stepReboot), true))

	binding := Check{ChangedBy: []string{stepVFIOBind, stepVFIOUnbind}}
	require.True(t, binding.StaysAfterPlan(planned(stepLabel), false))
	require.False(t, binding.StaysAfterPlan(planned(stepVFIOUnbind), false))

	// no declaration: a plan does not call its fail beyond it
	require.False(t, Check{}.StaysAfterPlan(planned(), false))
}
