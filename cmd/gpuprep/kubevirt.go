package main

import (
	"encoding/json"
	"fmt"
	"io"

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

func newKubeVirtCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "kubevirt", Short: "KubeVirt configuration for GPU nodes"}
	var from []string
	var output string
	cfg := &cobra.Command{
		Use:   "config --from-report FILE…",
		Short: "Emit the KubeVirt CR patch (permittedHostDevices, feature gates) for the GPUs in gpuprep reports",
		Long: `config reads gpuprep JSON reports (gpuprep check -o json, or a fleet report) and emits
the KubeVirt CR merge patch: spec.configuration.permittedHostDevices.pciHostDevices (one per
GPU model: pciVendorSelector 10DE:XXXX, the resourceName NVIDIA's sandbox device plugin
advertises, externalResourceProvider: true), mediatedDevices for mdev vGPU types, and the
feature gates (GPU, and DisableMDEVConfiguration for vGPU). Entries are merged and
de-duplicated across nodes. Apply it with:

  kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file PATCH.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(from) == 0 {
				return usageErr("--from-report: give at least one gpuprep JSON report (gpuprep check -o json > node.json)")
			}
			hosts, err := kube.ReadReports(from)
			if err != nil {
				return usageErr("%v", err)
			}
			p, notes := kube.KubeVirt(hosts)
			return emit(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, p, notes)
		},
	}
	cfg.Flags().StringArrayVar(&from, "from-report", nil, "gpuprep JSON report (host or fleet); repeatable; - for stdin")
	cfg.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
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
