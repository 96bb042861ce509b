package label

import (
	"context"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kube"
)

// Labeller sets and removes labels on a Node (kube.Client).
type Labeller interface {
	LabelNode(ctx context.Context, name string, set []kube.Label, remove []string, dryRun bool) (*kube.LabelResult, error)
}

// Change is labels set and removed on Node through the API with the
// kubeconfig file Kubeconfig ("": kube.NewClient's default).
type Change struct {
	Node, Kubeconfig string
	Set              []kube.Label
	Remove           []string
}

// Options are how Change.Apply journals.
type Options struct {
	Root    *host.Root // whose journal records the change
	Command string     // the journal entry's command
	Now     time.Time  // its time
	DryRun  bool       // ask the API server only (a server-side dry run); journal nothing
	// Unrecorded, when set, is told that the intent could not be
	// journalled (rec, what it holds): it returns nil to label all the
	// same (not root on an admin's workstation: the cluster is changed,
	// only not recorded for rollback here). Unset, Apply returns err.
	Unrecorded func(rec journal.LabelRecord, err error) error
}

// Apply makes c through l: a server-side dry run first, which tells the
// labels the Node has; when that changes something, the intent (c.Intent
// with them) is journalled before the patch, so that a process killed
// between the two leaves rollback what to restore. It returns the dry
// run's result when nothing changes or with o.DryRun, else the patch's.
func (c Change) Apply(ctx context.Context, l Labeller, o Options) (*kube.LabelResult, error) {
	res, err := l.LabelNode(ctx, c.Node, c.Set, c.Remove, true)
	if err != nil || !res.Changed || o.DryRun {
		return res, err
	}
	en := c.Intent(o.Command, res.Before)
	en.Time = o.Now.UTC()
	if err := journal.Append(o.Root, en); err != nil {
		if o.Unrecorded == nil {
			return nil, err
		}
		if err := o.Unrecorded(en.Label(), err); err != nil {
			return nil, err
		}
	}
	return l.LabelNode(ctx, c.Node, c.Set, c.Remove, false)
}

// Intent is the label entry (no Time) that command journals before it
// makes c on a Node whose labels are before (LabelNode's Before, from a
// server-side dry run): the keys c sets or removes, with the values those
// of them the Node has; the kubeconfig, absolute (kube.KubeconfigPath).
// Rollback puts back the keys it lists that the node had and removes those
// it did not.
func (c Change) Intent(command string, before map[string]string) journal.Entry {
	var keys []string
	for _, x := range c.Set {
		keys = append(keys, x.Key)
	}
	keys = append(keys, c.Remove...)
	var was []kube.Label
	for _, k := range keys {
		if v, ok := before[k]; ok {
			was = append(was, kube.Label{Key: k, Value: v})
		}
	}
	return journal.LabelRecord{Node: c.Node, Kubeconfig: kube.KubeconfigPath(c.Kubeconfig),
		Before: kube.FormatLabels(was), Keys: strings.Join(keys, ",")}.Entry(command, time.Time{})
}
