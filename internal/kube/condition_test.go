package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// SetNodeCondition against a real kube-apiserver: set, unchanged (the
// transition time kept, the heartbeat moved), flipped, other conditions
// untouched, a long message bounded, RBAC named when refused.
func TestSetNodeConditionAgainstARealAPIServer(t *testing.T) {
	s := kubetest.Start(t)
	ctx := context.Background()
	c, err := NewClient(s.AdminKubeconfig(t))
	require.NoError(t, err)
	s.CreateNode(t, "gpu-1", nil)
	other := Condition{Type: "OtherReady", Status: "True", Reason: "Fine"}
	_, err = c.SetNodeCondition(ctx, "gpu-1", other, time.Unix(1000, 0))
	require.NoError(t, err)

	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cond := Condition{Type: "GPUPrepReady", Status: "False", Reason: "ChecksFailed", Message: "iommu.cmdline: off"}
	changed, err := c.SetNodeCondition(ctx, "gpu-1", cond, t1)
	require.NoError(t, err)
	require.True(t, changed)
	got, err := c.NodeCondition(ctx, "gpu-1", "GPUPrepReady")
	require.NoError(t, err)
	require.Equal(t, Condition{Type: "GPUPrepReady", Status: "False", Reason: "ChecksFailed", Message: "iommu.cmdline: off",
		LastHeartbeatTime: "2026-01-01T00:00:00Z", LastTransitionTime: "2026-01-01T00:00:00Z"}, *got)

	changed, err = c.SetNodeCondition(ctx, "gpu-1", cond, t1.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, changed)
	got, _ = c.NodeCondition(ctx, "gpu-1", "GPUPrepReady")
	require.Equal(t, "2026-01-01T00:01:00Z", got.LastHeartbeatTime)
	require.Equal(t, "2026-01-01T00:00:00Z", got.LastTransitionTime)

	changed, err = c.SetNodeCondition(ctx, "gpu-1", Condition{Type: "GPUPrepReady", Status: "True", Reason: "Ready"}, t1.Add(2*time.Minute))
	require.NoError(t, err)
	require.True(t, changed)
	got, _ = c.NodeCondition(ctx, "gpu-1", "GPUPrepReady")
	require.Equal(t, "True", got.Status)
	require.Empty(t, got.Message)
	require.Equal(t, "2026-01-01T00:02:00Z", got.LastTransitionTime)
	o, _ := c.NodeCondition(ctx, "gpu-1", "OtherReady")
	require.Equal(t, "True", o.Status, "the other condition is kept")

	_, err = c.SetNodeCondition(ctx, "gpu-1", Condition{Type: "GPUPrepReady", Status: "False", Message: strings.Repeat("é", 2000)}, t1)
	require.NoError(t, err)
	got, _ = c.NodeCondition(ctx, "gpu-1", "GPUPrepReady")
	require.LessOrEqual(t, len(got.Message), MaxConditionMessage)
	require.True(t, strings.HasSuffix(got.Message, "..."))

	viewer, err := NewClient(s.Kubeconfig(t, "viewer", s.View))
	require.NoError(t, err)
	_, err = viewer.SetNodeCondition(ctx, "gpu-1", cond, t1)
	require.ErrorContains(t, err, `RBAC: grant verb "patch" on resource "nodes/status"`)
	_, err = c.SetNodeCondition(ctx, "gpu-9", cond, t1)
	require.ErrorContains(t, err, `node "gpu-9" not found`)
}
