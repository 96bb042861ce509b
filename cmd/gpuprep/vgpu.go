package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vgpu"
)

func init() { register(newVGPUCmd) }

func newVGPUCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "vgpu", Short: "NVIDIA vGPU: install the vGPU manager, list types, create vGPUs from a vgpu-device-manager config"}
	cmd.AddCommand(newVGPUInstallCmd(g), newVGPUTypesCmd(g), newVGPUApplyCmd(g, false), newVGPUApplyCmd(g, true))
	return cmd
}

// selectedGPUs discovers the host's PCI devices and returns the selected
// GPUs, ordered by address (the order config device indices refer to).
func selectedGPUs(g *globals, sel []string) (*host.Root, []*pci.Device, error) {
	root, _, gpus, err := selectedInventory(g, sel)
	return root, gpus, err
}

// selectedInventory is selectedGPUs with the host's PCI inventory.
func selectedInventory(g *globals, sel []string) (*host.Root, *pci.Inventory, []*pci.Device, error) {
	s, err := pci.ParseSelector(sel)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	root, err := g.hostRoot()
	if err != nil {
		return nil, nil, nil, err
	}
	inv, err := pci.Discover(root)
	if err != nil {
		return nil, nil, nil, &exitError{code: exitUnknown, err: err}
	}
	gpus, err := s.Select(inv)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	return root, inv, gpus, nil
}

