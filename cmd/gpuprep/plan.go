package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vfio"
)

func init() { register(newPlanCmd) }

// provisionFlags are what plan and apply share.
type provisionFlags struct {
	g          *globals
	mode       string
	sel        []string
	output     string
	kubeconfig string
	node       string
	force      bool
	nvswitch   bool // vm-passthrough
	// vm-vgpu
	vgpuConfigFile string
	vgpuConfig     string
	driver         string
	previousDriver string
	nfdTimer       bool // the NFD feature file's timer
}

func (f *provisionFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.mode, "mode", "", "workload type: container, vm-passthrough or vm-vgpu (required)")
	fl.StringArrayVar(&f.sel, "select", nil, "GPUs: PCI address (0000:41:00.0), VVVV:DDDD or VVVV; repeatable (default: every NVIDIA GPU)")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "label the Node through the Kubernetes API with this kubeconfig (default: the kubelet environment file's --node-labels)")
	fl.StringVar(&f.node, "node", "", "Node name with --kubeconfig (default: this host's name, lower-cased)")
	fl.BoolVar(&f.force, "force", false, "vfio: unbind nvidia (or vfio) even while its device nodes are held open")
	fl.BoolVar(&f.nfdTimer, "nfd-timer", false, "also install a systemd timer that rewrites Node Feature Discovery's feature file ("+provision.NFDFeatureDir+"/gpuprep) every 5 minutes, so readiness and drift show as node labels")
	fl.BoolVar(&f.nvswitch, "nvswitch", false, "vm-passthrough: bind the NVSwitches to VFIO with the GPUs, for a VM given the whole board with its NVLink fabric (Fabric Manager then runs in the guest)")
	fl.StringVar(&f.vgpuConfigFile, "vgpu-config-file", "", "vm-vgpu: vgpu-device-manager config file (version: v1), as gpuprep vgpu apply -f (required with vm-vgpu)")
	fl.StringVar(&f.vgpuConfig, "vgpu-config", "", "vm-vgpu: the config in --vgpu-config-file to create, as gpuprep vgpu apply -c; also the nvidia.com/vgpu.config label, as gpuprep label --vgpu-config (required with vm-vgpu)")
	fl.StringVar(&f.driver, "driver", "", "vm-vgpu: the vGPU manager NVIDIA-Linux-x86_64-<ver>-vgpu-kvm.run, as gpuprep vgpu install --driver (needed when the manager is not installed and running)")
	fl.StringVar(&f.previousDriver, "previous-driver", "", "vm-vgpu: with a --driver of another version than the one installed, that one's installer or package, as gpuprep vgpu install --previous-driver (not needed where gpuprep installed it)")
}

// plan parses the flags and computes the plan; query answers its read-only
// questions (nil: deps.provisionQuery).
func (f *provisionFlags) plan(ctx context.Context, query host.Runner) (*host.Root, *provision.Plan, error) {
	mode, err := f.checkFlags()
	if err != nil {
		return nil, nil, err
	}
	sel, err := pci.ParseSelector(f.sel)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	root, err := f.g.hostRoot()
	if err != nil {
		return nil, nil, err
	}
	if query == nil {
		query = f.g.dep().provisionQuery(root)
	}
	p, err := provision.NewPlan(ctx, root, provision.Options{Mode: mode, Selector: sel, Kubeconfig: f.kubeconfig, Node: f.node, Force: f.force, NVSwitch: f.nvswitch,
		VGPUConfigFile: f.vgpuConfigFile, VGPUConfig: f.vgpuConfig, Driver: f.driver, PreviousDriver: f.previousDriver, Binary: f.g.dep().gpuprepBinary(), SelectArgs: f.sel, Runner: query, NFDTimer: f.nfdTimer})
	if err != nil {
		return root, nil, planErr(err)
	}
	return root, p, nil
}

