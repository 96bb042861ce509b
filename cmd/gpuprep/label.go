package main

import (
	"context"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/label"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
)

func init() { register(newLabelCmd) }

type labelCmd struct {
	g             *globals
	node          string
	kubeconfig    string
	timeout       time.Duration
	mode          string
	vgpuConfig    string
	beforeJoin    bool
	kubeadmConfig string
	dryRun        bool
}

func newLabelCmd(g *globals) *cobra.Command {
	c := &labelCmd{g: g}
	cmd := &cobra.Command{
		Use:   "label --mode MODE [--vgpu-config NAME] [--node NAME] [--kubeconfig PATH | --before-join [--kubeadm-config FILE]] [--dry-run]",
		Short: "Label the node for the GPU Operator (nvidia.com/gpu.workload.config, nvidia.com/vgpu.config)",
		Long: `label sets the GPU Operator's workload label (nvidia.com/gpu.workload.config=MODE, and
nvidia.com/vgpu.config=NAME for vm-vgpu) for this node.

By default it patches the Node through the Kubernetes API (kubeconfig from --kubeconfig,
$KUBECONFIG or ~/.kube/config; the node name defaults to what the kubelet registers: the
host name, lower-cased). Nothing changes when the labels are already right; a conflict is
retried; --dry-run asks the API server to validate without persisting. Needs RBAC verbs
get and patch on nodes. The change is journalled first (/var/lib/gpuprep/journal.jsonl
of this machine — also with --root, which only names the node: the change is the
cluster's — the labels the node had, and the kubeconfig file used), so gpuprep rollback
on this machine puts the labels back; where the journal cannot be written (it needs
root: an admin's workstation, say), the node is labelled all the same and a warning names
the labels it had, for undoing by hand.

With --before-join the labels go into the kubelet's --node-labels, so the node registers
with them (kubelets may set nvidia.com/* labels under NodeRestriction): in the kubelet
environment file of the distribution's kubelet package (KUBELET_EXTRA_ARGS in
/etc/default/kubelet or /etc/sysconfig/kubelet), or, with --kubeadm-config FILE, in the
JoinConfiguration's nodeRegistration.kubeletExtraArgs. What counts is what the kubelet
registers with: its unit and drop-ins (e.g. kubeadm's 10-kubeadm.conf) name the environment
files (/var/lib/kubelet/kubeadm-flags.env, then /etc/default/kubelet or /etc/sysconfig/kubelet)
and the command line ($KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS), and repeated --node-labels
merge, the last value of a key winning. So the keys leave every --node-labels of those files
(a stale nvidia.com/vgpu.config in kubeadm-flags.env too) and the labels go last; other labels
are kept. Each file is edited in place (the lines holding the keys), atomically, with a backup
and a journal entry; --dry-run shows each file's diff. Keys set where gpuprep does not edit (a
unit's ExecStart= or Environment=) are refused with file and line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&c.mode, "mode", "", "workload type: container, vm-passthrough or vm-vgpu (required)")
	f.StringVar(&c.vgpuConfig, "vgpu-config", "", "vgpu-device-manager config name for nvidia.com/vgpu.config (vm-vgpu only)")
	f.BoolVar(&c.beforeJoin, "before-join", false, "write the labels into the kubelet's --node-labels (the node has not joined yet)")
	f.StringVar(&c.kubeadmConfig, "kubeadm-config", "", "kubeadm JoinConfiguration file to edit instead of the kubelet environment file (with --before-join)")
	f.BoolVar(&c.dryRun, "dry-run", false, "show the change, change nothing")
	f.StringVar(&c.node, "node", "", "Node name (default: this host's name, lower-cased, as the kubelet registers it)")
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "time limit for the API calls")
	return cmd
}

func (c *labelCmd) run(cmd *cobra.Command) error {
	mode, err := preflight.ParseMode(c.mode)
	if err != nil {
		return usageErr("--mode: %v", err)
	}
	set := []kube.Label{{Key: kube.WorkloadLabel, Value: string(mode)}}
	var remove []string
	switch {
	case c.vgpuConfig != "" && mode != preflight.VMVGPU:
		return usageErr("--vgpu-config applies to --mode vm-vgpu only")
	case c.vgpuConfig != "":
		if err := kube.ValidateLabelValue(kube.VGPUConfigLabel, c.vgpuConfig); err != nil {
			return usageErr("--vgpu-config: %v", err)
		}
		set = append(set, kube.Label{Key: kube.VGPUConfigLabel, Value: c.vgpuConfig})
	case mode != preflight.VMVGPU:
		remove = []string{kube.VGPUConfigLabel} // a vGPU config on a non-vGPU node is stale
	}
	if !c.beforeJoin {
		return c.viaAPI(cmd, set, remove)
	}
	if c.node != "" || c.kubeconfig != "" {
		return usageErr("--node and --kubeconfig are for labelling through the API; --before-join edits this host's kubelet configuration")
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	if c.kubeadmConfig != "" {
		// A file of this host, written through the host root like every
		// other (journalled there, so that rollback undoes it): on this
		// machine's own root any path; with --root, its path inside it.
		file := c.kubeadmConfig
		switch {
		case root.IsLive():
			if file, err = filepath.Abs(file); err != nil {
				return usageErr("--kubeadm-config: %v", err)
			}
		case !path.IsAbs(file):
			return usageErr("--kubeadm-config %s: with --root, give the file's absolute path inside the root", file)
		}
		b, err := root.ReadFile(file)
		if err != nil {
			return usageErr("--kubeadm-config: %v", err)
		}
		out, err := kube.EditKubeadmConfig(file, b, set, remove)
		if err != nil {
			return usageErr("%v", err)
		}
		// the kubelet's environment files come later on its command line
		// (KUBELET_EXTRA_ARGS after kubeadm's KUBELET_KUBEADM_ARGS): the
		// keys leave them, or they would override the JoinConfiguration
		keys := slices.Clone(remove)
		for _, l := range set {
			keys = append(keys, l.Key)
		}
		env, err := kube.RemoveKubeletLabels(root, keys)
		if err != nil {
			return usageErr("%v", err)
		}
		var edits []change.File
		if string(out) != string(b) {
			edits = append(edits, change.Edit(file, b, out))
		}
		return c.write(cmd, root, file, append(edits, env...))
	}
	edits, err := kube.EditKubeletLabels(root, set, remove)
	if err != nil {
		return usageErr("%v", err)
	}
	return c.write(cmd, root, kube.KubeletEnvFile(root), edits)
}

// write writes edits (none: shown already has the labels), each
// journalled, atomically, with a backup; --dry-run shows their diffs.
func (c *labelCmd) write(cmd *cobra.Command, root *host.Root, shown string, edits []change.File) error {
	w := sanitize.NewWriter(cmd.OutOrStdout())
	if len(edits) == 0 {
		fmt.Fprintf(w, "%s already has these labels: nothing to do\n", shown)
		return nil
	}
	d := change.Dry{W: w}
	if c.dryRun {
		for _, e := range edits {
			d.Diff(e)
		}
		return nil
	}
	err := label.WriteFiles(root, edits, "label --before-join", time.Now(), func(e change.File, res host.WriteResult) {
		d.Diff(e)
		if res.Backup != "" {
			fmt.Fprintf(w, "wrote %s (backup %s)\n", e.Path, res.Backup)
		} else {
			fmt.Fprintf(w, "wrote %s\n", e.Path)
		}
	})
	if err != nil {
		return &exitError{code: exitNotReady, err: err}
	}
	fmt.Fprintln(w, "the kubelet applies --node-labels when the node registers")
	return nil
}

func (c *labelCmd) viaAPI(cmd *cobra.Command, set []kube.Label, remove []string) error {
	if c.kubeadmConfig != "" {
		return usageErr("--kubeadm-config goes with --before-join")
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	name := c.node
	if name == "" {
		n, from, err := provision.NodeNameFrom(root)
		if err != nil {
			return usageErr("%v", err)
		}
		name = n
		if !root.IsLive() && from != "/proc/sys/kernel/hostname" {
			fmt.Fprintf(sanitize.NewWriter(cmd.ErrOrStderr()), "gpuprep: the node's name %s is --root %s's %s (it has no running kernel's host name); --node names another\n", name, root.Name(), from)
		}
	}
	client, err := kube.NewClient(c.kubeconfig)
	if err != nil {
		return usageErr("%v", err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
	defer cancel()
	// --dry-run: only the server-side dry run that tells what the node has
	journalRoot, err := labelJournal(root, c.g.dep())
	if err != nil {
		return &exitError{code: exitUnknown, err: fmt.Errorf("this machine's root: %w", err)}
	}
	res, err := label.Change{Node: name, Kubeconfig: c.kubeconfig, Set: set, Remove: remove}.Apply(ctx, client, label.Options{
		Root: journalRoot, Command: "label", Now: time.Now(), DryRun: c.dryRun,
		Unrecorded: func(rec journal.LabelRecord, err error) error {
			fmt.Fprintf(sanitize.NewWriter(cmd.ErrOrStderr()), "gpuprep: warning: the change is not recorded for gpuprep rollback (%v); the labels before it: %s\n", err, orNoLabels(rec.Before))
			return nil
		}})
	if err != nil {
		return &exitError{code: exitNotReady, err: err}
	}
	w := sanitize.NewWriter(cmd.OutOrStdout())
	verb := "labelled"
	if c.dryRun {
		verb = "would label (server-side dry run)"
	}
	if !res.Changed {
		fmt.Fprintf(w, "node %s already has %s: nothing to do\n", name, kube.FormatLabels(set))
		return nil
	}
	fmt.Fprintf(w, "%s node %s: %s", verb, name, kube.FormatLabels(set))
	for _, k := range remove {
		if _, ok := res.Before[k]; ok {
			fmt.Fprintf(w, ", removed %s", k)
		}
	}
	fmt.Fprintln(w)
	return nil
}

// labelJournal is the root a label through the API journals in: the
// change is the cluster's, made from this machine, never a --root's (which
// only names the node), so it is journalled where gpuprep rollback on
// this machine looks for it (docs/root.md): /, or the tests' fixture root
// standing for it (deps.fixtureRootsWritable). A snapshot or a system
// disk given as --root is left as it is.
func labelJournal(root *host.Root, d *deps) (*host.Root, error) {
	if root.IsLive() || d.fixtureRootsWritable && !root.IsSystemDisk() {
		return root, nil
	}
	return d.thisMachine()
}

func orNoLabels(s string) string {
	if s == "" {
		return "none of them"
	}
	return s
}
