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
	"strconv"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/diff"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
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
	Prepare  []string   `json:"prepare,omitempty"`  // commands run before the sysfs writes (modprobe), as a shell would show them
	Sysfs    []string   `json:"sysfs,omitempty"`    // writes, in order: `write "VALUE" > PATH`
	Commands []string   `json:"commands,omitempty"` // as a shell would show them
	Reboot   bool       `json:"reboot,omitempty"`   // a reboot is required here
	Deferred bool       `json:"deferred,omitempty"` // planned in full once the step before it is done (after the reboot)
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
	switch opts.Mode {
	case preflight.VMPassthrough:
		if err := p.planBind(rebootPending); err != nil {
			return nil, err
		}
	case preflight.Container:
		if err := p.planUnbind(entries); err != nil {
			return nil, err
		}
		p.planNouveau(selected, entries)
	case preflight.VMVGPU:
		// GPUs on VFIO first go back to their drivers, as for containers:
		// the vGPU manager's nvidia driver must take them
		if err := p.planUnbind(entries); err != nil {
			return nil, err
		}
		if err := p.planVGPU(ctx); err != nil {
			return nil, err
		}
	}
	if err := p.planLabel(ctx); err != nil {
		return nil, err
	}
	p.noteBlockers(rebootPending)
	if err := p.planNFDTimer(ctx); err != nil {
		return nil, err
	}
	if len(p.Unaddressed) > 0 {
		// the workload label tells the GPU Operator the node is ready for
		// the mode: not while apply leaves it not ready
		if i := slices.IndexFunc(p.Steps, func(s *Step) bool { return s.ID == StepLabel }); i >= 0 {
			p.Steps = slices.Delete(p.Steps, i, i+1)
			p.Notes = append(p.Notes, "the node is not labelled for "+string(opts.Mode)+" while something below keeps it from being ready: fix that and run gpuprep apply again")
		}
	}
	return p, nil
}

// noteBlockers adds to Unaddressed what check fails for the mode that no
// step of the plan changes, with check's own message and remedy: a plan
// (and apply) for a node whose firmware disables VT-x, or without a GPU,
// says it will not be ready.
func (p *Plan) noteBlockers(rebootPending bool) {
	runner := p.opts.Runner
	if runner == nil {
		runner = host.NoRunner{}
	}
	env, err := preflight.NewEnv(p.root, runner, p.opts.Selector, p.opts.Mode)
	if err != nil {
		return
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{Mode: p.opts.Mode})
	if err != nil || res.Modes[p.opts.Mode] == nil {
		return
	}
	blocks := map[string]bool{}
	for _, id := range res.Modes[p.opts.Mode].Blockers {
		// beyond any plan (the hardware, the firmware, the kernel's build;
		// the running IOMMU unless a reboot is pending), or a fail that only
		// steps of which none is planned change (e.g. a GPU left unbound
		// while nvidia is loaded): the check's own Beyond and ChangedBy
		c, _ := preflight.Lookup(id)
		blocks[id] = c.StaysAfterPlan(func(s string) bool { return p.Step(s) != nil }, rebootPending)
	}
	for _, f := range res.Findings {
		if f.Status != preflight.Fail || !blocks[f.Check] || len(f.Modes) > 0 && !slices.Contains(f.Modes, p.opts.Mode) {
			continue
		}
		u := f.Check + " " + f.Subject + ": " + f.Message
		if f.Remedy != "" {
			u += " (" + f.Remedy + ")"
		}
		p.Unaddressed = append(p.Unaddressed, u)
	}
}

// planNouveau plans, for containers, taking nouveau off the GPUs it drives,
// so that the GPU Operator's driver container can take them: the blacklist
// (vgpu.NouveauBlacklist, as vgpu install writes it) and the initramfs
// regenerated, so that no later boot loads it, then nouveau unloaded
// (modprobe -r, as vgpu install does). Where it cannot be unloaded (a
// console or display server uses it) apply stops at the reboot step after
// it; once unloaded the reboot step is skipped. After a reboot apply asked
// for, nouveau still on a GPU is diagnosed (diagnoseNouveau) instead of
// asking for another reboot.
func (p *Plan) planNouveau(selected []*pci.Device, entries []journal.Entry) {
	var on []string
	for _, d := range selected {
		if d.Driver == "nouveau" {
			on = append(on, d.Address)
		}
	}
	// GPUs the vfio-unbind step before this one returns to nouveau (their
	// driver before vfio bind); when it leaves them for the reboot, nouveau
	// would take them then
	atBoot := false
	for _, t := range unbindTargets(p.root, p.inv, p.opts.Selector) {
		if !t.known || t.restore != "nouveau" || slices.Contains(on, t.addr) {
			continue
		}
		if p.unbindAtBoot != nil {
			atBoot = true
			continue
		}
		on = append(on, t.addr)
	}
	// the vfio-unbind step before this one removes gpuprep's VFIO
	// configuration, whose blacklist kept nouveau off at boot
	var gone []string
	if p.Step(StepVFIOUnbind) != nil && p.root.Exists(vfio.ModprobeConf) {
		gone = []string{vfio.ModprobeConf}
	}
	if len(on) == 0 {
		if atBoot && vfio.NouveauBuiltin(p.root) {
			// the GPUs leave VFIO at the next boot, and a built-in nouveau
			// takes them then unless that boot has nouveau.modeset=0
			p.planNouveauArg(nil, nil)
			return
		}
		if w := vgpu.PlanNouveauBlacklist(p.root, gone...); atBoot && w.Write {
			// nouveau drives nothing now, but the GPUs it drove before
			// gpuprep bound them leave VFIO at the next boot, and without a
			// blacklist it takes them then: keep it off (no unload, no
			// reboot of its own)
			s := &Step{ID: StepNouveau, Title: "keep nouveau off the GPUs at the next boot (the vfio-unbind step removes " + vfio.ModprobeConf + ", whose blacklist did): blacklist it, regenerate the initramfs"}
			p.blacklistNouveau(s, w)
			// before the reboot that takes the GPUs off VFIO
			i := slices.IndexFunc(p.Steps, func(x *Step) bool { return x.Reboot && x.rebootFor == RebootForVFIO })
			if i < 0 {
				i = len(p.Steps)
			}
			p.Steps = slices.Insert(p.Steps, i, s)
		}
		return
	}
	// unloading nouveau takes it off every device it drives, selected or
	// not (as the blacklist does at the next boot)
	var others []string
	for _, d := range p.inv.Devices {
		if d.Driver == "nouveau" && !slices.Contains(on, d.Address) {
			others = append(others, d.Address)
		}
	}
	if d := p.diagnoseNouveau(on, entries); d != nil {
		p.rebootErr = d
		p.Steps = append(p.Steps, &Step{ID: StepReboot, Error: d.Summary, Notes: d.Details,
			Title: "NOT EFFECTIVE AFTER THE REBOOT: the node rebooted since gpuprep apply asked for it and nouveau still drives " + strings.Join(on, ", ") + "; apply fails here (exit 1) and neither asks for nor runs another reboot"})
		return
	}
	if vfio.NouveauBuiltin(p.root) {
		p.planNouveauArg(on, others)
		return
	}
	w := vgpu.PlanNouveauBlacklist(p.root, gone...)
	s := &Step{ID: StepNouveau, Title: "take nouveau off " + strings.Join(on, ", ") + " for the GPU Operator's driver container: blacklist it, regenerate the initramfs, unload it"}
	if len(others) > 0 {
		s.Title += " (which takes it off " + strings.Join(others, ", ") + " too, not selected: nouveau goes from every device, now and at the next boot)"
	}
	p.blacklistNouveau(s, w)
	if w.Initramfs == nil {
		s.Notes = append(s.Notes, "no initramfs tool (update-initramfs, dracut, mkinitcpio) found: if the initramfs loads nouveau, regenerate it by hand")
	}
	s.Commands = append(s.Commands, host.ShellQuote(unloadNouveau))
	s.Notes = append(s.Notes, "where nouveau cannot be unloaded (a console or a display server uses it), apply stops at the reboot step below; rollback removes the blacklist (nouveau loads again at the next boot), and does not load it now nor take a GPU from a driver that took it since")
	p.Steps = append(p.Steps, s)
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true, rebootFor: RebootForNouveau, offNouveau: on,
		Title: "REBOOT REQUIRED HERE unless nouveau could be unloaded: nouveau drives " + strings.Join(on, ", ") + " until it is gone; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot"})
}