// checkFlags validates the flags, and returns the mode.
func (f *provisionFlags) checkFlags() (preflight.Mode, error) {
	if f.output != "text" && f.output != "json" {
		return "", usageErr("--output %q: want text or json", f.output)
	}
	if f.mode == "" {
		return "", usageErr("--mode is required: container, vm-passthrough or vm-vgpu")
	}
	mode, err := preflight.ParseMode(f.mode)
	if err != nil {
		return "", usageErr("--mode: %v", err)
	}
	if f.node != "" && f.kubeconfig == "" {
		return "", usageErr("--node goes with --kubeconfig")
	}
	if f.nvswitch && mode != preflight.VMPassthrough {
		return "", usageErr("--nvswitch applies to --mode vm-passthrough only (container and vm-vgpu return NVSwitches on VFIO to the host)")
	}
	if mode != preflight.VMVGPU {
		if f.vgpuFlagGiven() {
			return "", usageErr("--vgpu-config-file, --vgpu-config, --driver and --previous-driver apply to --mode vm-vgpu only")
		}
		return mode, nil
	}
	return mode, f.checkVGPUFlags()
}

// vgpuFlagGiven says whether a flag of vm-vgpu's is given.
func (f *provisionFlags) vgpuFlagGiven() bool {
	return f.vgpuConfigFile != "" || f.vgpuConfig != "" || f.driver != "" || f.previousDriver != ""
}

// checkVGPUFlags checks that --mode vm-vgpu has its config file and a
// config name that is a label value.
func (f *provisionFlags) checkVGPUFlags() error {
	var miss []string
	if f.vgpuConfigFile == "" {
		miss = append(miss, "--vgpu-config-file FILE (the vgpu-device-manager config)")
	}
	if f.vgpuConfig == "" {
		miss = append(miss, "--vgpu-config NAME (the config in it to create)")
	}
	if len(miss) > 0 {
		return usageErr("--mode vm-vgpu needs %s", strings.Join(miss, " and "))
	}
	if err := kube.ValidateLabelValue(kube.VGPUConfigLabel, f.vgpuConfig); err != nil {
		return usageErr("--vgpu-config: %v", err)
	}
	return nil
}

// planErr maps plan errors to exit codes: a selector that matches nothing is
// a usage error, a refusal (a shared IOMMU group, nvidia in use) 1, a
// configuration that cannot be read or edited safely 3.
func planErr(err error) error {
	var se *vfio.SelectError
	if errors.As(err, &se) {
		return usageErr("%v", err)
	}
	var pe *provision.PlanError
	if errors.As(err, &pe) && pe.Usage {
		return usageErr("%v", err)
	}
	if errors.As(err, &pe) && pe.Refused {
		return &exitError{code: exitNotReady, err: err}
	}
	return &exitError{code: exitUnknown, err: err}
}

