package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/kube"
)

func init() {
	register(newKubeVirtCmd)
	register(newOperatorCmd)
}

// emit writes v as YAML or JSON, with notes as YAML comments (or on stderr
// for JSON, which has no comments).
func emit(out, errw io.Writer, format string, v any, notes []string) error {
	switch format {
	case "yaml":
		for _, n := range notes {
			fmt.Fprintf(out, "# %s\n", n)
		}
		enc := yaml.NewEncoder(out)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return err
		}
		return enc.Close()
	case "json":
		for _, n := range notes {
			fmt.Fprintln(errw, "gpuprep: note:", n)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return usageErr("--output %q: want yaml or json", format)
}

func newKubeVirtCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "kubevirt", Short: "KubeVirt configuration for GPU nodes"}
	var from []string
	var output, kubeconfig, namespace, name string
	var apply, dryRun, nvswitch bool
	fc := &fleetCmd{g: g}
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
merged and de-duplicated across nodes. Apply it with:

  kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file PATCH.yaml

or let gpuprep apply it (--apply): then feature gates and devices are added to those the
KubeVirt CR already has (a plain merge patch would replace the lists), entries for the same
selector are updated in place, and a second run changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var hosts []kube.Host
			switch {
			case fc.inventory != "" && len(from) > 0:
				return usageErr("give -i INVENTORY or --from-report, not both")
			case fc.inventory != "":
				fr, err := fc.collect(cmd, nil)
				if err != nil {
					return err
				}
				for _, h := range fr.Hosts {
					if h.Report == nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "gpuprep: note: %s not evaluated (%s): its GPUs are not in the patch\n", h.Name, h.Status)
						continue
					}
					hosts = append(hosts, kube.Host{Name: h.Name, Report: h.Report})
				}
			case len(from) > 0:
				var err error
				if hosts, err = kube.ReadReports(from); err != nil {
					return usageErr("%v", err)
				}
			default:
				return usageErr("give -i INVENTORY, or --from-report with gpuprep JSON reports (gpuprep check -o json > node.json)")
			}
			p, notes := kube.KubeVirt(hosts, kube.KubeVirtOptions{NVSwitch: nvswitch})
			if !apply {
				return emit(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, p, notes)
			}
			for _, n := range notes[:len(notes)-1] { // the last note is about merge patches, which --apply avoids
				fmt.Fprintln(cmd.ErrOrStderr(), "gpuprep: note:", n)
			}
			client, err := kube.NewClient(kubeconfig)
			if err != nil {
				return usageErr("%v", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			res, err := client.ApplyKubeVirt(ctx, p, namespace, name, dryRun)
			if err != nil {
				return &exitError{code: exitNotReady, err: err}
			}
			w := cmd.OutOrStdout()
			if !res.Changed {
				fmt.Fprintf(w, "KubeVirt %s/%s already permits these devices: nothing to do\n", res.Namespace, res.Name)
				return nil
			}
			verb := "patched"
			if dryRun {
				verb = "would patch (server-side dry run)"
			}
			fmt.Fprintf(w, "%s KubeVirt %s/%s: %s\n", verb, res.Namespace, res.Name, strings.Join(res.Added, "; "))
			return nil
		},
	}
	cfg.Flags().StringArrayVar(&from, "from-report", nil, "gpuprep JSON report (host or fleet); repeatable; - for stdin")
	fc.connectionFlags(cfg.Flags(), false)
	cfg.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	cfg.Flags().BoolVar(&nvswitch, "nvswitch", false, "permit the NVSwitches of passthrough hosts too, for VMs given whole boards with their NVLink fabric (as plan/apply --nvswitch); without it only NVSwitches already on VFIO are")
	cfg.Flags().BoolVar(&apply, "apply", false, "patch the KubeVirt CR through the Kubernetes API instead of printing the patch")
	cfg.Flags().BoolVar(&dryRun, "dry-run", false, "with --apply: server-side dry run")
	cfg.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	cfg.Flags().StringVar(&namespace, "namespace", "", "namespace of the KubeVirt CR (default: find it)")
	cfg.Flags().StringVar(&name, "name", "", "name of the KubeVirt CR (default: the only one)")
	cmd.AddCommand(cfg)
	return cmd
}

func newOperatorCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "operator", Short: "NVIDIA GPU Operator configuration for GPU nodes"}
	var from []string
	var output string
	vals := &cobra.Command{
		Use:   "values --from-report FILE…",
		Short: "Emit the GPU Operator Helm values the nodes in gpuprep reports need",
		Long: `values reads gpuprep JSON reports made with --mode (gpuprep check --mode MODE -o json)
and emits the GPU Operator Helm values: sandboxWorkloads.enabled, defaultWorkload (the most
common mode, so the fewest nodes need a label), and the sandbox device plugin, VFIO manager,
vGPU manager and vGPU device manager toggles the modes need.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(from) == 0 {
				return usageErr("--from-report: give at least one gpuprep JSON report made with --mode")
			}
			hosts, err := kube.ReadReports(from)
			if err != nil {
				return usageErr("%v", err)
			}
			v, notes, err := kube.Operator(hosts)
			if err != nil {
				return usageErr("%v", err)
			}
			return emit(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, v, notes)
		},
	}
	vals.Flags().StringArrayVar(&from, "from-report", nil, "gpuprep JSON report (host or fleet); repeatable; - for stdin")
	vals.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	cmd.AddCommand(vals)
	return cmd
}