// nouveauArgs is, for the VM modes, nouveau.modeset=0 when a built-in
// nouveau takes a selected GPU at boot (vfio.BuiltinHolds): neither
// gpuprep's VFIO configuration nor the vGPU manager's blacklist keeps it
// off then.
func (p *Plan) nouveauArgs() []kargs.Param {
	sel, _ := vfio.Selection(p.inv, p.opts.Selector, false)
	for _, h := range vfio.BuiltinHolds(p.root, sel) {
		if h.Module == "nouveau" {
			p.Notes = append(p.Notes, fmt.Sprintf("nouveau is built into the running kernel and takes %s at every boot: %s goes on the kernel command line with the IOMMU arguments (a blacklist cannot keep a built-in driver off)", h.Dev.Address, vfio.NouveauOff))
			return []kargs.Param{vfio.NouveauOff}
		}
	}
	return nil
}

// planNouveauArg plans, for containers on a kernel with nouveau built in,
// nouveau.modeset=0 on the next boot's kernel command line (through the
// bootloader, as the VM modes' kernel arguments: journalled, undone by
// rollback) and the reboot that brings it, instead of the blacklist, the
// initramfs and modprobe -r, which cannot remove a built-in module. on are
// the GPUs nouveau drives now; with none (the GPUs leave VFIO at the next
// boot) the step goes before the reboot planned for that, and shares it.
func (p *Plan) planNouveauArg(on, others []string) {
	kver, _ := p.root.ReadString("/proc/sys/kernel/osrelease")
	kver = strings.TrimSpace(kver)
	why := "nouveau is built into kernel " + kver + " (modules.builtin): a blacklist, the initramfs and modprobe -r cannot remove it"
	fail := func(err error) {
		p.Unaddressed = append(p.Unaddressed, fmt.Sprintf("driver.nouveau: %s, and gpuprep cannot add %s to this node's kernel command line: %v; add it where the command line is made, reboot, and run gpuprep apply again", why, vfio.NouveauOff, err))
	}
	boot, err := grub.Detect(p.root)
	if err != nil {
		fail(err)
		return
	}
	usual := false
	if boot.Regenerate == nil && (boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2) && !p.root.IsLive() {
		boot.Regenerate, usual = grub.UsualRegenerate(p.root), true
	}
	gp, err := boot.PlanEdit(grub.Request{Ensure: []kargs.Param{vfio.NouveauOff}}, true)
	if err != nil {
		fail(err)
		return
	}
	if usual && len(gp.Commands) > 0 {
		gp.Notes = append(gp.Notes, fmt.Sprintf("no boot-menu tool under this root (a snapshot or a copy of the node): %s is what this node's distribution regenerates its boot menu with; gpuprep apply, which runs on the node itself, runs the tool it finds there", host.ShellQuote(boot.Regenerate)))
	}
	p.boot, p.grubPlan = boot, gp
	var steps []*Step
	if gp.Changed() {
		s := &Step{ID: StepKernelArgs, Title: fmt.Sprintf("add %s to the next boot's kernel command line (%s), so that nouveau's init registers no driver: %s", vfio.NouveauOff, boot.Kind, why)}
		if len(gp.Added) == 0 && gp.MenuStale != "" {
			s.Title = fmt.Sprintf("regenerate the boot menu: %s, so the next boot would not get it (%s)", gp.MenuStale, why)
		}
		s.addGrub(gp)
		if len(others) > 0 {
			s.Notes = append(s.Notes, "nouveau then takes no device at all: "+strings.Join(others, ", ")+" (not selected) lose it too")
		}
		s.Notes = append(s.Notes, "rollback takes "+vfio.NouveauOff.String()+" out again (nouveau takes the GPUs at the boot after it)")
		steps = append(steps, s)
	} else {
		p.Notes = append(p.Notes, gp.Notes...)
	}
	if len(on) == 0 {
		// before the reboot that takes the GPUs off VFIO, which brings it
		i := slices.IndexFunc(p.Steps, func(x *Step) bool { return x.Reboot && x.rebootFor == RebootForVFIO })
		if i < 0 {
			i = len(p.Steps)
		}
		p.Steps = slices.Insert(p.Steps, i, steps...)
		return
	}
	p.Steps = append(p.Steps, steps...)
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true, rebootFor: RebootForNouveau, offNouveau: on,
		Title: "REBOOT REQUIRED HERE: nouveau, built into the kernel, drives " + strings.Join(on, ", ") + " until a boot with " + vfio.NouveauOff.String() + "; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot"})
}

// blacklistNouveau adds to s the work w says is left: the blacklist file
// and the initramfs regenerated after it.
func (p *Plan) blacklistNouveau(s *Step, w vgpu.NouveauWork) {
	if w.Write {
		old, err := p.root.ReadFile(vgpu.NouveauBlacklist)
		s.Files = append(s.Files, fileDiff(vgpu.NouveauBlacklist, old, vgpu.NouveauBlacklistContent, err == nil))
	}
	if w.Regenerate && w.Initramfs != nil {
		s.argv = append(s.argv, w.Initramfs)
		s.Commands = append(s.Commands, host.ShellQuote(w.Initramfs))
	}
}

