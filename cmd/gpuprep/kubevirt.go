package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/report"
)

func init() {
	register(newKubeVirtCmd)
	register(newOperatorCmd)
}

// emit writes v as YAML or JSON, with notes as YAML comments (or on stderr
// for JSON, which has no comments): one line each, whatever host strings
// they hold.
func emit(out, errw io.Writer, format string, v any, notes []string) error {
	switch format {
	case "yaml":
		return kube.WriteYAML(out, v, notes)
	case "json":
		for _, n := range notes {
			fmt.Fprintln(errw, "gpuprep: note:", sanitize.Terminal(n))
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return usageErr("--output %q: want yaml or json", format)
}

// partialView refuses a view of the fleet that lacks hosts (missing: not
// evaluated) unless allow, with exit 3 as fleet check's "some hosts could
// not be evaluated"; harm says what a partial result would do. Allowed, it
// returns a note naming them (what: what the result lacks); with no host
// evaluated at all it refuses all the same.
func partialView(missing []kube.Unevaluated, evaluated int, allow bool, what, harm string) (string, error) {
	if len(missing) == 0 {
		return "", nil
	}
	var names []string
	for _, m := range missing {
		n := sanitize.Terminal(m.Name) + " (" + sanitize.Terminal(m.Status)
		if m.Error != "" {
			n += ": " + sanitize.Terminal(m.Error)
		}
		names = append(names, n+")")
	}
	list := strings.Join(names, ", ")
	switch {
	case evaluated == 0:
		return "", &exitError{code: exitUnknown, err: fmt.Errorf("no host could be evaluated: %s", list)}
	case !allow:
		return "", &exitError{code: exitUnknown, err: fmt.Errorf("%s could not be evaluated: %s: %s; nothing emitted: make them reachable and run again, or give --allow-partial to use the %s that were", plural.N(len(missing), "host"), list, harm, plural.N(evaluated, "host"))}
	}
	return fmt.Sprintf("--allow-partial: %s not evaluated, %s: %s", plural.N(len(missing), "host"), what, list), nil
}

// kubevirtConfigCmd is kubevirt config: its flags.
type kubevirtConfigCmd struct {
	fc                                  *fleetCmd
	from                                []string
	output, kubeconfig, namespace, name string
	apply, dryRun, nvswitch             bool
	allowPartial                        bool
	kubevirtVersion, dpVersion          string
}

func newKubeVirtCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "kubevirt", Short: "KubeVirt configuration for GPU nodes"}
	c := &kubevirtConfigCmd{fc: &fleetCmd{g: g}, kubevirtVersion: kube.DefaultKubeVirtVersion.String()}
	fc := c.fc
	cfg := &cobra.Command{
		Use:   "config (-i INVENTORY | --from-report FILE…)",
		Short: "Emit the KubeVirt CR patch (permittedHostDevices, feature gates) for the GPUs in gpuprep reports",
		Long: `config runs gpuprep check on every host of an inventory (-i, with the fleet's SSH
flags), or reads saved gpuprep JSON reports (gpuprep check -o json, or a fleet report), and emits
the KubeVirt CR merge patch: spec.configuration.permittedHostDevices.pciHostDevices (one per
GPU model: pciVendorSelector 10DE:XXXX, the resourceName NVIDIA's sandbox device plugin
advertises, externalResourceProvider: true), mediatedDevices for mdev vGPU types, and the
feature gates (GPU, and DisableMDEVConfiguration for vGPU). Only what can be allocated in the
mode a report was made for (check --mode; without one, a GPU set up for vGPU counts as vm-vgpu,
others as vm-passthrough) is permitted: a vm-vgpu node's GPUs are not passed whole (its vGPU
types are), a container node contributes nothing, and NVSwitches only with --nvswitch or when
already on VFIO (gpuprep otherwise leaves them with the host's Fabric Manager). Entries are
merged and de-duplicated across nodes.

vGPUs of the vendor-specific VFIO interface (vGPU 17+ on kernel 6.8+: VFs on driver nvidia with a
non-zero nvidia/current_vgpu_type) are allocated by KubeVirt itself from v1.9.0 on (PR #16890): one
pciHostDevices entry per VF model, pciVendorSelector the VF's own vendor:device, resourceName
nvidia.com/ + the type name (spaces as _), no externalResourceProvider. --kubevirt-version (default
1.9) names the cluster's KubeVirt; before 1.9 these VFs cannot be allocated and are left out, with a
note. KubeVirt gives one resource per selector: VFs of one model holding different types across the
hosts are left out, with a note. Apply it with:

  kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file PATCH.yaml

or let gpuprep apply it (--apply): then feature gates and devices are added to those the
KubeVirt CR already has (a plain merge patch would replace the lists), entries for the same
selector are updated in place, and a second run changes nothing.

Resource names are the ones NVIDIA's sandbox device plugin advertises, made from the pci.ids
bundled in its image: --device-plugin-version names the release; without it, with --kubeconfig
(or --apply) the release the cluster's GPU Operator runs, else the one it deploys by default.
With a cluster, a note names each entry that no node advertises (.status.allocatable).

A GPU whose IOMMU group holds devices outside it (passthroughViable false in its report, a
fail of check's iommu.groups) cannot be passed through: its model (an entry is per model,
cluster-wide) is still permitted for the hosts that can pass it through, and left out when no
host can; a note names each such GPU.

When a host of the inventory (or of a fleet report) could not be evaluated, no patch is
emitted or applied (exit 3): the patch would lack its GPUs, and a merge patch replaces
pciHostDevices whole. --allow-partial accepts the partial view: the patch of the hosts that
were evaluated, with a note naming the others.

A host's report whose values are not what they can be (resource names that are not Kubernetes
extended-resource names, PCI IDs that are not four hex digits, vGPU types not in their form, a
host name that is not one, an unknown mode) is refused: nothing is emitted or applied, and the
message names the host and the field. Notes are comment lines, one each.

Exit codes: 0 the patch emitted (or applied); 1 emitted (or applied), but some GPUs cannot be
passed through (the notes name them), or the API call failed; 2 usage (a --from-report file
refused among them); 3 some hosts could not be evaluated and --allow-partial was not given
(nothing emitted or applied), or none could, or a host's report (-i) was refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	cfg.Flags().StringArrayVar(&c.from, "from-report", nil, "gpuprep JSON report (host or fleet); repeatable; - for stdin")
	fc.connectionFlags(cfg.Flags(), false)
	cfg.Flags().StringVarP(&c.output, "output", "o", "yaml", "output format: yaml or json")
	cfg.Flags().BoolVar(&c.nvswitch, "nvswitch", false, "permit the NVSwitches of passthrough hosts too, for VMs given whole boards with their NVLink fabric (as plan/apply --nvswitch); without it only NVSwitches already on VFIO are")
	cfg.Flags().BoolVar(&c.allowPartial, "allow-partial", false, "emit (or --apply) the patch even when some hosts could not be evaluated: their GPUs are left out")
	cfg.Flags().StringVar(&c.kubevirtVersion, "kubevirt-version", c.kubevirtVersion, "the cluster's KubeVirt release (MAJOR.MINOR[.PATCH]; default with --kubeconfig or --apply: the KubeVirt CR's status.observedKubeVirtVersion, else "+kube.DefaultKubeVirtVersion.String()+"): the feature gates and mdev setting it wants; from "+kube.VendorVGPUSince.String()+" on, the VFs of vendor-specific VFIO vGPUs (kernel 6.8+, vGPU 17+) are permitted as pciHostDevices that KubeVirt allocates itself; before it, KubeVirt cannot allocate them and they are left out")
	cfg.Flags().BoolVar(&c.apply, "apply", false, "patch the KubeVirt CR through the Kubernetes API instead of printing the patch")
	cfg.Flags().BoolVar(&c.dryRun, "dry-run", false, "with --apply: server-side dry run")
	cfg.Flags().StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	cfg.Flags().StringVar(&c.namespace, "namespace", "", "namespace of the KubeVirt CR (default: find it)")
	cfg.Flags().StringVar(&c.name, "name", "", "name of the KubeVirt CR (default: the only one)")
	addDevicePluginFlag(cfg.Flags(), &c.dpVersion, true)
	cmd.AddCommand(cfg)
	return cmd
}

// run emits the KubeVirt CR patch for the hosts' GPUs, or applies it.
func (c *kubevirtConfigCmd) run(cmd *cobra.Command) error {
	version, err := kube.ParseKubeVirtVersion(c.kubevirtVersion)
	if err != nil {
		return usageErr("%v", err)
	}
	hosts, missing, ran, err := c.hosts(cmd)
	if err != nil || !ran {
		return err
	}
	what := "their GPUs are not in the patch"
	partialNote, err := partialView(missing, len(hosts), c.allowPartial, what,
		"a patch without their GPUs would drop their models from the KubeVirt CR (a merge patch replaces permittedHostDevices.pciHostDevices whole)")
	if err != nil {
		return err
	}
	withCluster := c.apply || cmd.Flags().Changed("kubeconfig")
	from := ""
	if !cmd.Flags().Changed("kubevirt-version") && withCluster {
		if version, from, err = clusterKubeVirt(cmd.Context(), c.kubeconfig, c.namespace, c.name, version); err != nil {
			return err
		}
	}
	dp, err := newDevicePlugin(cmd.Context(), c.dpVersion, c.kubeconfig, withCluster)
	if err != nil {
		return err
	}
	dpNotes := dp.name(hosts)
	p, notes, unusable := kube.KubeVirt(hosts, kube.KubeVirtOptions{NVSwitch: c.nvswitch, Version: version, VersionFrom: from})
	notes = append(append(dpNotes, notes...), dp.advertised(cmd.Context(), p)...)
	if partialNote != "" {
		notes = append([]string{partialNote}, notes...)
	}
	var result error // exit 1 when some GPUs cannot be passed through
	if len(unusable) > 0 {
		result = &exitError{code: exitNotReady, err: fmt.Errorf("%s of vm-passthrough hosts cannot be passed through, the IOMMU group holding other devices (the patch permits a model only for hosts that can pass it through): %s", plural.N(len(unusable), "GPU"), strings.Join(unusable, "; "))}
	}
	if !c.apply {
		if err := emit(cmd.OutOrStdout(), cmd.ErrOrStderr(), c.output, p, notes); err != nil {
			return err
		}
		return result
	}
	if err := c.applyPatch(cmd, p); err != nil {
		return err
	}
	return result
}

// hosts are the hosts of the inventory (-i: checked now) or of the saved
// reports (--from-report), and those that could not be evaluated; false
// after a --dry-run listing of the inventory.
func (c *kubevirtConfigCmd) hosts(cmd *cobra.Command) (hosts []kube.Host, missing []kube.Unevaluated, ran bool, err error) {
	switch {
	case c.fc.inventory != "" && len(c.from) > 0:
		return nil, nil, false, usageErr("give -i INVENTORY or --from-report, not both")
	case c.fc.inventory != "":
		ran, err = c.fc.each(cmd, func(h *report.FleetHost) error {
			if h.Report == nil {
				missing = append(missing, kube.Unevaluated{Name: h.Name, Status: h.Status, Error: h.Error})
				return nil
			}
			host := kube.PatchHost(h.Name, h.Report) // not the findings: a fleet's worth of them
			if err := kube.CheckHost(host); err != nil {
				return &exitError{code: exitUnknown, err: fmt.Errorf("%v: nothing emitted or applied", err)}
			}
			hosts = append(hosts, host)
			return nil
		})
		return hosts, missing, ran, err
	case len(c.from) > 0:
		if hosts, missing, err = kube.ReadReports(c.from); err != nil {
			return nil, nil, false, usageErr("%v", err)
		}
		return hosts, missing, true, nil
	}
	return nil, nil, false, usageErr("give -i INVENTORY, or --from-report with gpuprep JSON reports (gpuprep check -o json > node.json)")
}

// applyPatch patches the KubeVirt CR with p (--apply) and says what
// changed.
func (c *kubevirtConfigCmd) applyPatch(cmd *cobra.Command, p *kube.KubeVirtPatch) error {
	client, err := kube.NewClient(c.kubeconfig)
	if err != nil {
		return usageErr("%v", err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	res, err := client.ApplyKubeVirt(ctx, p, c.namespace, c.name, c.dryRun)
	if err != nil {
		return &exitError{code: exitNotReady, err: err}
	}
	w := cmd.OutOrStdout()
	if !res.Changed {
		fmt.Fprintf(w, "KubeVirt %s/%s already permits these devices: nothing to do\n", sanitize.Terminal(res.Namespace), sanitize.Terminal(res.Name))
		return nil
	}
	verb := "patched"
	if c.dryRun {
		verb = "would patch (server-side dry run)"
	}
	fmt.Fprintf(w, "%s KubeVirt %s/%s: %s\n", verb, sanitize.Terminal(res.Namespace), sanitize.Terminal(res.Name), sanitize.Terminal(strings.Join(res.Added, "; ")))
	return nil
}

func newOperatorCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "operator", Short: "NVIDIA GPU Operator configuration for GPU nodes"}
	var from []string
	var output string
	var allowPartial bool
	vals := &cobra.Command{
		Use:   "values --from-report FILE…",
		Short: "Emit the GPU Operator Helm values the nodes in gpuprep reports need",
		Long: `values reads gpuprep JSON reports made with --mode (gpuprep check --mode MODE -o json)
and emits the GPU Operator Helm values: sandboxWorkloads.enabled, defaultWorkload (the most
common mode, so the fewest nodes need a label), and the sandbox device plugin, VFIO manager,
vGPU manager and vGPU device manager toggles the modes need. A component the hosts already
have installed on the host itself is not deployed again: vgpuManager is disabled when every
vm-vgpu host has a host-installed vGPU manager (check's vgpu.manager), driver when every
container host has a host-installed NVIDIA driver (the report's hostDriver); where only some
have, a note names the nodes to label nvidia.com/gpu.deploy.vgpu-manager=false (or
nvidia.com/gpu.deploy.driver=false) so that the operator's daemonset leaves them alone.

When a fleet report holds hosts that were not evaluated, no values are emitted (exit 3)
unless --allow-partial accepts values made from the others.

A host's report whose values are not what they can be (see kubevirt config) is refused, naming
the host and the field.

Exit codes: 0 values emitted; 2 usage (a report without --mode, or refused, say); 3 some hosts
could not be evaluated and --allow-partial was not given, or none could.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(from) == 0 {
				return usageErr("--from-report: give at least one gpuprep JSON report made with --mode")
			}
			hosts, missing, err := kube.ReadReports(from)
			if err != nil {
				return usageErr("%v", err)
			}
			partialNote, err := partialView(missing, len(hosts), allowPartial, "the values do not account for them",
				"values made without them may not fit them (the default workload, the managers their modes need)")
			if err != nil {
				return err
			}
			v, notes, err := kube.Operator(hosts)
			if err != nil {
				return usageErr("%v", err)
			}
			if partialNote != "" {
				notes = append([]string{partialNote}, notes...)
			}
			return emit(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, v, notes)
		},
	}
	vals.Flags().StringArrayVar(&from, "from-report", nil, "gpuprep JSON report (host or fleet); repeatable; - for stdin")
	vals.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	vals.Flags().BoolVar(&allowPartial, "allow-partial", false, "emit values even when a fleet report holds hosts that were not evaluated")
	cmd.AddCommand(vals)
	return cmd
}
