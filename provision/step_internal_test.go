package provision

import (
	"github.com/gpuprep/gpuprep/internal/effect"
	"testing"

	"github.com/stretchr/testify/require"
)

// The workflow's step types run in the order Steps lists, one for each.
func TestStepKindsAreTheWorkflow(t *testing.T) {
	var ids []string
	for _, k := range stepKinds {
		ids = append(ids, k.id())
	}
	require.Equal(t, Steps, ids)
	require.Nil(t, kindOf("no-such-step"))
	require.Error(t, (&Plan{}).run(t.Context(), effect.Effector{}, &Step{ID: "no-such-step"}))
}