// initramfsHow is how to regenerate the initramfs on root, as a shell shows it.
func initramfsHow(root *host.Root) string {
	if cmd := initramfs.Command(root); cmd != nil {
		return host.ShellQuote(cmd)
	}
	return "update-initramfs -u, dracut -f or mkinitcpio -P"
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

// diagnoseNouveau returns, when apply asked for a reboot after its nouveau
// step, the node has booted since, and nouveau still drives the GPUs on,
// why apply cannot go on: the evidence and the likely causes with how to
// check each. It returns nil otherwise.
func (p *Plan) diagnoseNouveau(on []string, entries []journal.Entry) *RebootError {
	// (only the reboot step after a nouveau step asks for this reason)
	root := p.root
	asked, rebooted, evidence := askState(root, entries, RebootForNouveau)
	if !asked || !rebooted {
		return nil
	}
	kver, _ := root.ReadString("/proc/sys/kernel/osrelease")
	kver = strings.TrimSpace(kver)
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	d := &RebootError{Summary: "the node has rebooted since gpuprep apply asked for a reboot, and nouveau still drives " + strings.Join(on, ", ")}
	d.Details = append(d.Details, evidence, fmt.Sprintf("running kernel %s, /proc/cmdline: %s", orNone(kver), strings.TrimSpace(raw)))
	w := vgpu.PlanNouveauBlacklist(root)
	switch {
	case vfio.NouveauBuiltin(root):
		d.Details = append(d.Details, p.builtinNouveauCauses(kver)...)
	case w.Write:
		d.Details = append(d.Details, "no file in /etc/modprobe.d, /run/modprobe.d or /usr/lib/modprobe.d blacklists nouveau now, although apply wrote "+vgpu.NouveauBlacklist+": something removed it since (configuration management, a package's scripts, a hand edit); find what, then rollback and apply again")
	case w.Regenerate:
		d.Details = append(d.Details, "the initramfs ("+strings.Join(vgpu.InitramfsOlderThanBlacklist(root), ", ")+") is older than "+vgpu.NouveauBlacklist+", so early boot loads nouveau from it: regenerate it ("+initramfsHow(root)+") and check that the boot used it")
	default:
		d.Details = append(d.Details, "nouveau is blacklisted and the initramfs is newer than the blacklist, yet it was loaded: something loads it by name, which a blacklist does not stop — look for nouveau in /etc/modules, /etc/modules-load.d/*.conf and /usr/lib/modules-load.d/*.conf, a rd.driver.pre= or modules-load= kernel argument, or a display setup (a desktop's Xorg/Wayland loads it); `modprobe.blacklist=nouveau` on the kernel command line (gpuprep grub ensure --add modprobe.blacklist=nouveau) keeps it out of every stage")
	}
	if others := otherKernels(root, kver); len(others) > 0 {
		d.Details = append(d.Details, fmt.Sprintf("other kernels are installed (%s): the initramfs regenerated may be another kernel's than the one that booted (update-initramfs -u -k all regenerates every one)", strings.Join(others, ", ")))
	}
	d.Details = append(d.Details, "apply does not ask for another reboot for this, nor run one with --reboot: fix the cause, reboot the node yourself and run gpuprep apply again; or run gpuprep rollback to undo what apply changed and start over")
	return d
}

// builtinNouveauCauses says why a built-in nouveau still drives the GPUs
// after the reboot apply asked for: the boot lacked nouveau.modeset=0
// (the bootloader configuration has it, or lost it), or had it.
func (p *Plan) builtinNouveauCauses(kver string) []string {
	root := p.root
	arg := vfio.NouveauOff.String()
	out := []string{"nouveau is built into kernel " + kver + " (modules.builtin): a blacklist, the initramfs and modprobe -r do nothing to it, only " + arg + " on the kernel command line keeps it off"}
	if kargs.Satisfied(runningArgs(root), vfio.NouveauOff) {
		return append(out, arg+" is on /proc/cmdline, yet nouveau registered its driver (/sys/bus/pci/drivers/nouveau): this kernel does not honour it; check /sys/module/nouveau/parameters/modeset and the kernel's nouveau version, or boot a kernel with nouveau as a module")
	}
	boot, err := grub.Detect(root)
	if err != nil {
		return append(out, fmt.Sprintf("the boot lacked %s (/proc/cmdline), and gpuprep cannot read this node's bootloader configuration (%v): add it where the command line is made", arg, err))
	}
	conf, src, cerr := boot.ConfiguredArgs(kver)
	switch {
	case cerr != nil:
		out = append(out, fmt.Sprintf("the boot lacked %s (/proc/cmdline); bootloader %s: cannot read what it configures for the next boot: %v", arg, boot.Kind, cerr))
	case kargs.Satisfied(conf, vfio.NouveauOff):
		out = append(out, fmt.Sprintf("the boot lacked %s (/proc/cmdline), though bootloader %s: %s has it for the next boot, so the boot did not use that configuration", arg, boot.Kind, src))
		out = append(out, rebootCauses(root, boot, []kargs.Param{vfio.NouveauOff}, kver, src)...)
	default:
		out = append(out, fmt.Sprintf("the boot lacked %s (/proc/cmdline), and bootloader %s: %s lacks it now: something rewrote the configuration since gpuprep apply added it (configuration management, a package's scripts, a hand edit); find what, then gpuprep grub ensure %s puts it back", arg, boot.Kind, src, arg))
	}
	return out
}

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
	// what check calls needed: intel_iommu=on is not where the IOMMU is
	// active without it, and neither an edit nor a reboot is for it
	k, err := preflight.NodeKernelArgs(p.root)
	if err != nil {
		return false, &PlanError{Step: StepKernelArgs, Err: err}
	}
	want := append(append([]kargs.Param{}, k.Needed...), p.nouveauArgs()...)
	for _, w := range k.Wanted {
		if why, ok := k.NotNeeded[w.String()]; ok {
			p.Notes = append(p.Notes, fmt.Sprintf("%s is not needed: %s", w, why))
		}
	}
	runningPs := runningArgs(p.root)
	lacks, runOff := kernelLacks(runningPs, want, k.NotOff)
	running := len(lacks) == 0 && len(runOff) == 0 // the running kernel is as the mode needs
	boot, err := grub.Detect(p.root)
	if err != nil {
		if errors.Is(err, grub.ErrUnsupported) && running {
			p.Notes = append(p.Notes, fmt.Sprintf("no bootloader configuration found, but the running kernel already has %s: nothing to configure; make sure whatever builds this node's kernel command line keeps them", argList(want)))
			return false, nil
		}
		if errors.Is(err, grub.ErrUnsupported) {
			// A node booted over the network or straight by a hypervisor:
			// its command line is made elsewhere, where gpuprep cannot edit it.
			fix := "add them"
			if len(runOff) > 0 {
				fix = "fix that"
			}
			err = fmt.Errorf("%w; the running kernel %s: %s where this node's kernel command line is made (the PXE/iPXE boot configuration, the hypervisor's definition of this VM, a unified kernel image), reboot, and run gpuprep again", err, kernelWrong(lacks, runOff), fix)
		}
		return false, &PlanError{Step: StepKernelArgs, Err: err}
	}
	p.boot = boot
	usual := false // the boot-menu command is the node's usual one, not found under the root
	if boot.Regenerate == nil && (boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2) && !p.root.IsLive() {
		// a snapshot, a fixture, a mounted disk without the tool: plan what
		// the node itself would run (apply runs only on the node)
		boot.Regenerate, usual = grub.UsualRegenerate(p.root), true
	}
	req := k.Request()
	req.Ensure = want
	gp, err := boot.PlanEdit(req, true)
	if errors.Is(err, grub.ErrNoRegenerate) {
		err = fmt.Errorf("%w: this node has none, so gpuprep cannot make the change take effect; install its GRUB tools (the package with update-grub or grub-mkconfig), or make the change with gpuprep grub ensure --mode %s --no-regenerate, regenerate the boot menu yourself, and run gpuprep apply again", err, p.opts.Mode)
	}
	if err != nil {
		return false, &PlanError{Step: StepKernelArgs, Err: err}
	}
	if usual && len(gp.Commands) > 0 {
		gp.Notes = append(gp.Notes, fmt.Sprintf("no boot-menu tool under this root (a snapshot or a copy of the node): %s is what this node's distribution regenerates its boot menu with; gpuprep apply, which runs on the node itself, runs the tool it finds there", host.ShellQuote(boot.Regenerate)))
	}
	p.grubPlan = gp
	if !running {
		if d := p.diagnoseReboot(boot, gp, want, k.NotOff); d != nil {
			// rebooted since apply asked, and still not in effect: no other
			// reboot (nor the kernel-args step) until that is explained
			p.rebootErr = d
			p.Steps = append(p.Steps, &Step{ID: StepReboot, Error: d.Summary, Notes: d.Details,
				Title: fmt.Sprintf("NOT EFFECTIVE AFTER THE REBOOT: the node rebooted since gpuprep apply asked for it and the running kernel still %s; apply fails here (exit 1) and neither asks for nor runs another reboot", kernelWrong(d.Missing, d.Off))})
			return true, nil
		}
	}
	later := "" // BLS: the entries have the arguments; what the step keeps for later
	if boot.Kind == grub.KindBLS && len(gp.Commands) == 0 && gp.Changed() {
		later = p.blsLater(boot, gp, want)
	}
	if gp.Changed() {
		s := &Step{ID: StepKernelArgs, Title: fmt.Sprintf("%s the next boot's kernel command line (%s)", editDesc(gp, " to", " from"), boot.Kind)}
		switch {
		case later != "":
			s.Title = later
		case boot.Kind == grub.KindBLS && len(gp.EntriesAdded)+len(gp.EntriesRemoved) > 0:
			// the next boot's arguments are the entries'; the files are
			// kept in step for entries made later
			s.Title = fmt.Sprintf("%s the next boot's kernel command line (%s: grubby edits every boot entry", editDesc(&grub.Plan{Added: gp.EntriesAdded, Removed: gp.EntriesRemoved}, " to", " from"), boot.Kind)
			var files []string
			for _, c := range gp.Changes {
				files = append(files, c.Path)
			}
			if len(files) > 0 {
				s.Title += "; " + strings.Join(files, " and ") + " edited to match, for entries made later"
			}
			s.Title += ")"
		case len(gp.Changes) == 0 && gp.MenuStale != "":
			s.Title = fmt.Sprintf("regenerate the boot menu: %s, so the next boot would not get it", gp.MenuStale)
		case len(gp.Added) == 0 && len(gp.Removed) == 0:
			s.Title = fmt.Sprintf("configure %s for the next boot (%s)", argList(want), boot.Kind)
		}
		s.addGrub(gp)
		p.Steps = append(p.Steps, s)
	}
	if running {
		return false, nil
	}
	if !gp.Changed() && gp.MenuStale != "" {
		// Configured already, but the boot menu was not regenerated since,
		// and no tool to regenerate it was found (boot.PlanEdit runs it
		// where there is one): the reboot alone would not bring the
		// arguments.
		p.Notes = append(p.Notes, gp.Notes...)
	}
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true, rebootFor: RebootForKernelArgs,
		Title: fmt.Sprintf("REBOOT REQUIRED HERE: the running kernel %s; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot", kernelWrong(lacks, runOff))})
	return true, nil
}