func newVGPUTypesCmd(g *globals) *cobra.Command {
	var sel []string
	var output string
	cmd := &cobra.Command{
		Use:   "types",
		Short: "List, per GPU, the vGPU types it can create (mdev or vendor-specific VFIO), with free instances and KubeVirt resource names",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, inv, gpus, err := selectedInventory(g, sel)
			if err != nil {
				return err
			}
			addrs := make([]string, len(gpus))
			for i, d := range gpus {
				addrs[i] = d.Address
			}
			doc := report.NewVGPUTypes(root, inv, addrs)
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			case "text":
				return typesText(out, doc)
			}
			return usageErr("--output %q: want text or json", output)
		},
	}
	cmd.Flags().StringArrayVar(&sel, "select", nil, "GPUs (PCI address, VVVV:DDDD or VVVV); default every NVIDIA GPU")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newVGPUApplyCmd(g *globals, assert bool) *cobra.Command {
	var file, name string
	var sel []string
	var dryRun, prune, persist bool
	use, short := "apply", "Create the vGPUs a vgpu-device-manager config asks for (existing matching vGPUs are kept)"
	if assert {
		use, short = "assert", "Exit 0 when the host has the vGPUs a config asks for, 1 when not"
	}
	cmd := &cobra.Command{
		Use:   use + " -f CONFIG -c NAME",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" || name == "" {
				return usageErr("-f CONFIG and -c NAME are required")
			}
			cfg, err := vgpu.LoadConfig(file)
			if err != nil {
				return usageErr("%v", err)
			}
			sets, err := cfg.Select(name)
			if err != nil {
				return usageErr("%v", err)
			}
			root, gpus, err := configGPUs(g, sel)
			if err != nil {
				return err
			}
			wants, notes, err := vgpu.Wants(file, name, sets, gpus)
			printNotes(cmd.ErrOrStderr(), notes)
			if err != nil {
				return usageErr("%v", err)
			}
			// nvidia-smi: a GPU's heterogeneous vGPU mode, for mixed sizes
			plan, err := vgpu.MakePlanWith(root, wants, vgpu.PlanOptions{Prune: prune, Runner: g.dep().vgpuApplyRunner(root)})
			if err != nil {
				return &exitError{code: exitNotReady, err: err}
			}
			out := sanitize.NewWriter(cmd.OutOrStdout())
			for _, n := range plan.Notes {
				fmt.Fprintf(sanitize.NewWriter(cmd.ErrOrStderr()), "gpuprep: note: %s\n", n)
			}
			for _, u := range plan.Unwanted {
				if hs := plan.InUse[u.Device]; len(hs) > 0 {
					var who []string
					for _, h := range hs {
						who = append(who, h.String())
					}
					fmt.Fprintf(sanitize.NewWriter(cmd.ErrOrStderr()), "gpuprep: note: %s: %s (%s) is not in config %q but in use by %s; kept\n", u.GPU, u.Device, u.Type, name, strings.Join(who, ", "))
					continue
				}
				fmt.Fprintf(sanitize.NewWriter(cmd.ErrOrStderr()), "gpuprep: note: %s: %s (%s) is not in config %q; left alone (--prune removes it)\n", u.GPU, u.Device, u.Type, name)
			}
			var pp *vgpu.PersistPlan
			var runner host.Runner
			if persist {
				raw, err := os.ReadFile(file)
				if err != nil {
					return usageErr("%v", err)
				}
				args := []string{"-c", name}
				for _, x := range sel {
					args = append(args, "--select", x)
				}
				if prune {
					args = append(args, "--prune")
				}
				runner = g.dep().vgpuApplyRunner(root)
				if pp, err = vgpu.PlanPersist(context.Background(), root, runner, g.dep().gpuprepBinary(), raw, args); err != nil {
					return &exitError{code: exitNotReady, err: err}
				}
				for _, n := range pp.Notes {
					fmt.Fprintf(sanitize.NewWriter(cmd.ErrOrStderr()), "gpuprep: note: %s\n", n)
				}
			}
			persistDone := func() error {
				if pp == nil {
					return nil
				}
				if pp.Empty() {
					fmt.Fprintf(out, "persisted: %s is in place and enabled\n", vgpu.ApplyUnitName)
					return nil
				}
				if dryRun {
					d := change.Dry{W: out, Run: "would run "}
					if b := pp.Binary; b != nil {
						d.Line("would install " + vgpu.InstalledBinary + ": this gpuprep (SHA-256 " + b.SHA256 + "), 0755 root:root")
					}
					for _, f := range pp.Files {
						d.Line("would write " + f.Path)
						d.Diff(f)
					}
					if pp.Enable {
						d.Command("systemctl daemon-reload; systemctl enable " + vgpu.ApplyUnitName)
					}
					return nil
				}
				if err := pp.Apply(context.Background(), root, runner, time.Now()); err != nil {
					return &exitError{code: exitNotReady, err: err}
				}
				fmt.Fprintf(out, "persisted: %s re-applies config %q at boot\n", vgpu.ApplyUnitName, name)
				return nil
			}
			if assert {
				// as vgpu-device-manager's assert: each named GPU has exactly
				// the config's vGPUs (VGPUConfig.Equals), none missing, none more
				if len(plan.Actions) == 0 && len(plan.Unwanted) == 0 {
					fmt.Fprintf(out, "vGPU config %q is applied (%s)\n", name, plural.N(len(plan.Kept), "vGPU"))
					return nil
				}
				fmt.Fprintf(out, "vGPU config %q is not applied: %s missing, %d not in the config\n", name, plural.N(len(plan.Actions), "vGPU"), len(plan.Unwanted))
				return &exitError{code: exitNotReady}
			}
			if len(plan.Actions) == 0 && len(plan.Removals) == 0 {
				fmt.Fprintf(out, "nothing to do: config %q is applied (%s kept)\n", name, plural.N(len(plan.Kept), "vGPU"))
				return persistDone()
			}
			if dryRun {
				d := change.Dry{W: out, Run: "would run "}
				for _, a := range plan.Removals {
					d.Line("would write " + a.Value + " > " + a.Path + "  (" + a.About + ")")
				}
				for _, m := range plan.Modes {
					d.Command(host.ShellQuote(m.Argv) + "  (" + m.About + "; then check nvidia-smi -q reads vGPU Heterogeneous Mode: Enabled)")
				}
				for _, a := range plan.Actions {
					d.Line("would write " + a.Value + " > " + a.Path + "  (" + a.About + ")")
				}
				return persistDone()
			}
			done, err := vgpu.ApplyRecorded(root, g.dep().vgpuSysfs(root), plan, time.Now(), "vgpu apply")
			for _, a := range done[:min(len(done), len(plan.Removals))] {
				fmt.Fprintf(out, "wrote %s > %s  (%s)\n", a.Value, a.Path, a.About)
			}
			for _, m := range plan.ModesRan() {
				fmt.Fprintf(out, "ran %s  (%s; nvidia-smi -q reads vGPU Heterogeneous Mode: Enabled)\n", host.ShellQuote(m.Argv), m.About)
			}
			for _, a := range done[min(len(done), len(plan.Removals)):] {
				fmt.Fprintf(out, "wrote %s > %s  (%s)\n", a.Value, a.Path, a.About)
			}
			if err != nil {
				return &exitError{code: exitNotReady, err: err}
			}
			return persistDone()
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "vgpu-device-manager config file (version: v1)")
	cmd.Flags().StringVarP(&name, "config", "c", "", "name of the config in vgpu-configs")
	cmd.Flags().StringArrayVar(&sel, "select", nil, "GPUs the config's device indices refer to; default every NVIDIA GPU")
	if !assert {
		cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the sysfs writes (and --persist's file diffs), change nothing")
		cmd.Flags().BoolVar(&prune, "prune", false, "remove vGPUs the config does not ask for, except those a process (a VM) holds open")
		cmd.Flags().BoolVar(&persist, "persist", false, "copy the config to "+vgpu.PersistedConfig+" and enable "+vgpu.ApplyUnitName+", which re-applies it at boot (after the VFs are enabled)")
	}
	return cmd
}
