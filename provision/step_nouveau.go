package provision

import (
	"context"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// nouveauStep (StepNouveau, container): nouveau blacklisted and the
// initramfs regenerated (planned by planNouveau), then nouveau unloaded,
// each device it drove recorded first (a driver-intent from nouveau to
// none). Rollback restores the files and regenerates the initramfs; it
// never loads nouveau again, nor takes a device from a driver that took it
// since.
type nouveauStep struct{}

func (nouveauStep) id() string { return StepNouveau }

func (nouveauStep) run(ctx context.Context, e effect.Effector, _ *Plan, s *Step) error {
	if err := writeFiles(e, s.Files); err != nil {
		return err
	}
	if err := runAll(ctx, e, s.argv); err != nil {
		return err
	}
	if !e.Root.Exists("/sys/module/nouveau") {
		return nil
	}
	// every device nouveau drives loses it (selected or not): recorded
	// first, so that rollback knows
	now := utcNow(e)
	for _, a := range e.Root.Names("/sys/bus/pci/devices") {
		if e.Root.LinkBase("/sys/bus/pci/devices/"+a+"/driver") == "nouveau" {
			if err := e.Record(journal.DriverRecord{Device: a, Before: "nouveau"}.Intent("apply", now)); err != nil {
				return err
			}
		}
	}
	// in use (a console, a display server): not a failure, the reboot
	// step after this one takes it away
	e.Logf("run: %s", host.ShellQuote(unloadNouveau))
	if out, err := e.Runner.Run(ctx, unloadNouveau...); err != nil {
		e.Logf("note: nouveau could not be unloaded (%v%s): it goes with the reboot", err, host.OutputTail(out))
	}
	return nil
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
	on, atBoot := p.nouveauOn(selected)
	// the vfio-unbind step before this one removes gpuprep's VFIO
	// configuration, whose blacklist kept nouveau off at boot
	var gone []string
	if p.Step(StepVFIOUnbind) != nil && p.root.Exists(vfio.ModprobeConf) {
		gone = []string{vfio.ModprobeConf}
	}
	if len(on) == 0 {
		p.planNouveauAtBoot(atBoot, gone)
		return
	}
	others := p.nouveauOthers(on)
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

// nouveauOn are the GPUs nouveau drives now or takes back from the
// vfio-unbind step before this one (their driver before vfio bind);
// atBoot: that step leaves some for the reboot, and nouveau would take
// them then.
func (p *Plan) nouveauOn(selected []*pci.Device) (on []string, atBoot bool) {
	for _, d := range selected {
		if d.Driver == "nouveau" {
			on = append(on, d.Address)
		}
	}
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
	return on, atBoot
}

// planNouveauAtBoot keeps nouveau, which drives nothing now, off the GPUs
// that leave VFIO at the next boot (atBoot), with no unload and no reboot
// of its own: a built-in nouveau by nouveau.modeset=0, a module by the
// blacklist, which the vfio-unbind step's removal of gone would otherwise
// lift.
func (p *Plan) planNouveauAtBoot(atBoot bool, gone []string) {
	if atBoot && vfio.NouveauBuiltin(p.root) {
		p.planNouveauArg(nil, nil)
		return
	}
	w := vgpu.PlanNouveauBlacklist(p.root, gone...)
	if !atBoot || !w.Write {
		return
	}
	s := &Step{ID: StepNouveau, Title: "keep nouveau off the GPUs at the next boot (the vfio-unbind step removes " + vfio.ModprobeConf + ", whose blacklist did): blacklist it, regenerate the initramfs"}
	p.blacklistNouveau(s, w)
	p.insertBeforeVFIOReboot(s)
}

// insertBeforeVFIOReboot puts steps before the reboot that takes the GPUs
// off VFIO (at the end when there is none).
func (p *Plan) insertBeforeVFIOReboot(steps ...*Step) {
	i := slices.IndexFunc(p.Steps, func(x *Step) bool { return x.Reboot && x.rebootFor == RebootForVFIO })
	if i < 0 {
		i = len(p.Steps)
	}
	p.Steps = slices.Insert(p.Steps, i, steps...)
}

// nouveauOthers are the devices not in on that nouveau drives: unloading
// it takes it off them too (as the blacklist does at the next boot).
func (p *Plan) nouveauOthers(on []string) []string {
	var others []string
	for _, d := range p.inv.Devices {
		if d.Driver == "nouveau" && !slices.Contains(on, d.Address) {
			others = append(others, d.Address)
		}
	}
	return others
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
	kver, _ := kernelrelease.Running(p.root)
	kver = strings.TrimSpace(kver)
	why := "nouveau is built into kernel " + kver + " (modules.builtin): a blacklist, the initramfs and modprobe -r cannot remove it"
	fail := func(err error) {
		p.Unaddressed = append(p.Unaddressed, fmt.Sprintf("driver.nouveau: %s, and gpuprep cannot add %s to this node's kernel command line: %v; add it where the command line is made, reboot, and run gpuprep apply again", why, vfio.NouveauOff, err))
	}
	boot, gp, err := p.planNouveauOff()
	if err != nil {
		fail(err)
		return
	}
	p.boot, p.grubPlan = boot, gp
	var steps []*Step
	if gp.Changed() {
		steps = append(steps, nouveauArgStep(boot, gp, why, others))
	} else {
		p.Notes = append(p.Notes, gp.Notes...)
	}
	if len(on) == 0 {
		// before the reboot that takes the GPUs off VFIO, which brings it
		p.insertBeforeVFIOReboot(steps...)
		return
	}
	p.Steps = append(p.Steps, steps...)
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true, rebootFor: RebootForNouveau, offNouveau: on,
		Title: "REBOOT REQUIRED HERE: nouveau, built into the kernel, drives " + strings.Join(on, ", ") + " until a boot with " + vfio.NouveauOff.String() + "; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot"})
}