// kernelLacks is what a reboot is for: the arguments of want that running
// lacks, and the arguments in running that turn off what notOff switches
// (the last one per switch).
func kernelLacks(running, want []kargs.Param, notOff []string) (lacks, off []kargs.Param) {
	for _, w := range want {
		if !kargs.Satisfied(running, w) {
			lacks = append(lacks, w)
		}
	}
	for _, key := range notOff {
		if i := kargs.OffIndexes(running, key); len(i) > 0 {
			off = append(off, running[i[len(i)-1]])
		}
	}
	return lacks, off
}

// kernelWrong says what is wrong with the running kernel's command line:
// "lacks A", "runs with B, which turns the IOMMU off", "runs with C, which
// turns interrupt remapping off", joined with "and".
func kernelWrong(lacks, off []kargs.Param) string {
	var s []string
	if len(lacks) > 0 {
		s = append(s, "lacks "+argList(lacks))
	}
	var iommuOff, irOff []kargs.Param
	for _, o := range off {
		if k := kargs.Norm(o.Key); k == "intremap" || k == "nointremap" {
			irOff = append(irOff, o)
		} else {
			iommuOff = append(iommuOff, o)
		}
	}
	if len(iommuOff) > 0 {
		s = append(s, "runs with "+argList(iommuOff)+", which turns the IOMMU off")
	}
	if len(irOff) > 0 {
		s = append(s, "runs with "+argList(irOff)+", which turns interrupt remapping off")
	}
	return strings.Join(s, " and ")
}

// editDesc says what gp does to the arguments: "add A<to>", "remove
// R<from>", or "add A<to> and remove R<from>".
func editDesc(gp *grub.Plan, to, from string) string {
	var s []string
	if len(gp.Added) > 0 {
		s = append(s, "add "+strings.Join(gp.Added, " ")+to)
	}
	if len(gp.Removed) > 0 {
		s = append(s, "remove "+strings.Join(gp.Removed, " ")+from)
	}
	return strings.Join(s, " and ")
}

// blsLater judges a BLS edit that runs no grubby: every installed kernel's
// boot entry has the arguments already, so the next boot has them and the
// edit is only of the files kept for later. /etc/kernel/cmdline is what
// kernels installed later get their arguments from: a step keeps them there
// (its title, returned, says so). /etc/default/grub is read by no boot unless
// the entries are regenerated from it (grub2-mkconfig --update-bls-cmdline):
// a node ready for the mode gets no step for it (a ready node plans
// nothing), only a note with the command that adds them there; gp is emptied
// and "" returned.
func (p *Plan) blsLater(boot *grub.Boot, gp *grub.Plan, want []kargs.Param) string {
	defaults := map[string]bool{}
	for _, f := range boot.Files {
		defaults[f.Path] = true
	}
	var kept, lacking []string
	for _, c := range gp.Changes {
		if defaults[c.Path] {
			lacking = append(lacking, c.Path)
		} else {
			kept = append(kept, c.Path)
		}
	}
	if len(gp.Added) > 0 {
		// /etc/default/grub lacking them is kept too: grub2-mkconfig
		// writes it into /etc/kernel/cmdline and the entries
		// (grub.Boot.LaterLack; check warns, grub show says
		// not-for-later-kernels)
		kept, lacking = append(kept, lacking...), nil
	}
	if len(kept) > 0 && len(gp.Removed) == 0 {
		return fmt.Sprintf("keep %s for kernels installed later: add it to %s (%s; every installed kernel's boot entry has it already, so no reboot is for it)",
			strings.Join(gp.Added, " "), strings.Join(append(kept, lacking...), " and "), boot.Kind)
	}
	if len(kept) > 0 {
		return fmt.Sprintf("keep the boot entries' arguments for kernels installed later: %s in %s (%s; every installed kernel's boot entry is right already, so no reboot is for it)",
			editDesc(gp, "", ""), strings.Join(append(kept, lacking...), " and "), boot.Kind)
	}
	var differs []string
	if len(gp.Added) > 0 {
		differs = append(differs, "lacks "+strings.Join(gp.Added, " "))
	}
	if len(gp.Removed) > 0 {
		differs = append(differs, "has "+strings.Join(gp.Removed, " "))
	}
	p.Notes = append(p.Notes, fmt.Sprintf("every boot entry has %s, so nothing is planned for the next boot; %s %s, which only boot entries regenerated from it (grub2-mkconfig --update-bls-cmdline) would get: gpuprep grub ensure --mode %s edits it (no reboot)",
		argList(want), strings.Join(lacking, " and "), strings.Join(differs, " and "), p.opts.Mode))
	*gp = grub.Plan{Kind: gp.Kind, Satisfied: gp.Satisfied}
	return ""
}

// addGrub puts a bootloader plan's file changes, commands and notes in s.
func (s *Step) addGrub(gp *grub.Plan) {
	for _, c := range gp.Changes {
		s.Files = append(s.Files, fileDiff(c.Path, c.Old, c.New, c.Old != nil))
	}
	for _, c := range gp.Commands {
		s.argv = append(s.argv, c)
		s.Commands = append(s.Commands, host.ShellQuote(c))
	}
	s.Notes = append(s.Notes, gp.Notes...)
}

func fileDiff(path string, old, data []byte, existed bool) FileDiff {
	f := FileDiff{Path: path, New: !existed, Remove: data == nil, old: old, data: data}
	f.Diff = diff.Unified(path, old, data, existed)
	return f
}

// planBind plans vfio bind --persist of the selected GPUs' groups; while a
// reboot is pending (no IOMMU groups yet) it is a deferred step.
func (p *Plan) planBind(rebootPending bool) error {
	sel, _ := vfio.Selection(p.inv, p.opts.Selector, p.opts.NVSwitch)
	p.noteNVSwitches()
	if rebootPending {
		// refused now, not after the reboot (vfio.NewPlan refuses them too)
		rs := vfio.SelectedHostDevices(p.inv, sel)
		rs = append(rs, vfio.VGPURefusals(p.root, sel)...)
		if len(rs) > 0 {
			return &PlanError{Step: StepVFIOBind, Refused: true, Err: &vfio.Refused{Reasons: rs}}
		}
		var addrs []string
		for _, d := range sel {
			addrs = append(addrs, d.Address)
		}
		p.Steps = append(p.Steps, &Step{ID: StepVFIOBind, Deferred: true,
			Title: "bind every endpoint of the IOMMU groups of " + strings.Join(addrs, ", ") + " to VFIO, persistently (the writes are planned after the reboot, once the IOMMU groups and drivers are as it leaves them)",
			Notes: []string{"persistent: /etc/modprobe.d/gpuprep-vfio.conf, /etc/modules-load.d/gpuprep-vfio.conf (and a udev rule where needed), initramfs regenerated"}})
		return nil
	}
	vp, err := vfio.NewPlan(p.root, p.inv, p.opts.Selector, vfio.Options{Persist: true, Force: p.opts.Force, NVSwitch: p.opts.NVSwitch})
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
	// functions on VFIO now that nothing binds at boot (a vfio bind
	// without --persist): back on their host drivers after a reboot
	atBoot := vfio.NewBootView(p.root, vfio.NextBootCmdline(p.root), false)
	var unpersisted []string
	for _, t := range vp.Targets {
		if t.Bound && len(atBoot.Binders(t.Dev)) == 0 {
			unpersisted = append(unpersisted, t.Dev.Address)
		}
	}
	resume := slices.Contains(p.resumed, StepVFIOBind)
	pp := vp.Persist
	if len(todo) == 0 && len(unpersisted) == 0 && !resume && (pp == nil || pp.Regenerate == "") {
		return nil // every function already on VFIO, and at boot: left alone
	}
	s := &Step{ID: StepVFIOBind, Title: "bind to VFIO, persistently: " + strings.Join(todo, ", ")}
	for _, m := range vp.Modules {
		s.Prepare = append(s.Prepare, "modprobe "+m)
	}
	for _, st := range vp.Steps {
		s.Sysfs = append(s.Sysfs, st.String())
	}
	regen := "" // why the initramfs is regenerated although no file changes
	if pp != nil {
		changed := false
		for _, f := range pp.Files {
			old, rerr := p.root.ReadFile(f.Path)
			if f.Content == nil && rerr != nil || rerr == nil && string(old) == string(f.Content) {
				continue
			}
			changed = true
			s.Files = append(s.Files, fileDiff(f.Path, old, f.Content, rerr == nil))
		}
		if !changed && pp.Initramfs != nil {
			// an earlier run that wrote the files and stopped before
			// regenerating the initramfs (killed): the files are as wanted
			// now, and only the initramfs's age (InitramfsStale, which
			// vfio.Bind acts on too) or, where there is no image to
			// compare, the journal tells
			if pp.Regenerate == "" && resume {
				pp.Regenerate = interruptedRegen
			}
			regen = pp.Regenerate
		}
		if changed && pp.Initramfs != nil {
			s.Commands = append(s.Commands, host.ShellQuote(pp.Initramfs))
		}
		regenerate(s, pp.Initramfs, regen)
		if c := pp.CmdlinePending(); c != nil {
			// vfio-pci built in: its IDs go on the kernel command line
			for _, ch := range c.Plan.Changes {
				s.Files = append(s.Files, fileDiff(ch.Path, ch.Old, ch.New, ch.Old != nil))
			}
			for _, argv := range c.Plan.Commands {
				s.Commands = append(s.Commands, host.ShellQuote(argv))
			}
			s.Notes = append(s.Notes, c.Why)
		}
		s.Notes = append(s.Notes, pp.Warnings...)
	}
	s.Notes = append(s.Notes, vp.Warnings...)
	if len(todo) == 0 {
		switch {
		case len(s.Files) > 0 && resume:
			s.Title = "make the VFIO binding persistent (an earlier apply was interrupted)"
		case len(s.Files) > 0 && len(unpersisted) > 0:
			s.Title = "make the VFIO binding persistent: nothing binds " + strings.Join(unpersisted, ", ") + " to VFIO at boot (bound live), so a reboot would put them back on their host drivers"
		case len(s.Files) > 0:
			s.Title = "make the VFIO binding persistent"
		case regen != "":
			s.Title = "regenerate the initramfs: gpuprep's persistent VFIO configuration may not be in it (an earlier run stopped before regenerating it)"
		default:
			return nil
		}
	}
	p.vfioPlan = vp
	p.Steps = append(p.Steps, s)
	return nil
}

