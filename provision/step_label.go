package provision

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/label"
	"github.com/gpuprep/gpuprep/preflight"
)

// labelStep (StepLabel): the Node's workload labels set (planned by
// planLabel), through the API (a label entry with the labels before) or
// in the kubelet's environment file (a file entry); rollback restores them
// (restoreLabels) or the file.
type labelStep struct{}

func (labelStep) id() string { return StepLabel }

func (labelStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.label(ctx, e)
}

type labelPlan struct {
	set    []kube.Label
	remove []string
	file   string // kubelet environment file; "" when through the API
	node   string
}

// labelsFor are the labels of mode: the workload label, and for vm-vgpu
// its nvidia.com/vgpu.config, for other modes a stale nvidia.com/vgpu.config removed.
func labelsFor(mode preflight.Mode, vgpuConfig string) ([]kube.Label, []string) {
	set := []kube.Label{{Key: kube.WorkloadLabel, Value: string(mode)}}
	if mode != preflight.VMVGPU {
		return set, []string{kube.VGPUConfigLabel}
	}
	if vgpuConfig != "" {
		set = append(set, kube.Label{Key: kube.VGPUConfigLabel, Value: vgpuConfig})
	}
	return set, nil
}

// NodeName is the name the kubelet registers this host under: the running
// kernel's host name, or, for a root that has none (an offline system
// image, a mounted disk: no /proc), the root's /etc/hostname, which the
// image's first boot sets as its host name (hostname(5): one line, lines
// starting with # are comments). Where neither names the host it says what
// is missing.
func NodeName(root *host.Root) (string, error) {
	name, _, err := NodeNameFrom(root)
	return name, err
}

// NodeNameFrom is NodeName and the file of root it was read from.
func NodeNameFrom(root *host.Root) (name, from string, err error) {
	h, from, err := nodeHostname(root)
	if err != nil {
		return "", "", err
	}
	return strings.ToLower(h), from, nil
}

const (
	kernelHostname = "/proc/sys/kernel/hostname"
	etcHostname    = "/etc/hostname"
)

func nodeHostname(root *host.Root) (string, string, error) {
	h, err := root.ReadString(kernelHostname)
	if err == nil && h != "" {
		return h, kernelHostname, nil
	}
	if root.IsLive() || root.Exists(kernelHostname) {
		return "", "", fmt.Errorf("cannot tell this host's name (%s: %s): give --node", kernelHostname, orEmpty(err))
	}
	b, err := root.ReadFile(etcHostname)
	if err != nil {
		return "", "", fmt.Errorf("cannot tell the node's name: --root %s has no %s (no running kernel) and no %s: give --node", root.Name(), kernelHostname, etcHostname)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l, etcHostname, nil
		}
	}
	return "", "", fmt.Errorf("cannot tell the node's name: --root %s has no %s (no running kernel) and its %s names no host: give --node", root.Name(), kernelHostname, etcHostname)
}

func orEmpty(err error) string {
	if err != nil {
		return err.Error()
	}
	return "empty"
}

func (p *Plan) planLabel(ctx context.Context) error {
	set, remove := labelsFor(p.opts.Mode, p.opts.VGPUConfig)
	p.labels = labelPlan{set: set, remove: remove}
	if p.opts.Kubeconfig == "" {
		file := kube.KubeletEnvFile(p.root)
		edits, err := kube.EditKubeletLabels(p.root, set, remove)
		if err != nil {
			return &PlanError{Step: StepLabel, Err: err}
		}
		p.labels.file = file
		if len(edits) == 0 {
			return nil
		}
		s := &Step{ID: StepLabel,
			Title: fmt.Sprintf("label the node %s in the kubelet's --node-labels (%s)", kube.FormatLabels(set), file),
			Notes: []string{"the kubelet applies --node-labels when the node registers; for a node that has joined already, give --kubeconfig to label it through the API"}}
		for _, e := range edits {
			s.Files = append(s.Files, e)
			if e.Path != file {
				s.Notes = append(s.Notes, e.Path+" also sets these keys in the kubelet's --node-labels: they are removed there, so that the node registers with the labels above only")
			}
		}
		p.Steps = append(p.Steps, s)
		return nil
	}
	name := p.opts.Node
	if name == "" {
		n, err := NodeName(p.root)
		if err != nil {
			return &PlanError{Step: StepLabel, Err: err}
		}
		name = n
	}
	p.labels.node = name
	s := &Step{ID: StepLabel, Title: fmt.Sprintf("label Node %s through the Kubernetes API: %s", name, kube.FormatLabels(set))}
	client, err := kube.NewClient(p.opts.Kubeconfig)
	if err != nil {
		return &PlanError{Step: StepLabel, Err: err}
	}
	res, err := client.LabelNode(ctx, name, set, remove, true)
	switch {
	case err != nil:
		s.Notes = append(s.Notes, "could not ask the API server (apply will try again): "+err.Error())
	case !res.Changed:
		return nil
	}
	p.Steps = append(p.Steps, s)
	return nil
}

func (p *Plan) label(ctx context.Context, e effect.Effector) error {
	l := p.labels
	if l.file != "" {
		edits, err := kube.EditKubeletLabels(e.Root, l.set, l.remove)
		if err != nil {
			return err
		}
		return label.WriteFiles(e.Root, edits, "apply", utcNow(e), func(f change.File, res host.WriteResult) {
			if res.Changed {
				e.Logf("wrote %s%s", f.Path, backupNote(res.Backup))
			}
		})
	}
	client, err := kube.NewClient(p.opts.Kubeconfig)
	if err != nil {
		return err
	}
	res, err := label.Change{Node: l.node, Kubeconfig: p.opts.Kubeconfig, Set: l.set, Remove: l.remove}.Apply(ctx, client,
		label.Options{Root: e.Root, Command: "apply", Now: utcNow(e)})
	if err != nil || !res.Changed {
		return err
	}
	e.Logf("labelled Node %s: %s", l.node, kube.FormatLabels(l.set))
	return nil
}

func restoreLabels(ctx context.Context, first journal.Entry, kubeconfig string, res *RollbackResult) error {
	if kubeconfig == "" {
		kubeconfig = first.Path
	}
	was, err := kube.ParseLabels(first.Before)
	if err != nil {
		return fmt.Errorf("label %s: journal: %w", first.Device, err)
	}
	had := map[string]bool{}
	for _, l := range was {
		had[l.Key] = true
	}
	var remove []string
	for _, k := range strings.Split(first.After, ",") {
		if k != "" && !had[k] {
			remove = append(remove, k)
		}
	}
	client, err := kube.NewClient(kubeconfig)
	if err != nil {
		return fmt.Errorf("label %s: %w", first.Device, err)
	}
	r, err := client.LabelNode(ctx, first.Device, was, remove, false)
	if err != nil {
		return fmt.Errorf("label %s: %w", first.Device, err)
	}
	if r.Changed {
		res.Undone = append(res.Undone, Undo{Kind: "label", Target: "Node " + first.Device, Action: fmt.Sprintf("restored %s, removed %s", kube.FormatLabels(was), strings.Join(remove, ","))})
	}
	return nil
}
