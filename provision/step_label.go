package provision

import "context"

// labelStep (StepLabel): the Node's workload labels set (planned by
// planLabel), through the API (a label entry with the labels before) or
// in the kubelet's environment file (a file entry); rollback restores them
// (restoreLabels) or the file.
type labelStep struct{}

func (labelStep) id() string { return StepLabel }

func (labelStep) run(ctx context.Context, e Env, p *Plan, _ *Step) error { return p.label(ctx, e) }