// noteNVSwitches says, for vm-passthrough without Options.NVSwitch, that
// NVSwitches not on VFIO stay with the host (see check vfio.binding).
func (p *Plan) noteNVSwitches() {
	selected, _ := vfio.Selection(p.inv, p.opts.Selector, p.opts.NVSwitch)
	switches := pci.NVSwitches(p.inv)
	if p.opts.NVSwitch {
		// the fabric goes with the switches: GPUs left on the host lose it
		var left []string
		every, _ := pci.Selector{}.Select(p.inv) // every NVIDIA GPU
		for _, g := range every {
			if !slices.Contains(selected, g) {
				left = append(left, g.Address)
			}
		}
		if len(left) > 0 && len(switches) > 0 {
			p.Notes = append(p.Notes, "--nvswitch gives every NVSwitch to VFIO, but "+strings.Join(left, ", ")+
				" stay on the host: they lose the NVLink fabric (the host's Fabric Manager has no switch left); select every GPU of the board, or leave the switches on the host")
		}
		return
	}
	var off []string
	for _, s := range switches {
		if !pci.DriverIsVFIO(s.Driver) && !slices.Contains(selected, s) {
			off = append(off, s.Address)
		}
	}
	if len(off) > 0 {
		p.Notes = append(p.Notes, "the NVSwitches "+strings.Join(off, ", ")+
			" stay with this host, whose Fabric Manager serves the NVLink fabric; --nvswitch binds them to VFIO with the GPUs, for a VM given the whole board with its fabric (Fabric Manager then runs in the guest)")
	}
}

// interruptedRegen is why a step regenerates the initramfs when only the
// journal tells that an earlier run may have changed gpuprep's persistent
// VFIO files and stopped before regenerating it.
const interruptedRegen = "an earlier apply was interrupted in this step (the journal shows it started and not done), after which the initramfs may not have been regenerated"

// regenerate adds to s the initramfs command cmd run although no file of
// gpuprep's changes, and why ("": nothing is added). vfio.Bind (through
// Persist.Regenerate) and vfio.Unbind (through Options.Regenerate) run it.
func regenerate(s *Step, cmd []string, why string) {
	if why == "" || cmd == nil {
		return
	}
	s.Commands = append(s.Commands, host.ShellQuote(cmd))
	s.Notes = append(s.Notes, "the initramfs is regenerated: "+why)
}

// planUnbindAtBoot plans planUnbind's step for a board with NVSwitches:
// gpuprep's persistent VFIO configuration drops the devices and the
// initramfs is regenerated, nothing is rebound now, and a reboot step
// follows (skipped once none is on VFIO). After a reboot apply asked for
// that left devices on VFIO, it diagnoses instead (diagnoseVFIOReboot).
func (p *Plan) planUnbindAtBoot(ts []unbindTarget, onVFIO []string, entries []journal.Entry) error {
	if d := p.diagnoseVFIOReboot(onVFIO, entries); d != nil {
		p.rebootErr = d
		p.Steps = append(p.Steps, &Step{ID: StepReboot, Error: d.Summary, Notes: d.Details,
			Title: "NOT EFFECTIVE AFTER THE REBOOT: the node rebooted since gpuprep apply asked for it and " + strings.Join(onVFIO, ", ") + " are still on VFIO; apply fails here (exit 1) and neither asks for nor runs another reboot"})
		return nil
	}
	var names, addrs []string
	for _, t := range ts {
		addrs = append(addrs, t.addr)
		names = append(names, fmt.Sprintf("%s (%s)", t.addr, orNone(t.driver)))
	}
	s := &Step{ID: StepVFIOUnbind, Title: "return to their drivers from VFIO at the next boot: " + strings.Join(names, ", ") +
		" (not now: on a board with NVSwitches, moving a GPU from vfio-pci to nvidia while the system runs starts NVLink training that can hang and leave it to no driver)"}
	var files []string
	for _, f := range []string{vfio.ModprobeConf, vfio.ModulesLoad, vfio.UdevRule} {
		if p.root.Exists(f) {
			files = append(files, f)
		}
	}
	cmd := initramfs.Command(p.root)
	switch {
	case len(files) > 0:
		s.Notes = append(s.Notes, "gpuprep's persistent VFIO configuration drops these devices (removed or rewritten, backed up): "+strings.Join(files, ", "))
		if cmd != nil {
			s.Commands = append(s.Commands, host.ShellQuote(cmd))
		}
	default:
		// the files went in an earlier run whose initramfs command failed
		// (or was killed): the image still binds them at boot
		if why := vfio.InitramfsStale(p.root); why != "" {
			regenerate(s, cmd, why)
			p.unbindRegen = why
		}
	}
	p.unbindAtBoot = addrs
	// one reboot for both: the kernel arguments' reboot (vm-vgpu), when
	// planned, takes them off VFIO too
	if i := slices.IndexFunc(p.Steps, func(x *Step) bool { return x.Reboot }); i >= 0 {
		s.Notes = append(s.Notes, "the reboot step after this one, for the kernel arguments, takes them off VFIO")
		p.Steps = slices.Insert(p.Steps, i, s)
		return nil
	}
	p.Steps = append(p.Steps, s)
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true, rebootFor: RebootForVFIO, offVFIO: onVFIO,
		Title: "REBOOT REQUIRED HERE: " + strings.Join(onVFIO, ", ") + " leave vfio-pci at the next boot; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot"})
	return nil
}

