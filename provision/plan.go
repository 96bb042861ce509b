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
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/diff"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vfio"
)

// Step IDs, in the order they run.
const (
	StepKernelArgs  = "kernel-args"  // bootloader configuration + its regeneration
	StepReboot      = "reboot"       // apply stops here (exit 4) or reboots
	StepVFIOBind    = "vfio-bind"    // vm-passthrough: vfio bind --persist
	StepVFIOUnbind  = "vfio-unbind"  // container: GPUs on VFIO go back to their drivers
	StepVGPUInstall = "vgpu-install" // vm-vgpu: vgpu install --driver, when the manager is not installed and running
	StepVGPUDevices = "vgpu-devices" // vm-vgpu: vgpu apply -f CONFIG -c NAME --persist
	StepLabel       = "label"        // nvidia.com/gpu.workload.config (and nvidia.com/vgpu.config)
)

// Steps lists every step ID in order.
var Steps = []string{StepKernelArgs, StepReboot, StepVFIOBind, StepVFIOUnbind, StepVGPUInstall, StepVGPUDevices, StepLabel}

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

	// vm-vgpu: the vgpu-device-manager config file and the config in it
	// (also the nvidia.com/vgpu.config label); Driver, the vGPU manager
	// installer, is needed only when the manager is not installed and
	// running. Binary is the gpuprep the boot unit runs; SelectArgs are
	// the --select arguments it is given.
	VGPUConfigFile string
	VGPUConfig     string
	Driver         string
	Binary         string
	SelectArgs     []string
	// Runner answers the read-only queries of planning (systemctl
	// is-active, sh FILE --list); nil: none can be asked.
	Runner host.Runner
}

// FileDiff is one planned file change.
type FileDiff struct {
	Path   string `json:"path"`
	New    bool   `json:"new,omitempty"`
	Remove bool   `json:"remove,omitempty"`
	Diff   string `json:"diff"`
	old    []byte
	data   []byte // nil for Remove
}

// Step is one step of a plan.
type Step struct {
	ID       string     `json:"id"`
	Title    string     `json:"title"`
	Files    []FileDiff `json:"files,omitempty"`
	Sysfs    []string   `json:"sysfs,omitempty"`    // writes, in order: `write "VALUE" > PATH`
	Commands []string   `json:"commands,omitempty"` // as a shell would show them
	Reboot   bool       `json:"reboot,omitempty"`   // a reboot is required here
	Deferred bool       `json:"deferred,omitempty"` // planned in full once the step before it is done (after the reboot)
	Notes    []string   `json:"notes,omitempty"`

	argv [][]string
}

// Plan is the ordered steps that take the node to ready for Mode.
type Plan struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Host       string   `json:"host"`
	Mode       string   `json:"mode"`
	Steps      []*Step  `json:"steps"`
	Notes      []string `json:"notes,omitempty"`

	opts     Options
	root     *host.Root
	inv      *pci.Inventory
	boot     *grub.Boot
	grubPlan *grub.Plan
	vfioPlan *vfio.Plan
	labels   labelPlan
	vgpu     *vgpuState
	resumed  []string // steps an earlier apply started and did not finish
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Steps) == 0 }

