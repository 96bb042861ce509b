package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vfio"
)

// vfioBindStep (StepVFIOBind, vm-passthrough): the selected devices bound
// to vfio-pci, persistently (vfio.Bind; planned by planBind). vfio.Bind
// journals each device's driver-intent and driver entries and each file;
// rollback puts each device back on the driver its oldest entry names.
type vfioBindStep struct{}

func (vfioBindStep) id() string { return StepVFIOBind }

func (vfioBindStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.bind(ctx, e)
}

// planBind plans vfio bind --persist of the selected GPUs' groups; while a
// reboot is pending (no IOMMU groups yet) it is a deferred step.
func (p *Plan) planBind(rebootPending bool) error {
	sel, _ := vfio.Selection(p.inv, p.opts.Selector, p.opts.NVSwitch)
	p.noteNVSwitches()
	if rebootPending {
		return p.deferBind(sel)
	}
	vp, err := vfio.NewPlan(p.root, p.inv, p.opts.Selector, vfio.Options{Persist: true, Force: p.opts.Force, NVSwitch: p.opts.NVSwitch})
	if err != nil {
		var r *vfio.Refused
		return &PlanError{Step: StepVFIOBind, Refused: errors.As(err, &r), Err: err}
	}
	todo, unpersisted := p.bindTodo(vp)
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
		s.Sysfs = append(s.Sysfs, change.SysfsWrite(st.Path, st.Value))
	}
	p.idsInKernelArgs(pp) // one bootloader edit, the kernel-args step's
	regen := p.planPersist(s, pp, resume)
	s.Notes = append(s.Notes, vp.Warnings...)
	if len(todo) == 0 {
		if s.Title = persistTitle(s, unpersisted, resume, regen); s.Title == "" {
			return nil
		}
	}
	p.vfioPlan = vp
	p.Steps = append(p.Steps, s)
	return nil
}

// deferBind is the bind step before the reboot the kernel arguments need:
// its devices refused now, not after the reboot (vfio.NewPlan refuses them
// too), its writes planned after it.
func (p *Plan) deferBind(sel []*pci.Device) error {
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
		Notes: append([]string{"persistent: /etc/modprobe.d/gpuprep-vfio.conf, /etc/modules-load.d/gpuprep-vfio.conf (and a udev rule where needed), initramfs regenerated"}, p.deferredIDsNote()...)})
	return nil
}

// deferredIDsNote says, where the kernel the reboot boots has vfio-pci
// built in, that the deferred bind step puts the IDs on the kernel command
// line itself, after the reboot (see kernel_args_ids.go).
func (p *Plan) deferredIDsNote() []string {
	running, _ := kernelrelease.Running(p.root) // "" for a hostile name: no note
	k := grub.NextRelease(p.root, running)
	if !vfio.BuiltinModules(p.root, k)["vfio_pci"] {
		return nil
	}
	return []string{vfio.CmdlineWhy(k) + ": after the reboot this step puts vfio-pci.ids= for the devices it binds on the kernel command line, through the bootloader editor (shown, journalled and rolled back as the kernel-args step's edit is), not in the kernel-args step's edit now: which devices, and so which IDs, only the IOMMU groups tell; they are bound live meanwhile, and the IDs bind them at the boot after"}
}

// bindTodo are the functions vp moves to VFIO ("ADDR (FROM → TO)"), and
// those on VFIO now that nothing binds at boot (a vfio bind without
// --persist): back on their host drivers after a reboot.
func (p *Plan) bindTodo(vp *vfio.Plan) (todo, unpersisted []string) {
	for _, t := range vp.Targets {
		if !t.Bound {
			todo = append(todo, fmt.Sprintf("%s (%s → %s)", t.Dev.Address, orNone(t.Driver), t.VFIO))
		}
	}
	atBoot := vfio.NewBootView(p.root, vfio.NextBootCmdline(p.root), false)
	for _, t := range vp.Targets {
		if t.Bound && len(atBoot.Binders(t.Dev)) == 0 {
			unpersisted = append(unpersisted, t.Dev.Address)
		}
	}
	return todo, unpersisted
}