// diagnoseVFIOReboot returns, when apply asked for a reboot to take devices
// off VFIO, the node has booted since, and onVFIO are still on it, why:
// what else binds them at boot. nil otherwise.
func (p *Plan) diagnoseVFIOReboot(onVFIO []string, entries []journal.Entry) *RebootError {
	root := p.root
	asked, rebooted, evidence := askState(root, entries, RebootForVFIO)
	if !asked || !rebooted {
		return nil
	}
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	d := &RebootError{Summary: "the node has rebooted since gpuprep apply asked for a reboot, and " + strings.Join(onVFIO, ", ") + " are still on VFIO"}
	d.Details = append(d.Details, evidence, "/proc/cmdline: "+strings.TrimSpace(raw))
	var binders []string
	// what bound them at the boot that happened: vfio-pci did load
	atBoot := vfio.NewBootView(root, kargs.Parse(raw), true)
	devs := map[string][]string{} // what binds them → which
	for _, a := range onVFIO {
		if d := p.inv.Get(a); d != nil {
			for _, b := range atBoot.Binders(d) {
				if devs[b] == nil {
					binders = append(binders, b)
				}
				devs[b] = append(devs[b], a)
			}
		}
	}
	for i, b := range binders {
		binders[i] = b + " (" + strings.Join(devs[b], ", ") + ")"
	}
	if why := vfio.InitramfsStale(root); why != "" {
		binders = append(binders, why)
	}
	if len(binders) == 0 {
		binders = append(binders, "nothing gpuprep can see: look for a udev rule or a boot script that writes driver_override (grep -r vfio /etc/udev/rules.d /etc/systemd/system), and check that the boot used the regenerated initramfs")
	}
	d.Details = append(d.Details, "what may bind them to vfio-pci at boot: "+strings.Join(binders, "; "))
	d.Details = append(d.Details, "apply does not ask for another reboot for this, nor run one with --reboot: fix the cause, reboot the node yourself and run gpuprep apply again; or run gpuprep rollback to undo what apply changed and start over")
	return d
}

// unbindTarget is one function a container-mode unbind moves off VFIO.
type unbindTarget struct {
	addr, driver, override, restore string
	known                           bool
}

// targets are unbindTargets for this plan: for containers a GPU whose
// driver before VFIO was nouveau is left unbound (noRestore), as the
// nouveau step after the unbind takes nouveau away: bound again, it could
// bring up a console that keeps it from being unloaded.
func (p *Plan) targets(root *host.Root) []unbindTarget {
	ts := unbindTargets(root, p.inv, p.opts.Selector)
	for i := range ts {
		if slices.Contains(p.noRestore(), ts[i].restore) {
			ts[i].restore = ""
		}
	}
	return ts
}

// noRestore are the drivers the vfio-unbind step gives no device back to.
func (p *Plan) noRestore() []string {
	if p.opts.Mode == preflight.Container {
		return []string{"nouveau"}
	}
	return nil
}

// unbindTargets are vfio.Unbind's devices (vfio.UnbindTargets), each with
// its drivers now and the one the journal says it had before vfio bind.
func unbindTargets(root *host.Root, inv *pci.Inventory, sel pci.Selector) []unbindTarget {
	selected, _ := vfio.Selection(inv, sel, true) // NVSwitches on VFIO too
	entries, _ := journal.Read(root)
	var out []unbindTarget
	for _, d := range vfio.UnbindTargets(root, inv, selected) {
		t := unbindTarget{addr: d.Address, driver: root.LinkBase("/sys/bus/pci/devices/" + d.Address + "/driver")}
		t.override, _ = root.ReadString("/sys/bus/pci/devices/" + d.Address + "/driver_override")
		if t.override == "(null)" {
			t.override = ""
		}
		t.restore, t.known = vfio.DriverBefore(entries, d.Address)
		out = append(out, t)
	}
	return out
}