func newPlanCmd(g *globals) *cobra.Command {
	f := &provisionFlags{g: g}
	cmd := &cobra.Command{
		Use:   "plan --mode MODE [--select …] [--vgpu-config-file FILE --vgpu-config NAME [--driver FILE]] [-o text|json]",
		Short: "Show, in order, what apply would change to make this node ready for a mode (changes nothing)",
		Long: `plan shows the ordered steps that take this node to ready for a workload type,
and changes nothing:

  kernel-args  (vm-*) the IOMMU arguments in the bootloader configuration: file diffs and
               the command that regenerates the boot menu
  reboot       (vm-*) when the running kernel lacks them: apply stops here (or, when the
               node has rebooted since apply asked and they are still missing, fails)
  vfio-bind    (vm-passthrough) every endpoint of the selected GPUs' IOMMU groups to VFIO,
               persistently: sysfs writes, modprobe.d/modules-load.d files, initramfs
  vfio-unbind  (container) selected GPUs on VFIO back to the drivers they had
  vgpu-install (vm-vgpu) the vGPU manager from --driver, as gpuprep vgpu install does;
               no step when it is installed and running (then --driver is not needed)
  vgpu-devices (vm-vgpu) the vGPUs of --vgpu-config NAME in --vgpu-config-file FILE, as
               gpuprep vgpu apply -f FILE -c NAME --persist does (planned in full once
               the manager runs)
  label        nvidia.com/gpu.workload.config=MODE (vm-vgpu: and nvidia.com/vgpu.config=
               NAME) in the kubelet's --node-labels (or, with --kubeconfig, on the Node
               through the API)

A node already ready for the mode plans nothing.

When the node has rebooted since gpuprep apply asked for the reboot and the
running kernel still lacks the IOMMU arguments, the reboot step shows why apply
would fail there (exit 1) instead of asking for another reboot.

Exit codes: 0 a plan (possibly empty), 1 refused (e.g. an IOMMU group shared with
another device, or a reboot that did not make the kernel arguments effective),
2 usage error, 3 the host could not be read or its configuration cannot be edited
safely.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			root, p, err := f.plan(c.Context(), nil)
			if err != nil {
				return err
			}
			offlineImagePlanNote(c.ErrOrStderr(), root, p, f.kubeconfig != "")
			if f.output == "json" {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(p); err != nil {
					return err
				}
				return planBlocked(p)
			}
			printProvisionPlan(c.OutOrStdout(), p)
			return planBlocked(p)
		},
	}
	f.add(cmd)
	return cmd
}

// planBlocked is plan's exit when apply would fail before changing anything
// (the plan itself, with the reason, is on stdout).
func planBlocked(p *provision.Plan) error {
	err := p.Blocked()
	if err == nil {
		return nil
	}
	var re *provision.RebootError
	if errors.As(err, &re) {
		return &exitError{code: exitNotReady, err: fmt.Errorf("gpuprep apply would fail at the reboot step: %s (the plan above says why and what to check)", re.Summary)}
	}
	return &exitError{code: exitNotReady, err: fmt.Errorf("gpuprep apply would fail: %w", err)}
}

// printProvisionPlan writes p wrapped to the terminal's width
// (report.TermWidth), never wider: prose under its own indent, a path,
// device address or kernel argument never broken (alone on a line where it
// is longer than one). A file's diff is shown as the file has it, its lines
// not wrapped.
func printProvisionPlan(w io.Writer, p *provision.Plan) {
	width := report.TermWidth(w)
	w = sanitize.NewWriter(w)
	host := sanitize.Terminal(strings.TrimSpace(p.Host))
	if host == "" {
		host = "this node"
	}
	switch {
	case p.Empty() && len(p.Unaddressed) > 0:
		report.Hanging(w, "", fmt.Sprintf("Nothing gpuprep can do on %s for %s, but it is not ready (see below).", host, p.Mode), 0, width)
	case p.Empty():
		report.Hanging(w, "", fmt.Sprintf("Nothing to do: %s is ready for %s as far as gpuprep sets it up.", host, p.Mode), 0, width)
	default:
		report.Hanging(w, "", fmt.Sprintf("Plan for %s on %s (nothing is changed until gpuprep apply):", p.Mode, host), 0, width)
	}
	const body = "   "
	d := change.Dry{W: w, Indent: body, Run: "run: ", Wrap: func(w io.Writer, lead, text string, indent int) {
		report.Hanging(w, lead, text, indent, width)
	}}
	for i, s := range p.Steps {
		lead := fmt.Sprintf("%d. %s: ", i+1, s.ID)
		indent := len(lead)
		if indent > width/2 {
			indent = len(body)
		}
		fmt.Fprintln(w)
		report.Hanging(w, lead, s.Title, indent, width)
		// in the order apply does them
		for _, c := range s.Prepare {
			d.Command(c)
		}
		for _, x := range s.Sysfs {
			d.Line(x)
		}
		for _, f := range s.Files {
			d.Diff(f)
		}
		for _, c := range s.Commands {
			d.Command(c)
		}
		if s.Error != "" {
			d.Labelled("error: ", s.Error)
		}
		for _, n := range s.Notes {
			d.Labelled("note: ", n)
		}
	}
	for _, n := range p.Notes {
		report.Hanging(w, "note: ", n, len("note: "), width)
	}
	for _, u := range p.Unaddressed {
		report.Hanging(w, "not ready after apply: ", u, 2, width)
	}
}