// planPersist adds to s the persistent configuration pp writes (its files,
// the initramfs, vfio-pci's IDs on the kernel command line where it is
// built in); regen says why the initramfs is regenerated although no file
// changes ("": it is not).
func (p *Plan) planPersist(s *Step, pp *vfio.Persist, resume bool) (regen string) {
	if pp == nil {
		return ""
	}
	changed := false
	for _, f := range pp.Files {
		if !f.Pending() { // vfio planned it against the file as it is
			continue
		}
		changed = true
		s.Files = append(s.Files, f)
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
		s.Files = append(s.Files, c.Plan.Changes...)
		for _, argv := range c.Plan.Commands {
			s.Commands = append(s.Commands, host.ShellQuote(argv))
		}
		s.Notes = append(s.Notes, c.Why)
	}
	s.Notes = append(s.Notes, pp.Warnings...)
	return regen
}

// persistTitle is the title of a bind step that moves no function, only
// makes the binding persistent ("": there is nothing to do).
func persistTitle(s *Step, unpersisted []string, resume bool, regen string) string {
	switch {
	case len(s.Files) > 0 && resume:
		return "make the VFIO binding persistent (an earlier apply was interrupted)"
	case len(s.Files) > 0 && len(unpersisted) > 0:
		return "make the VFIO binding persistent: nothing binds " + strings.Join(unpersisted, ", ") + " to VFIO at boot (bound live), so a reboot would put them back on their host drivers"
	case len(s.Files) > 0:
		return "make the VFIO binding persistent"
	case regen != "":
		return "regenerate the initramfs: gpuprep's persistent VFIO configuration may not be in it (an earlier run stopped before regenerating it)"
	}
	return ""
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

func (p *Plan) bind(ctx context.Context, e effect.Effector) error {
	vp := p.vfioPlan
	if vp == nil {
		return nil
	}
	now := utcNow(e)
	for _, t := range vp.Targets {
		if t.Bound {
			continue
		}
		if err := e.Record(journal.DriverRecord{Device: t.Dev.Address, Before: t.Driver, After: t.VFIO}.Intent("apply", now)); err != nil {
			return err
		}
	}
	if vp.Persist != nil {
		for _, f := range vp.Persist.Files {
			// only the files vfio.Bind changes: one already as wanted (a
			// re-run that only regenerates the initramfs) is not touched
			if old, err := e.Root.ReadFile(f.Path); f.Removed && err != nil || err == nil && string(old) == string(f.New) {
				continue
			}
			wrote := journal.Absent
			if !f.Removed {
				wrote = journal.Hash(f.New)
			}
			if err := fileIntentBy(e, f.Path, now, "apply", wrote); err != nil {
				return err
			}
		}
	}
	res, err := vfio.Bind(ctx, e.At(now), p.inv, vp,
		vfio.Options{Persist: true, Force: p.opts.Force, NVSwitch: p.opts.NVSwitch, BootIntents: BootArgIntents})
	logVFIO(e, res)
	return err
}

func logVFIO(e effect.Effector, r *vfio.Result) {
	if r == nil {
		return
	}
	for _, c := range r.Commands {
		e.Logf("ran: %s", host.ShellQuote(c))
	}
	for _, c := range r.Changed {
		e.Logf("%s: %s -> %s", c.Device, orNone(c.Before), orNone(c.After))
	}
	for _, f := range r.Files {
		switch {
		case f.Removed:
			e.Logf("removed %s%s", f.Path, backupNote(f.Backup))
		default:
			e.Logf("wrote %s%s", f.Path, backupNote(f.Backup))
		}
	}
	for _, n := range r.Notes {
		e.Logf("note: %s", n)
	}
}

// persistFiles are the files of gpuprep's persistent VFIO configuration
// that root has.
func persistFiles(root *host.Root) []string {
	var files []string
	for _, f := range []string{vfio.ModprobeConf, vfio.ModulesLoad, vfio.UdevRule} {
		if root.Exists(f) {
			files = append(files, f)
		}
	}
	return files
}
