// Package provision takes one node from its current state to ready for a
// GPU workload mode in one ordered, journalled and reversible workflow:
// kernel arguments (grub) → reboot → VFIO binding (vfio) → node labels
// (kube), built from the same pieces as the single-purpose commands.
//
// NewPlan says what would change (file diffs, sysfs writes, commands, where
// the reboot falls) and changes nothing; Apply runs a plan step by step,
// recording each step's start and end in the journal, and stops at the
// reboot; run again after the reboot, NewPlan finds the kernel arguments in
// effect and Apply continues. Rollback undoes what the journal records,
// newest first. Every step is idempotent and records what it is about to
// change (an intent entry) before changing it, so a crash at any point
// leaves each file old or new and the journal enough to finish or undo.
package provision

import (
	"context"
	"github.com/gpuprep/gpuprep/internal/change"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vfio"
)

// Step IDs, in the order they run.
const (
	StepKernelArgs  = "kernel-args"  // bootloader configuration + its regeneration
	StepReboot      = "reboot"       // apply stops here (exit 4) or reboots
	StepVFIOBind    = "vfio-bind"    // vm-passthrough: vfio bind --persist
	StepVFIOUnbind  = "vfio-unbind"  // container: GPUs on VFIO go back to their drivers
	StepNouveau     = "nouveau"      // container: nouveau blacklisted, the initramfs regenerated (it goes at the next boot)
	StepVGPUInstall = "vgpu-install" // vm-vgpu: vgpu install --driver, when the manager is not installed and running
	StepVGPUDevices = "vgpu-devices" // vm-vgpu: vgpu apply -f CONFIG -c NAME --persist
	StepLabel       = "label"        // nvidia.com/gpu.workload.config (and nvidia.com/vgpu.config)
	// StepNFDTimer (nfd_timer.go): --nfd-timer, the NFD feature file's refresher
)

// Steps lists every step ID in order.
var Steps = []string{StepKernelArgs, StepReboot, StepVFIOBind, StepVFIOUnbind, StepNouveau, StepVGPUInstall, StepVGPUDevices, StepLabel, StepNFDTimer}

// Options say what to plan.
type Options struct {
	Mode     preflight.Mode
	Selector pci.Selector
	// Kubeconfig, when set, labels the Node through the Kubernetes API
	// (Node: its name, default the host name lower-cased); otherwise the
	// labels go into the kubelet environment file's --node-labels.
	Kubeconfig string
	Node       string
	Force      bool // vfio: unbind nvidia (or vfio) while held open
	// NVSwitch (vm-passthrough): bind the NVSwitches with the GPUs, so
	// that a VM given the whole board gets its NVLink fabric (the guest
	// runs Fabric Manager). Container and vm-vgpu always return
	// NVSwitches on VFIO to the host, whose Fabric Manager needs them.
	NVSwitch bool

	// vm-vgpu: the vgpu-device-manager config file and the config in it
	// (also the nvidia.com/vgpu.config label); Driver, the vGPU manager
	// installer, is needed only when the manager is not installed and
	// running. Binary is the file (on this machine) of the gpuprep the
	// boot unit runs a root-owned copy of (vgpu.InstalledBinary); SelectArgs are
	// the --select arguments it is given.
	VGPUConfigFile string
	VGPUConfig     string
	Driver         string
	PreviousDriver string // with a Driver of another version: the installed one's (vgpu.InstallOptions.Previous)
	Binary         string
	SelectArgs     []string
	// NFDTimer: install the systemd timer that refreshes the Node Feature
	// Discovery feature file (StepNFDTimer), running a root-owned copy of
	// Binary.
	NFDTimer bool
	// Runner answers the read-only queries of planning (systemctl
	// is-active, sh FILE --list); nil: none can be asked.
	Runner host.Runner
}

