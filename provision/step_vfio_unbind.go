package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/vfio"
)

// vfioUnbindStep (StepVFIOUnbind, container and vm-vgpu): devices on VFIO
// back to their drivers (vfio.Unbind; planned by planUnbind and
// planUnbindAtBoot), journalled as vfioBindStep's.
type vfioUnbindStep struct{}

func (vfioUnbindStep) id() string { return StepVFIOUnbind }

func (vfioUnbindStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.unbind(ctx, e)
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