// Step returns the step with id, or nil.
func (p *Plan) Step(id string) *Step {
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

type labelPlan struct {
	set    []kube.Label
	remove []string
	file   string // kubelet environment file; "" when through the API
	node   string
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
	p := &Plan{APIVersion: "gpuprep/v1", Kind: "Plan", Mode: string(opts.Mode), opts: opts, root: root}
	p.Host, _ = root.ReadString("/proc/sys/kernel/hostname")
	inv, err := pci.Discover(root)
	if err != nil {
		return nil, &PlanError{Step: "discover", Err: err}
	}
	p.inv = inv
	if _, err := vfio.Selection(inv, opts.Selector, false); err != nil {
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
	switch opts.Mode {
	case preflight.VMPassthrough:
		if err := p.planBind(rebootPending); err != nil {
			return nil, err
		}
	case preflight.Container:
		if err := p.planUnbind(); err != nil {
			return nil, err
		}
	case preflight.VMVGPU:
		if err := p.planVGPU(ctx); err != nil {
			return nil, err
		}
	}
	if err := p.planLabel(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// wanted is the IOMMU arguments for this node's IOMMU vendor.
func wanted(root *host.Root) ([]kargs.Param, error) {
	sel, _ := pci.ParseSelector(nil)
	vendor := ""
	if env, err := preflight.NewEnv(root, host.NoRunner{}, sel, preflight.VMPassthrough); err == nil {
		vendor = env.IOMMUVendor()
	} else {
		env := &preflight.Env{Root: root, Firmware: iommu.ReadFirmware(root), IOMMU: iommu.ReadKernel(root)}
		vendor = env.IOMMUVendor()
	}
	if vendor == "" {
		return nil, errors.New("cannot tell whether this node has an Intel or an AMD IOMMU (no ACPI DMAR/IVRS table, IOMMU unit or known CPU vendor)")
	}
	return preflight.WantedArgs(vendor), nil
}

func runningArgs(root *host.Root) []kargs.Param {
	raw, _ := root.ReadString("/proc/cmdline")
	return kargs.Parse(raw)
}

func argsSatisfied(have, want []kargs.Param) bool {
	for _, w := range want {
		if !kargs.Satisfied(have, w) {
			return false
		}
	}
	return true
}

func argList(ps []kargs.Param) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, " ")
}

// planKernelArgs plans the bootloader edit and, when the running kernel
// lacks the arguments, the reboot. It reports whether a reboot is pending.
func (p *Plan) planKernelArgs() (bool, error) {
	want, err := wanted(p.root)
	if err != nil {
		return false, &PlanError{Step: StepKernelArgs, Err: err}
	}
	running := argsSatisfied(runningArgs(p.root), want)
	boot, err := grub.Detect(p.root)
	if err != nil {
		if errors.Is(err, grub.ErrUnsupported) && running {
			p.Notes = append(p.Notes, fmt.Sprintf("no bootloader configuration found, but the running kernel already has %s: nothing to configure; make sure whatever builds this node's kernel command line keeps them", argList(want)))
			return false, nil
		}
		return false, &PlanError{Step: StepKernelArgs, Err: err}
	}
	p.boot = boot
	gp, err := boot.PlanEdit(grub.Request{Ensure: want}, true)
	if err != nil {
		return false, &PlanError{Step: StepKernelArgs, Err: err}
	}
	p.grubPlan = gp
	if gp.Changed() {
		s := &Step{ID: StepKernelArgs, Title: fmt.Sprintf("add %s to the next boot's kernel command line (%s)", strings.Join(gp.Added, " "), boot.Kind)}
		if len(gp.Added) == 0 {
			s.Title = fmt.Sprintf("configure %s for the next boot (%s)", argList(want), boot.Kind)
		}
		for _, c := range gp.Changes {
			s.Files = append(s.Files, fileDiff(c.Path, c.Old, c.New, c.Old != nil))
		}
		for _, c := range gp.Commands {
			s.argv = append(s.argv, c)
			s.Commands = append(s.Commands, host.ShellQuote(c))
		}
		s.Notes = append(s.Notes, gp.Notes...)
		p.Steps = append(p.Steps, s)
	}
	if running {
		return false, nil
	}
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true,
		Title: fmt.Sprintf("REBOOT REQUIRED HERE: the running kernel lacks %s; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot", argList(want))})
	return true, nil
}

func fileDiff(path string, old, data []byte, existed bool) FileDiff {
	f := FileDiff{Path: path, New: !existed, Remove: data == nil, old: old, data: data}
	f.Diff = diff.Unified(path, old, data, existed)
	return f
}

