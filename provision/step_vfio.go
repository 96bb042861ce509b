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
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
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

// vfioUnbindStep (StepVFIOUnbind, container and vm-vgpu): devices on VFIO
// back to their drivers (vfio.Unbind; planned by planUnbind and
// planUnbindAtBoot), journalled as vfioBindStep's.
type vfioUnbindStep struct{}

func (vfioUnbindStep) id() string { return StepVFIOUnbind }

func (vfioUnbindStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.unbind(ctx, e)
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
	files := persistFiles(p.root)
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
	onVFIO := vfioAddrs(ts)
	p.noteForeignBinders(onVFIO)
	if len(onVFIO) > 0 && len(pci.NVSwitches(p.inv)) > 0 {
		return p.planUnbindAtBoot(ts, onVFIO, entries)
	}
	var names []string
	s := &Step{ID: StepVFIOUnbind}
	for _, t := range ts {
		names = append(names, s.addUnbind(t))
	}
	s.Title = "return to their drivers from VFIO: " + strings.Join(names, ", ")
	files := persistFiles(p.root)
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
			p.Unaddressed = append(p.Unaddressed, fmt.Sprintf("vfio.binding %s: %s %s it to VFIO again at the next boot (gpuprep removes only its own VFIO configuration): remove that for it, regenerate the initramfs, and run gpuprep apply again",
				a, strings.Join(bs, " and "), plural.Verb(len(bs), "binds", "bind")))
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
		case e.Kind == KindStep && e.Step().ID == step:
			in = e.Step().State == journal.StepStarted
			if !in {
				found = false
			}
		case in && e.Kind == KindFileIntent && isVFIOFile(e.File().Path):
			found = true
		}
	}
	return found
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

func (p *Plan) unbind(ctx context.Context, e effect.Effector) error {
	now := utcNow(e)
	if p.unbindAtBoot != nil {
		// nothing moves now: the files go, the reboot step does the rest
		for _, f := range []string{vfio.ModprobeConf, vfio.ModulesLoad, vfio.UdevRule} {
			if e.Root.Exists(f) {
				if err := fileIntent(e, f, now); err != nil {
					return err
				}
			}
		}
		res, err := vfio.Unpersist(ctx, e.At(now), p.inv, p.unbindAtBoot,
			vfio.Options{Regenerate: p.unbindRegen})
		logVFIO(e, res)
		return err
	}
	for _, t := range p.targets(e.Root) {
		if err := e.Record(journal.DriverRecord{Device: t.addr, Before: t.driver, After: t.restore}.Intent("apply", now)); err != nil {
			return err
		}
	}
	for _, f := range []string{vfio.ModprobeConf, vfio.ModulesLoad, vfio.UdevRule} {
		if e.Root.Exists(f) {
			if err := fileIntent(e, f, now); err != nil {
				return err
			}
		}
	}
	res, err := vfio.Unbind(ctx, e.At(now), p.inv, p.opts.Selector,
		vfio.Options{Force: p.opts.Force, NVSwitch: true, Regenerate: p.unbindRegen, NoRestore: p.noRestore()})
	logVFIO(e, res)
	if errors.Is(err, vfio.ErrNothing) {
		return nil
	}
	return err
}

// vfioAddrs are the addresses of the targets on a VFIO driver now.
func vfioAddrs(ts []unbindTarget) []string {
	var addrs []string
	for _, t := range ts {
		if pci.DriverIsVFIO(t.driver) {
			addrs = append(addrs, t.addr)
		}
	}
	return addrs
}

// addUnbind adds to s the sysfs writes that move t off VFIO to the driver
// it had before (none: left unbound, noted), and names the move.
func (s *Step) addUnbind(t unbindTarget) string {
	dev := "/sys/bus/pci/devices/" + t.addr
	to := "unbound"
	if t.known && t.restore != "" {
		to = t.restore
	}
	if pci.DriverIsVFIO(t.driver) {
		s.Sysfs = append(s.Sysfs, change.SysfsWrite(dev+"/driver/unbind", t.addr))
	}
	if t.override != "" {
		s.Sysfs = append(s.Sysfs, change.SysfsWrite(dev+"/driver_override", "\n"))
	}
	switch {
	case !t.known:
		s.Notes = append(s.Notes, t.addr+": the journal has no record of its driver before VFIO: left unbound (a driver loaded later takes it, as the GPU Operator's driver container does; one loaded already does not: echo "+t.addr+" > /sys/bus/pci/drivers_probe)")
	case t.restore != "":
		s.Sysfs = append(s.Sysfs, change.SysfsWrite("/sys/bus/pci/drivers/"+t.restore+"/bind", t.addr))
	}
	return fmt.Sprintf("%s (%s → %s)", t.addr, orNone(t.driver), to)
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