// planNouveauOff plans the bootloader edit that puts nouveau.modeset=0 on
// the next boot's command line; a GRUB root that is not the live node
// without a boot-menu tool gets its distribution's usual one, noted.
func (p *Plan) planNouveauOff() (*grub.Boot, *grub.Plan, error) {
	boot, err := grub.Detect(p.root)
	if err != nil {
		return nil, nil, err
	}
	usual := false
	if boot.Regenerate == nil && (boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2) && !p.root.IsLive() {
		boot.Regenerate, usual = grub.UsualRegenerate(p.root), true
	}
	gp, err := boot.PlanEdit(grub.Request{Ensure: []kargs.Param{vfio.NouveauOff}}, true)
	if err != nil {
		return nil, nil, err
	}
	if usual && len(gp.Commands) > 0 {
		gp.Notes = append(gp.Notes, fmt.Sprintf("no boot-menu tool under this root (a snapshot or a copy of the node): %s is what this node's distribution regenerates its boot menu with; gpuprep apply, which runs on the node itself, runs the tool it finds there", host.ShellQuote(boot.Regenerate)))
	}
	return boot, gp, nil
}

// nouveauArgStep is the kernel-args step that carries out gp, the edit
// that adds nouveau.modeset=0 (why: nouveau is built in); others are the
// devices not selected that lose nouveau too.
func nouveauArgStep(boot *grub.Boot, gp *grub.Plan, why string, others []string) *Step {
	s := &Step{ID: StepKernelArgs, Title: fmt.Sprintf("add %s to the next boot's kernel command line (%s), so that nouveau's init registers no driver: %s", vfio.NouveauOff, boot.Kind, why)}
	if len(gp.Added) == 0 && gp.MenuStale != "" {
		s.Title = fmt.Sprintf("regenerate the boot menu: %s, so the next boot would not get it (%s)", gp.MenuStale, why)
	}
	s.addGrub(gp)
	if len(others) > 0 {
		s.Notes = append(s.Notes, "nouveau then takes no device at all: "+strings.Join(others, ", ")+" (not selected) lose it too")
	}
	s.Notes = append(s.Notes, "rollback takes "+vfio.NouveauOff.String()+" out again (nouveau takes the GPUs at the boot after it)")
	return s
}

// blacklistNouveau adds to s the work w says is left: the blacklist file
// and the initramfs regenerated after it.
func (p *Plan) blacklistNouveau(s *Step, w vgpu.NouveauWork) {
	if w.Write {
		old, err := p.root.ReadFile(vgpu.NouveauBlacklist)
		s.Files = append(s.Files, change.Between(vgpu.NouveauBlacklist, old, err == nil, vgpu.NouveauBlacklistContent))
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
	kver, _ := kernelrelease.Running(root)
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