// planBind plans vfio bind --persist of the selected GPUs' groups; while a
// reboot is pending (no IOMMU groups yet) it is a deferred step.
func (p *Plan) planBind(rebootPending bool) error {
	sel, _ := vfio.Selection(p.inv, p.opts.Selector, false)
	if rebootPending {
		var addrs []string
		for _, d := range sel {
			addrs = append(addrs, d.Address)
		}
		p.Steps = append(p.Steps, &Step{ID: StepVFIOBind, Deferred: true,
			Title: "bind every endpoint of the IOMMU groups of " + strings.Join(addrs, ", ") + " to VFIO, persistently (the writes are planned after the reboot, once the IOMMU groups exist)",
			Notes: []string{"persistent: /etc/modprobe.d/gpuprep-vfio.conf, /etc/modules-load.d/gpuprep-vfio.conf (and a udev rule where needed), initramfs regenerated"}})
		return nil
	}
	vp, err := vfio.NewPlan(p.root, p.inv, p.opts.Selector, vfio.Options{Persist: true, Force: p.opts.Force})
	if err != nil {
		var r *vfio.Refused
		return &PlanError{Step: StepVFIOBind, Refused: errors.As(err, &r), Err: err}
	}
	var todo []string
	for _, t := range vp.Targets {
		if !t.Bound {
			todo = append(todo, fmt.Sprintf("%s (%s → %s)", t.Dev.Address, orNone(t.Driver), t.VFIO))
		}
	}
	resume := slices.Contains(p.resumed, StepVFIOBind)
	if len(todo) == 0 && !resume {
		return nil // every function already on VFIO: left alone, as vfio bind does
	}
	s := &Step{ID: StepVFIOBind, Title: "bind to VFIO, persistently: " + strings.Join(todo, ", ")}
	if len(todo) == 0 {
		s.Title = "make the VFIO binding persistent (an earlier apply was interrupted)"
	}
	for _, m := range vp.Modules {
		s.Commands = append(s.Commands, "modprobe "+m)
	}
	for _, st := range vp.Steps {
		s.Sysfs = append(s.Sysfs, st.String())
	}
	if pp := vp.Persist; pp != nil {
		changed := false
		for _, f := range pp.Files {
			old, rerr := p.root.ReadFile(f.Path)
			if f.Content == nil && rerr != nil || rerr == nil && string(old) == string(f.Content) {
				continue
			}
			changed = true
			s.Files = append(s.Files, fileDiff(f.Path, old, f.Content, rerr == nil))
		}
		if changed && pp.Initramfs != nil {
			s.Commands = append(s.Commands, host.ShellQuote(pp.Initramfs))
		}
		s.Notes = append(s.Notes, pp.Warnings...)
	}
	s.Notes = append(s.Notes, vp.Warnings...)
	if len(todo) == 0 && len(s.Files) == 0 {
		return nil
	}
	p.vfioPlan = vp
	p.Steps = append(p.Steps, s)
	return nil
}

// unbindTarget is one function a container-mode unbind moves off VFIO.
type unbindTarget struct {
	addr, driver, override, restore string
	known                           bool
}

// unbindTargets mirrors vfio.Unbind's choice of devices: every function of
// the selected GPUs' groups that is on (or overridden to) a VFIO driver or
// persisted by gpuprep.
func unbindTargets(root *host.Root, inv *pci.Inventory, sel pci.Selector) []unbindTarget {
	selected, _ := vfio.Selection(inv, sel, false)
	persisted := vfio.Persisted(root)
	entries, _ := journal.Read(root)
	var out []unbindTarget
	seen := map[string]bool{}
	for _, s := range selected {
		members := inv.Group(s.IOMMUGroup)
		if s.IOMMUGroup == "" {
			members = []*pci.Device{s}
		}
		for _, d := range members {
			if d.IsBridge() || seen[d.Address] {
				continue
			}
			drv := root.LinkBase("/sys/bus/pci/devices/" + d.Address + "/driver")
			ov, _ := root.ReadString("/sys/bus/pci/devices/" + d.Address + "/driver_override")
			if ov == "(null)" {
				ov = ""
			}
			if d.Slot() != s.Slot() && !containsAddr(selected, d.Address) && !pci.DriverIsVFIO(drv) {
				continue
			}
			if pci.DriverIsVFIO(drv) || pci.DriverIsVFIO(ov) || persisted[d.Address] != "" {
				seen[d.Address] = true
				t := unbindTarget{addr: d.Address, driver: drv, override: ov}
				for _, e := range entries {
					if e.Kind == "driver" && e.Device == d.Address {
						t.restore, t.known = e.Before, e.Command == "vfio bind"
					}
				}
				out = append(out, t)
			}
		}
	}
	return out
}