// planUnbind (container and vm-vgpu modes) plans moving the selected GPUs
// off VFIO, as vfio unbind does.
//
// With no device left to move, an unbind step that the journal shows
// started and not done, after recording that it would remove gpuprep's
// persistent files, is planned again to regenerate the initramfs (and
// remove what is left of the files): killed after the files went and before
// the initramfs command, it leaves an initramfs that still binds the GPUs
// to VFIO at early boot, and no file whose age would tell.
func (p *Plan) planUnbind(entries []journal.Entry) error {
	ts := p.targets(p.root)
	regen := ""
	if len(ts) == 0 {
		if !slices.Contains(p.resumed, StepVFIOUnbind) || !persistIntents(entries, StepVFIOUnbind) {
			return nil
		}
		regen = interruptedRegen
	}
	// On a board with NVSwitches no device leaves vfio-pci while the system
	// runs: rebinding an SXM GPU to nvidia live starts NVLink training that
	// can hang for long and leave it to no driver (facts §1). gpuprep's
	// persistent configuration drops them now; the reboot gives each its
	// own driver.
	var onVFIO []string
	for _, t := range ts {
		if pci.DriverIsVFIO(t.driver) {
			onVFIO = append(onVFIO, t.addr)
		}
	}
	p.noteForeignBinders(onVFIO)
	if len(onVFIO) > 0 && len(pci.NVSwitches(p.inv)) > 0 {
		return p.planUnbindAtBoot(ts, onVFIO, entries)
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
			s.Notes = append(s.Notes, t.addr+": the journal has no record of its driver before VFIO: left unbound (a driver loaded later takes it, as the GPU Operator's driver container does; one loaded already does not: echo "+t.addr+" > /sys/bus/pci/drivers_probe)")
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
	cmd := initramfs.Command(p.root)
	if regen != "" {
		if cmd == nil {
			return nil
		}
		s.Title = "regenerate the initramfs: it may still hold gpuprep's removed VFIO configuration (an earlier run stopped before regenerating it)"
	}
	if len(files) > 0 {
		s.Notes = append(s.Notes, "gpuprep's persistent VFIO configuration drops these devices (removed or rewritten, backed up): "+strings.Join(files, ", "))
		if cmd != nil && regen == "" {
			s.Commands = append(s.Commands, host.ShellQuote(cmd))
		}
	}
	regenerate(s, cmd, regen)
	p.unbindRegen = regen
	p.Steps = append(p.Steps, s)
	return nil
}

// noteForeignBinders adds to Unaddressed each device leaving VFIO that
// something other than gpuprep's configuration (which the unbind drops)
// binds to VFIO again at the next boot: the admin's vfio-pci.ids=, modprobe.d
// options, a driverctl override or udev rule. gpuprep does not edit what it
// did not write; until it goes, the node is not ready after a reboot.
func (p *Plan) noteForeignBinders(addrs []string) {
	if len(addrs) == 0 {
		return
	}
	atBoot := vfio.NewBootView(p.root, vfio.NextBootCmdline(p.root), false)
	for _, a := range addrs {
		d := p.inv.Get(a)
		if d == nil {
			continue
		}
		if bs := atBoot.Foreign(d); len(bs) > 0 {
			p.Unaddressed = append(p.Unaddressed, fmt.Sprintf("vfio.binding %s: %s bind(s) it to VFIO again at the next boot (gpuprep removes only its own VFIO configuration): remove that for it, regenerate the initramfs, and run gpuprep apply again",
				a, strings.Join(bs, " and ")))
		}
	}
}

// persistIntents says whether apply recorded, since step was last done, that
// it was about to change one of gpuprep's persistent VFIO files in it (a
// file intent; rollback's undone entries aside).
func persistIntents(entries []journal.Entry, step string) bool {
	undone := undoneSet(entries)
	found := false
	in := false
	for i, e := range entries {
		switch {
		case undone[i]:
		case e.Kind == KindStep && e.Before == step:
			in = e.After == "started"
			if !in {
				found = false
			}
		case in && e.Kind == KindFileIntent && (e.Path == vfio.ModprobeConf || e.Path == vfio.ModulesLoad || e.Path == vfio.UdevRule):
			found = true
		}
	}
	return found
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
			s.Files = append(s.Files, fileDiff(e.Path, e.Old, e.New, e.Existed))
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

// RebootError is why apply stops when the node has rebooted since apply
// asked for a reboot and the kernel arguments are still not in effect:
// asking again would only repeat itself (and with --reboot, loop).
type RebootError struct {
	Missing []kargs.Param
	Off     []kargs.Param // arguments still running that turn the IOMMU or interrupt remapping off
	Summary string
	// Details: the evidence (boot time against the ask, /proc/cmdline, the
	// bootloader configuration), the likely causes with how to check each,
	// and what to do.
	Details []string
}

func (e *RebootError) Error() string {
	return e.Summary + ":\n  - " + strings.Join(e.Details, "\n  - ")
}

// Why apply asks for a reboot (the reboot step's journal entry's Path).
const (
	RebootForKernelArgs = "kernel-args" // the IOMMU arguments on the running kernel
	RebootForNouveau    = "nouveau"     // nouveau off the GPUs (container)
	RebootForVFIO       = "vfio-unbind" // devices off VFIO on a board with NVSwitches
)

// lastRebootAsk is the newest reboot apply asked for, for reason, that
// rollback has not undone and no later apply has answered (a "done" entry:
// the node had rebooted and the plan found nothing left unexplained).
// Journals written before the reason was recorded asked only for kernel
// arguments.
func lastRebootAsk(entries []journal.Entry, reason string) (journal.Entry, bool) {
	undone := undoneSet(entries)
	var last journal.Entry
	found := false
	for i, e := range entries {
		why := e.Path
		if why == "" {
			why = RebootForKernelArgs
		}
		if e.Kind != KindStep || e.Command != "apply" || e.Before != StepReboot || why != reason || undone[i] {
			continue
		}
		switch e.After {
		case "started":
			last, found = e, true
		case "done": // answered: an apply after that reboot found it had done its work
			found = false
		}
	}
	return last, found
}

// askState is the newest unanswered ask for reason (lastRebootAsk) and,
// when there is one, whether the node has booted since, with the evidence
// (rebootedSince).
func askState(root *host.Root, entries []journal.Entry, reason string) (asked, rebooted bool, evidence string) {
	ask, ok := lastRebootAsk(entries, reason)
	if !ok {
		return false, false, ""
	}
	rebooted, evidence = rebootedSince(root, ask)
	return true, rebooted, evidence
}

// rebootReasons are the reasons apply asks for a reboot.
var rebootReasons = []string{RebootForKernelArgs, RebootForNouveau, RebootForVFIO}

func readBootID(root *host.Root) string {
	s, err := root.ReadString(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(s)
}

// readBootTime is btime from /proc/stat: the boot time in whole seconds
// since the epoch.
func readBootTime(root *host.Root) (time.Time, bool) {
	s, err := root.ReadString(procStat)
	if err != nil {
		return time.Time{}, false
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && sec > 0 {
				return time.Unix(sec, 0).UTC(), true
			}
		}
	}
	return time.Time{}, false
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// rebootedSince tells whether the node has booted since apply asked for the
// reboot recorded in ask, and the evidence.
//
// The boot ID decides where both the ask and this boot have one: the kernel
// draws a new random one at every boot, so no clock is involved. Otherwise
// (a journal written before gpuprep recorded it, a root without the file)
// the boot time decides: btime, whole seconds since the epoch, later than
// the ask's time truncated to its second. Both are readings of the same
// UTC wall clock, so no time zone comes between them, and truncating the
// ask keeps a boot within the ask's own second (which cannot be the reboot
// it asked for: shutting down takes longer) on the "not yet" side. What a
// clock comparison cannot see is the clock being set: the kernel derives
// btime from the current wall clock minus the uptime, so a clock stepped
// forward (an NTP correction) by more than the uptime at the ask moves
// btime past the ask without a reboot, and one stepped back can hide a
// reboot; the boot ID is immune to both, which is why it is preferred.
func rebootedSince(root *host.Root, ask journal.Entry) (bool, string) {
	bt, btOK := readBootTime(root)
	booted := "unknown (no btime in /proc/stat)"
	if btOK {
		booted = stamp(bt) + " (btime in /proc/stat)"
	}
	if cur := readBootID(root); ask.Device != "" && cur != "" {
		if cur == ask.Device {
			return false, ""
		}
		ev := fmt.Sprintf("the node has booted since gpuprep apply asked for the reboot at %s (%s): the boot ID changed from %s to %s (%s); it booted at %s",
			stamp(ask.Time), journal.Path, ask.Device, cur, bootIDFile, booted)
		if btOK && bt.Unix() <= ask.Time.Unix() {
			ev += ", which the clock puts before the ask: the clock was set between the two, and the boot ID decides"
		}
		return true, ev
	}
	if !btOK || bt.Unix() <= ask.Time.Unix() {
		return false, ""
	}
	return true, fmt.Sprintf("the node booted at %s, after gpuprep apply asked for the reboot at %s (%s); compared in whole seconds of UTC wall-clock time (no boot ID was recorded to compare)",
		booted, stamp(ask.Time), journal.Path)
}

// diagnoseReboot returns, when the journal shows apply asked for a reboot,
// the node has booted since, and the running kernel still lacks some of
// want, why apply cannot go on: the evidence, what the bootloader
// configuration holds and the likely causes with how to check them. It
// returns nil otherwise (no reboot asked, none done yet: reboot pending).
func (p *Plan) diagnoseReboot(boot *grub.Boot, gp *grub.Plan, want []kargs.Param, notOff []string) *RebootError {
	root := p.root
	entries, _ := journal.Read(root)
	ask, ok := lastRebootAsk(entries, RebootForKernelArgs)
	if !ok {
		return nil
	}
	rebooted, evidence := rebootedSince(root, ask)
	if !rebooted {
		return nil
	}
	running := runningArgs(root)
	missing, off := kernelLacks(running, want, notOff)
	if len(missing) == 0 && len(off) == 0 {
		return nil
	}
	raw, _ := kargs.ReadString(root, "/proc/cmdline")
	kver, _ := root.ReadString("/proc/sys/kernel/osrelease")
	kver = strings.TrimSpace(kver)
	d := &RebootError{Missing: missing, Off: off,
		Summary: fmt.Sprintf("the node has rebooted since gpuprep apply asked for a reboot, and the running kernel still %s", kernelWrong(missing, off))}
	d.Details = append(d.Details, evidence, fmt.Sprintf("running kernel %s, /proc/cmdline: %s", orNone(kver), strings.TrimSpace(raw)))

	conf, src, cerr := boot.ConfiguredArgs(kver)
	var lacks []string
	for _, w := range missing {
		if kargs.Satisfied(conf, w) {
			continue
		}
		s := w.String()
		if have, ok := kargs.Last(conf, w.Key); ok {
			s += " (it has " + have.String() + ")"
		}
		lacks = append(lacks, s)
	}
	var still []string // what turns the IOMMU or remapping off and the configuration still has
	for _, o := range off {
		k := kargs.Norm(o.Key)
		if k == "nointremap" {
			k = "intremap"
		}
		if len(kargs.OffIndexes(conf, k)) > 0 {
			still = append(still, o.String())
		}
	}
	switch {
	case cerr != nil:
		d.Details = append(d.Details, fmt.Sprintf("bootloader %s: cannot read what it configures for the next boot: %v", boot.Kind, cerr))
	case len(lacks) == 0 && len(still) == 0:
		right := []string{}
		if len(missing) > 0 {
			right = append(right, "has "+argList(missing))
		}
		if len(off) > 0 {
			right = append(right, "does not have "+argList(off))
		}
		d.Details = append(d.Details, fmt.Sprintf("bootloader %s: %s %s for the next boot, so the configuration is right and the boot did not use it", boot.Kind, src, strings.Join(right, " and ")))
		if len(missing) > 0 {
			d.Details = append(d.Details, rebootCauses(root, boot, missing, kver, src)...)
		} else {
			d.Details = append(d.Details, offCauses(root, boot, off)...)
		}
	default:
		var wrong []string
		if len(lacks) > 0 {
			wrong = append(wrong, "lacks "+strings.Join(lacks, ", "))
		}
		if len(still) > 0 {
			wrong = append(wrong, "still has "+strings.Join(still, ", "))
		}
		line := fmt.Sprintf("bootloader %s: %s %s now", boot.Kind, src, strings.Join(wrong, " and "))
		if at, ok := kernelArgsDone(entries, ask); ok {
			line += fmt.Sprintf("; gpuprep apply's kernel-args step configured them at %s, so something rewrote the configuration since (configuration management, a package's scripts, cloud-init, a hand edit): find what, then gpuprep grub ensure --mode %s puts them back", stamp(at), p.opts.Mode)
		} else {
			line += fmt.Sprintf(": gpuprep grub ensure --mode %s configures them", p.opts.Mode)
		}
		if gp.Changed() {
			line += " (gpuprep plan shows no kernel-args step while this stands: apply does not change the configuration until the reboot is explained)"
		}
		d.Details = append(d.Details, line)
	}
	if others := otherKernels(root, kver); len(others) > 0 {
		d.Details = append(d.Details, fmt.Sprintf("other kernels are installed (%s): if the default boot entry is one of them, or the arguments went only to the entries of another kernel, the kernel that boots lacks them; check that uname -r is the kernel you expect",
			strings.Join(others, ", ")))
	}
	d.Details = append(d.Details, "apply does not ask for another reboot for this, nor run one with --reboot: fix the cause, reboot the node yourself and run gpuprep apply again; or run gpuprep rollback to undo what apply changed and start over")
	return d
}

// kernelArgsDone is when the newest kernel-args step recorded done before
// the reboot ask finished.
func kernelArgsDone(entries []journal.Entry, ask journal.Entry) (time.Time, bool) {
	undone := undoneSet(entries)
	var at time.Time
	ok := false
	for i, e := range entries {
		if e.Time.After(ask.Time) {
			break
		}
		if e.Kind == KindStep && e.Command == "apply" && e.Before == StepKernelArgs && e.After == "done" && !undone[i] {
			at, ok = e.Time, true
		}
	}
	return at, ok
}

// otherKernels lists the kernels with an image under /boot or /lib/modules
// other than kver.
func otherKernels(root *host.Root, kver string) []string {
	seen := map[string]bool{kver: true}
	var out []string
	add := func(k string) {
		if k != "" && !seen[k] && !strings.Contains(k, "rescue") {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, n := range root.Names("/boot") {
		if k, ok := strings.CutPrefix(n, "vmlinuz-"); ok {
			add(k)
		}
	}
	for _, dir := range []string{"/lib/modules", "/usr/lib/modules"} {
		for _, k := range root.Names(dir) {
			if root.Exists(dir + "/" + k + "/vmlinuz") {
				add(k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// offCauses are the likely reasons a boot still got arguments that turn
// the IOMMU or interrupt remapping off (off) although the configuration no
// longer has them.
func offCauses(root *host.Root, boot *grub.Boot, off []kargs.Param) []string {
	args := argList(off)
	if boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2 {
		for _, cfg := range []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"} {
			if data, err := root.ReadFile(cfg); err == nil {
				for _, o := range off {
					if strings.Contains(string(data), o.String()) {
						regen := "update-grub (or grub-mkconfig -o /boot/grub/grub.cfg, grub2-mkconfig -o /boot/grub2/grub.cfg)"
						if boot.Regenerate != nil {
							regen = host.ShellQuote(boot.Regenerate)
						}
						return []string{fmt.Sprintf("likely cause: the boot menu %s still has %s: it was not regenerated after the change; run %s, check with grep -c -- %s %s, then reboot", cfg, o, regen, host.ShellQuote([]string{o.String()}), cfg)}
					}
				}
				break
			}
		}
	}
	return []string{fmt.Sprintf("likely causes: the node booted another entry or kernel whose arguments still have %s (a recovery or custom entry, a saved default, another BLS entry: grubby --info=ALL), or it was typed at the console", args)}
}

// rebootCauses are the likely reasons a boot did not use a configuration
// that has the arguments, for each kind of bootloader, with how to check.
func rebootCauses(root *host.Root, boot *grub.Boot, missing []kargs.Param, kver, src string) []string {
	args := argList(missing)
	first := missing[0].String()
	if kver == "" {
		kver = "$(uname -r)"
	}
	switch boot.Kind {
	case grub.KindGRUB, grub.KindGRUB2:
		regen := "update-grub (or grub-mkconfig -o /boot/grub/grub.cfg, grub2-mkconfig -o /boot/grub2/grub.cfg)"
		if boot.Regenerate != nil {
			regen = host.ShellQuote(boot.Regenerate)
		}
		cfg := ""
		for _, c := range []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"} {
			if root.Exists(c) {
				cfg = c
				break
			}
		}
		if cfg == "" {
			return []string{fmt.Sprintf("likely cause: the boot menu was not regenerated, or lives elsewhere: there is no /boot/grub/grub.cfg or /boot/grub2/grub.cfg here; run %s, or find the menu the firmware loads (efibootmgr -v names the loader; an EFI system partition's grub.cfg may point to another disk) and check it has %s", regen, args)}
		}
		data, _ := root.ReadFile(cfg)
		var absent []string
		for _, w := range missing {
			if !strings.Contains(string(data), w.String()) {
				absent = append(absent, w.String())
			}
		}
		if len(absent) > 0 {
			s := fmt.Sprintf("likely cause: the boot menu %s does not contain %s: it was not regenerated after the change", cfg, strings.Join(absent, " "))
			if cf, err := root.Stat(cfg); err == nil {
				if df, err := root.Stat(grub.DefaultsFile); err == nil && df.ModTime().After(cf.ModTime()) {
					s += fmt.Sprintf(" (it is older than %s)", grub.DefaultsFile)
				}
			}
			return []string{s + fmt.Sprintf("; run %s, check with grep -c -- %s %s, then reboot", regen, host.ShellQuote([]string{first}), cfg)}
		}
		return []string{
			fmt.Sprintf("%s contains %s, so the node booted another entry or another menu; likely causes: the recovery entry (it gets GRUB_CMDLINE_LINUX only, not GRUB_CMDLINE_LINUX_DEFAULT); an entry picked by GRUB_DEFAULT or a saved default (grub-editenv list); a custom entry (/etc/grub.d/40_custom) with its own linux line; a choice or an edited command line at the console; on UEFI, a grub.cfg on the EFI system partition or on another disk (efibootmgr -v)", cfg, args),
			fmt.Sprintf("check: the menuentry in %s whose linux line loads the kernel of BOOT_IMAGE in /proc/cmdline must carry %s", cfg, args),
		}
	case grub.KindBLS:
		return []string{
			fmt.Sprintf("likely causes: the default entry is not %s (grubby --default-kernel; grubby --info=DEFAULT shows its args); grubby did not update the entry that booted (grubby --info=ALL); entries whose options are $kernelopts take them from /boot/grub2/grubenv (grub2-editenv - list); a choice or an edited command line at the console", src),
			fmt.Sprintf("check: grubby --info=/boot/vmlinuz-%s must show %s in args", kver, args),
		}
	case grub.KindSystemdBoot:
		return []string{
			fmt.Sprintf("likely causes: kernel-install did not regenerate the entry of kernel %s from %s, or wrote it to another EFI system partition (run kernel-install add %s /lib/modules/%s/vmlinuz); a unified kernel image (UKI) carries its own command line and ignores %s (with Secure Boot it also refuses overrides); the default entry is another one (loader.conf default, bootctl set-default)", kver, src, kver, kver, src),
			fmt.Sprintf("check: bootctl status shows the entry that booted and bootctl list its options, which must carry %s", args),
		}
	case grub.KindKernelstub:
		return []string{
			fmt.Sprintf("likely causes: kernelstub records the options in %s and writes them to the EFI system partition's loader entry and NVRAM when it runs: a failed or interrupted run leaves the old ones (run kernelstub -v again); the firmware booted another entry, an older NVRAM entry or GRUB (efibootmgr -v shows BootCurrent and BootOrder)", src),
			fmt.Sprintf("check: kernelstub --print-config -v shows the kernel boot options, and the ESP's loader entry (/boot/efi/loader/entries/*-current.conf) must carry %s", args),
		}
	case grub.KindProxmox:
		return []string{
			fmt.Sprintf("likely causes: proxmox-boot-tool refresh did not copy %s to every ESP in %s (it skips an ESP whose /dev/disk/by-uuid link is missing, and stops when the first line of %s lacks root=); the firmware booted another disk's ESP, or another bootloader than the ESPs' %s (efibootmgr -v names it); a kernel pinned with proxmox-boot-tool kernel pin; a choice or an edited command line at the console", src, grub.ProxmoxBootUUIDs, grub.KernelCmdlineFile, espMode(boot)),
			fmt.Sprintf("check: proxmox-boot-tool status shows what each ESP boots; run proxmox-boot-tool refresh, and the options of loader/entries/proxmox-%s.conf (systemd-boot) or the linux line of grub/grub.cfg (GRUB) on each ESP must carry %s", kver, args),
		}
	case grub.KindRpmOstree:
		return []string{
			"likely causes: rpm-ostree stages the change in a new deployment, and the node booted the previous one: a rollback (greenboot, or chosen at the boot menu), or the staged deployment failed to finalize at shutdown (journalctl -b -1 -u ostree-finalize-staged)",
			fmt.Sprintf("check: rpm-ostree status shows which deployment booted (●), and rpm-ostree kargs the arguments of the next one, which must carry %s", args),
		}
	}
	return nil
}

// espMode names what a proxmox-boot-tool node's ESPs boot, as far as gpuprep
// can tell.
func espMode(boot *grub.Boot) string {
	if boot.ESPMode == "" {
		return "systemd-boot or GRUB"
	}
	return boot.ESPMode
}