// Step is one step of a plan.
type Step struct {
	ID       string        `json:"id"`
	Title    string        `json:"title"`
	Files    []change.File `json:"files,omitempty"`
	Prepare  []string      `json:"prepare,omitempty"`  // commands run before the sysfs writes (modprobe), as a shell would show them
	Sysfs    []string      `json:"sysfs,omitempty"`    // writes, in order: `write "VALUE" > PATH`
	Commands []string      `json:"commands,omitempty"` // as a shell would show them
	Reboot   bool          `json:"reboot,omitempty"`   // a reboot is required here
	Deferred bool          `json:"deferred,omitempty"` // planned in full once the step before it is done (after the reboot)
	// Error says why the step cannot run: apply fails here without running
	// anything (the reboot step when a reboot since apply asked for one did
	// not make the kernel arguments effective; its notes hold the diagnosis).
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`

	argv [][]string
	// rebootFor (the reboot step): why, RebootForKernelArgs or
	// RebootForNouveau, recorded with the ask
	rebootFor string
	// offNouveau (the reboot step after the nouveau step): the GPUs whose
	// leaving nouveau makes the reboot unnecessary; offVFIO, the same for
	// the devices planUnbindAtBoot leaves on VFIO
	offNouveau, offVFIO []string
}

// Plan is the ordered steps that take the node to ready for Mode.
type Plan struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Host       string   `json:"host"`
	Mode       string   `json:"mode"`
	Steps      []*Step  `json:"steps"`
	Notes      []string `json:"notes,omitempty"`
	// Unaddressed is what keeps the node from being ready for Mode that
	// no step of the plan changes (e.g. GPUs on nouveau for containers).
	Unaddressed []string `json:"unaddressed,omitempty"`

	opts     Options
	root     *host.Root
	inv      *pci.Inventory
	boot     *grub.Boot
	grubPlan *grub.Plan
	// kargs is what the kernel-args step was planned from (for the
	// vfio-bind step's IDs to join its edit: kernel_args_ids.go)
	kargs    kargsPlanned
	vfioPlan *vfio.Plan
	labels   labelPlan
	vgpu     *vgpuState
	nfdTimer *nfdTimerPlan
	resumed  []string // steps an earlier apply started and did not finish
	// unbindAtBoot: the devices the vfio-unbind step takes off VFIO at the
	// next boot, not now (a board with NVSwitches: planUnbindAtBoot)
	unbindAtBoot []string
	// unbindRegen: why the vfio-unbind step, with no device to move,
	// regenerates the initramfs ("": it does not)
	unbindRegen string
	// rebootErr: the node rebooted since apply asked for a reboot and the
	// kernel arguments are still not in effect, or nouveau still drives a
	// GPU (container); apply fails with it.
	rebootErr *RebootError
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Steps) == 0 }

// Blocked returns the error apply fails with before running any step (nil
// when it can run): today only a reboot that did not make the kernel
// arguments effective.
func (p *Plan) Blocked() error {
	if p.rebootErr == nil {
		return nil
	}
	return p.rebootErr
}

// Step returns the step with id, or nil.
func (p *Plan) Step(id string) *Step {
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// PlanError is a plan that cannot be made: the configuration cannot be read
// or edited safely (Unknown), or a step is refused (e.g. a shared IOMMU group).
type PlanError struct {
	Step    string
	Refused bool
	Usage   bool // a flag is missing or wrong (e.g. --driver when the vGPU manager is not installed)
	Err     error
}

func (e *PlanError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *PlanError) Unwrap() error { return e.Err }

// NewPlan computes the plan for the node under root. It only reads.
func NewPlan(ctx context.Context, root *host.Root, opts Options) (*Plan, error) {
	p := &Plan{APIVersion: "gpuprep/v1", Kind: "Plan", Mode: string(opts.Mode), Steps: []*Step{}, opts: opts, root: root}
	p.Host, _ = root.ReadString("/proc/sys/kernel/hostname")
	inv, err := pci.Discover(root)
	if err != nil {
		return nil, &PlanError{Step: "discover", Err: err}
	}
	p.inv = inv
	selected, err := vfio.Selection(inv, opts.Selector, false)
	if err != nil {
		return nil, err // *vfio.SelectError: a usage error
	}
	entries, _ := journal.Read(root)
	p.resumed = Unfinished(entries)
	rebootPending := false
	if opts.Mode == preflight.VMPassthrough || opts.Mode == preflight.VMVGPU {
		if rebootPending, err = p.planKernelArgs(); err != nil {
			return nil, err
		}
	}
	if err := p.planModeSteps(ctx, selected, entries, rebootPending); err != nil {
		return nil, err
	}
	if err := p.planLabel(ctx); err != nil {
		return nil, err
	}
	p.noteBlockers(rebootPending)
	if err := p.planNFDTimer(ctx); err != nil {
		return nil, err
	}
	p.dropLabelUnlessReady()
	return p, nil
}

// planModeSteps plans the driver steps of the mode: vfio-bind for VMs
// with whole GPUs; vfio-unbind and nouveau for containers; vfio-unbind and
// the vGPU steps for vGPU VMs.
func (p *Plan) planModeSteps(ctx context.Context, selected []*pci.Device, entries []journal.Entry, rebootPending bool) error {
	switch p.opts.Mode {
	case preflight.VMPassthrough:
		return p.planBind(rebootPending)
	case preflight.Container:
		if err := p.planUnbind(entries); err != nil {
			return err
		}
		p.planNouveau(selected, entries)
	case preflight.VMVGPU:
		// GPUs on VFIO first go back to their drivers, as for containers:
		// the vGPU manager's nvidia driver must take them
		if err := p.planUnbind(entries); err != nil {
			return err
		}
		return p.planVGPU(ctx)
	}
	return nil
}

// dropLabelUnlessReady takes the label step out of a plan that leaves the
// node not ready (Unaddressed): the workload label tells the GPU Operator
// the node is ready for the mode.
func (p *Plan) dropLabelUnlessReady() {
	if len(p.Unaddressed) == 0 {
		return
	}
	if i := slices.IndexFunc(p.Steps, func(s *Step) bool { return s.ID == StepLabel }); i >= 0 {
		p.Steps = slices.Delete(p.Steps, i, i+1)
		p.Notes = append(p.Notes, "the node is not labelled for "+string(p.opts.Mode)+" while something below keeps it from being ready: fix that and run gpuprep apply again")
	}
}

// unloadNouveau is how the nouveau step unloads it.
var unloadNouveau = []string{"modprobe", "-r", "nouveau"}

// devicesOn lists the devices of addrs whose driver now is one on says yes to.
func devicesOn(root *host.Root, addrs []string, on func(driver string) bool) []string {
	var out []string
	for _, a := range addrs {
		if on(root.LinkBase("/sys/bus/pci/devices/" + a + "/driver")) {
			out = append(out, a)
		}
	}
	return out
}

func isNouveau(driver string) bool { return driver == "nouveau" }

// wanted is the IOMMU arguments for this node's IOMMU vendor.
func wanted(root *host.Root) ([]kargs.Param, error) {
	k, err := preflight.NodeKernelArgs(root)
	if err != nil {
		return nil, err
	}
	return k.Wanted, nil
}

func runningArgs(root *host.Root) []kargs.Param {
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	return kargs.Parse(raw)
}

func argList(ps []kargs.Param) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, " ")
}

// interruptedRegen is why a step regenerates the initramfs when only the
// journal tells that an earlier run may have changed gpuprep's persistent
// VFIO files and stopped before regenerating it.
const interruptedRegen = "an earlier apply was interrupted in this step (the journal shows it started and not done), after which the initramfs may not have been regenerated"

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// The reboot apply asks for is recorded as a step entry {kind "step",
// before "reboot", after "started"}, with the time it asked and, in Device,
// the boot ID of the boot that asked (the kernel's random per-boot
// /proc/sys/kernel/random/boot_id; "" where it cannot be read).
const (
	bootIDFile = "/proc/sys/kernel/random/boot_id"
	procStat   = "/proc/stat"
)

// Why apply asks for a reboot (the reboot step's journal entry's Path).
const (
	RebootForKernelArgs = "kernel-args" // the IOMMU arguments on the running kernel
	RebootForNouveau    = "nouveau"     // nouveau off the GPUs (container)
	RebootForVFIO       = "vfio-unbind" // devices off VFIO on a board with NVSwitches
)

// rebootReasons are the reasons apply asks for a reboot.
var rebootReasons = []string{RebootForKernelArgs, RebootForNouveau, RebootForVFIO}