func containsAddr(ds []*pci.Device, a string) bool {
	for _, d := range ds {
		if d.Address == a {
			return true
		}
	}
	return false
}

// planUnbind (container mode) plans moving the selected GPUs off VFIO, as
// vfio unbind does.
func (p *Plan) planUnbind() error {
	ts := unbindTargets(p.root, p.inv, p.opts.Selector)
	if len(ts) == 0 {
		return nil
	}
	var names []string
	s := &Step{ID: StepVFIOUnbind}
	for _, t := range ts {
		dev := "/sys/bus/pci/devices/" + t.addr
		to := "unbound"
		if t.known && t.restore != "" {
			to = t.restore
		}
		names = append(names, fmt.Sprintf("%s (%s → %s)", t.addr, orNone(t.driver), to))
		if pci.DriverIsVFIO(t.driver) {
			s.Sysfs = append(s.Sysfs, vfio.Step{Path: dev + "/driver/unbind", Value: t.addr}.String())
		}
		if t.override != "" {
			s.Sysfs = append(s.Sysfs, vfio.Step{Path: dev + "/driver_override", Value: "\n"}.String())
		}
		switch {
		case !t.known:
			s.Notes = append(s.Notes, t.addr+": the journal has no record of its driver before VFIO: left unbound (the NVIDIA driver or a reboot picks it up)")
		case t.restore != "":
			s.Sysfs = append(s.Sysfs, vfio.Step{Path: "/sys/bus/pci/drivers/" + t.restore + "/bind", Value: t.addr}.String())
		}
	}
	s.Title = "return to their drivers from VFIO: " + strings.Join(names, ", ")
	var files []string
	for _, f := range []string{vfio.ModprobeConf, vfio.ModulesLoad, vfio.UdevRule} {
		if p.root.Exists(f) {
			files = append(files, f)
		}
	}
	if len(files) > 0 {
		s.Notes = append(s.Notes, "gpuprep's persistent VFIO configuration drops these devices (removed or rewritten, backed up): "+strings.Join(files, ", "))
		if c := vfio.InitramfsCommand(p.root); c != nil {
			s.Commands = append(s.Commands, host.ShellQuote(c))
		}
	}
	p.Steps = append(p.Steps, s)
	return nil
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

// NodeName is the name the kubelet registers this host under.
func NodeName(root *host.Root) (string, error) {
	h, err := root.ReadString("/proc/sys/kernel/hostname")
	if err != nil || h == "" {
		return "", fmt.Errorf("cannot tell this host's name (%v): give the node name", err)
	}
	return strings.ToLower(h), nil
}

func (p *Plan) planLabel(ctx context.Context) error {
	set, remove := labelsFor(p.opts.Mode, p.opts.VGPUConfig)
	p.labels = labelPlan{set: set, remove: remove}
	if p.opts.Kubeconfig == "" {
		file := kube.KubeletEnvFile(p.root)
		old, rerr := p.root.ReadFile(file)
		out, err := kube.EditKubeletEnv(file, old, set, remove)
		if err != nil {
			return &PlanError{Step: StepLabel, Err: err}
		}
		p.labels.file = file
		if rerr == nil && string(old) == string(out) {
			return nil
		}
		p.Steps = append(p.Steps, &Step{ID: StepLabel,
			Title: fmt.Sprintf("label the node %s in the kubelet's --node-labels (%s)", kube.FormatLabels(set), file),
			Files: []FileDiff{fileDiff(file, old, out, rerr == nil)},
			Notes: []string{"the kubelet applies --node-labels when the node registers; for a node that has joined already, give --kubeconfig to label it through the API"}})
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

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
