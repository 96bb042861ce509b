package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Condition is one Node status condition (core/v1 NodeCondition's fields).
// Status is "True", "False" or "Unknown". Reason and Message are always
// sent, even empty: a strategic merge patch keeps a field it is not given,
// so an omitted message would leave the last blockers on a ready node.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// MaxConditionMessage bounds a condition's message: findings come from the
// host, and a Node object is read by every controller in the cluster.
const MaxConditionMessage = 1024

// NodeCondition reads the node's condition of type typ (nil when absent).
func (c *Client) NodeCondition(ctx context.Context, name, typ string) (*Condition, error) {
	raw, err := c.rest.Get().Resource("nodes").Name(name).Do(ctx).Raw()
	if err != nil {
		return nil, c.explain(err, "get", "nodes", name)
	}
	var n struct {
		Status struct {
			Conditions []Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	for _, x := range n.Status.Conditions {
		if x.Type == typ {
			return &x, nil
		}
	}
	return nil, nil
}

// SetNodeCondition sets one condition of the node's status, the others
// untouched: a strategic merge patch of nodes/status, whose conditions merge
// by type (core/v1 NodeStatus.Conditions: patchMergeKey "type"), as
// kubernetes/node-problem-detector sets its conditions
// (pkg/problemclient/problem_client.go SetConditions). The heartbeat is now;
// the transition time moves only when the status changes. It reports
// whether status, reason or message changed.
func (c *Client) SetNodeCondition(ctx context.Context, name string, cond Condition, now time.Time) (bool, error) {
	old, err := c.NodeCondition(ctx, name, cond.Type)
	if err != nil {
		return false, err
	}
	if len(cond.Message) > MaxConditionMessage {
		cond.Message = strings.ToValidUTF8(cond.Message[:MaxConditionMessage-3], "") + "..."
	}
	ts := now.UTC().Format(time.RFC3339)
	cond.LastHeartbeatTime = ts
	cond.LastTransitionTime = ts
	changed := old == nil || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message
	if old != nil && old.Status == cond.Status && old.LastTransitionTime != "" {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []Condition{cond}}})
	if err != nil {
		return false, err
	}
	err = c.rest.Patch(types.StrategicMergePatchType).Resource("nodes").Name(name).SubResource("status").
		Param("fieldManager", "gpuprep").Body(body).Do(ctx).Error()
	if err != nil {
		return false, c.explain(err, "patch", "nodes/status", name)
	}
	return changed, nil
}
