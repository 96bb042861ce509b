package provision

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"slices"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/preflight"
)

// kernelArgsStep (StepKernelArgs, vm-passthrough and vm-vgpu): the IOMMU
// kernel arguments in the bootloader's configuration (planned by
// planKernelArgs through grub.Plan): its files written (journalled file
// intents), then its commands, each bootloader tool's announced first by
// one bootargs-intent per argument it changes. Rollback restores the files,
// regenerates the menu, and runs each tool's inverse (bootArgsUndo).
type kernelArgsStep struct{}

func (kernelArgsStep) id() string { return StepKernelArgs }

func (kernelArgsStep) run(ctx context.Context, e effect.Effector, p *Plan, s *Step) error {
	if err := writeFiles(e, s.Files); err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, argv := range s.argv {
		// what the bootloader's own tool is about to change, so that
		// rollback can run its inverse
		for _, en := range p.bootArgIntents(argv) {
			a := en.BootArgs()
			k := a.Remove + "\x00" + a.Add
			if recorded[k] {
				continue
			}
			recorded[k] = true
			if err := e.Record(en); err != nil {
				return err
			}
		}
		if err := runLogged(ctx, e, argv); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes each planned file, journalled (writeFile).
func writeFiles(e effect.Effector, fs []change.File) error {
	for _, f := range fs {
		if err := writeFile(e, f.Path, f.New); err != nil {
			return err
		}
	}
	return nil
}

// runLogged runs argv, logged; its failure carries the tail of its output.
func runLogged(ctx context.Context, e effect.Effector, argv []string) error {
	e.Logf("run: %s", host.ShellQuote(argv))
	if out, err := e.Runner.Run(ctx, argv...); err != nil {
		return fmt.Errorf("%s: %w%s", host.ShellQuote(argv), err, host.OutputTail(out))
	}
	return nil
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
	p.noteNotNeeded(k)
	runningPs := runningArgs(p.root)
	lacks, runOff := kernelLacks(runningPs, want, k.NotOff)
	running := len(lacks) == 0 && len(runOff) == 0 // the running kernel is as the mode needs
	boot, err := grub.Detect(p.root)
	if err != nil {
		return false, p.noBootloader(err, want, lacks, runOff, running)
	}
	p.boot = boot
	gp, err := p.planGrubEdit(boot, k.Request(), want)
	if err != nil {
		return false, err
	}
	p.grubPlan = gp
	if !running {
		if d := p.diagnoseReboot(boot, gp, want, k.NotOff); d != nil {
			// rebooted since apply asked, and still not in effect: no other
			// reboot (nor the kernel-args step) until that is explained
			p.planNotEffective(d)
			return true, nil
		}
	}
	later := "" // BLS: the entries have the arguments; what the step keeps for later
	if boot.Kind == grub.KindBLS && len(gp.Commands) == 0 && gp.Changed() {
		later = p.blsLater(boot, gp, want) // it may leave gp with nothing to change
	}
	if gp.Changed() {
		p.Steps = append(p.Steps, planKernelArgsStep(boot, gp, want, later))
		p.kargs = kargsPlanned{req: k.Request(), want: want, later: later}
	}
	if running {
		return false, nil
	}
	p.planRebootForArgs(gp, lacks, runOff)
	return true, nil
}

// noteNotNeeded notes each argument the mode asks for that this node does
// not need (intel_iommu=on where the IOMMU is active without it).
func (p *Plan) noteNotNeeded(k preflight.KernelArgs) {
	for _, w := range k.Wanted {
		if why, ok := k.NotNeeded[w.String()]; ok {
			p.Notes = append(p.Notes, fmt.Sprintf("%s is not needed: %s", w, why))
		}
	}
}

// planNotEffective plans the reboot step that fails apply: the node
// rebooted since apply asked for it, and the arguments are still not in
// effect (d says why).
func (p *Plan) planNotEffective(d *RebootError) {
	p.rebootErr = d
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Error: d.Summary, Notes: d.Details,
		Title: fmt.Sprintf("NOT EFFECTIVE AFTER THE REBOOT: the node rebooted since gpuprep apply asked for it and the running kernel still %s; apply fails here (exit 1) and neither asks for nor runs another reboot", kernelWrong(d.Missing, d.Off))})
}

// planRebootForArgs plans the reboot that brings the configured arguments
// into effect: the running kernel lacks some (lacks) or still has some
// that turn the IOMMU off (runOff).
func (p *Plan) planRebootForArgs(gp *grub.Plan, lacks, runOff []kargs.Param) {
	if !gp.Changed() && gp.MenuStale != "" {
		// Configured already, but the boot menu was not regenerated since,
		// and no tool to regenerate it was found (boot.PlanEdit runs it
		// where there is one): the reboot alone would not bring the
		// arguments.
		p.Notes = append(p.Notes, gp.Notes...)
	}
	p.Steps = append(p.Steps, &Step{ID: StepReboot, Reboot: true, rebootFor: RebootForKernelArgs,
		Title: fmt.Sprintf("REBOOT REQUIRED HERE: the running kernel %s; gpuprep apply stops here (exit 4, or reboots with --reboot) and continues when run again after the boot", kernelWrong(lacks, runOff))})
}

// noBootloader is planKernelArgs's answer where no bootloader
// configuration is found (err): nothing to do when the running kernel is
// as the mode needs (a note), else an error saying where to make the
// change.
func (p *Plan) noBootloader(err error, want, lacks, runOff []kargs.Param, running bool) error {
	if errors.Is(err, grub.ErrUnsupported) && running {
		p.Notes = append(p.Notes, fmt.Sprintf("no bootloader configuration found, but the running kernel already has %s: nothing to configure; make sure whatever builds this node's kernel command line keeps them", argList(want)))
		return nil
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
	return &PlanError{Step: StepKernelArgs, Err: err}
}

// planGrubEdit is boot's edit that ensures want, as req asks.
func (p *Plan) planGrubEdit(boot *grub.Boot, req grub.Request, want []kargs.Param) (*grub.Plan, error) {
	usual := false // the boot-menu command is the node's usual one, not found under the root
	if boot.Regenerate == nil && (boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2) && !p.root.IsLive() {
		// a snapshot, a fixture, a mounted disk without the tool: plan what
		// the node itself would run (apply runs only on the node)
		boot.Regenerate, usual = grub.UsualRegenerate(p.root), true
	}
	req.Ensure = want
	gp, err := boot.PlanEdit(req, true)
	if errors.Is(err, grub.ErrNoRegenerate) {
		err = fmt.Errorf("%w: this node has none, so gpuprep cannot make the change take effect; install its GRUB tools (the package with update-grub or grub-mkconfig), or make the change with gpuprep grub ensure --mode %s --no-regenerate, regenerate the boot menu yourself, and run gpuprep apply again", err, p.opts.Mode)
	}
	if err != nil {
		return nil, &PlanError{Step: StepKernelArgs, Err: err}
	}
	if usual && len(gp.Commands) > 0 {
		gp.Notes = append(gp.Notes, fmt.Sprintf("no boot-menu tool under this root (a snapshot or a copy of the node): %s is what this node's distribution regenerates its boot menu with; gpuprep apply, which runs on the node itself, runs the tool it finds there", host.ShellQuote(boot.Regenerate)))
	}
	return gp, nil
}

// planKernelArgsStep is the step of gp, a change of boot's configuration
// (later: its title, where blsLater gave one).
func planKernelArgsStep(boot *grub.Boot, gp *grub.Plan, want []kargs.Param, later string) *Step {
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
	return s
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
	s.Files = append(s.Files, gp.Changes...)
	for _, c := range gp.Commands {
		s.argv = append(s.argv, c)
		s.Commands = append(s.Commands, host.ShellQuote(c))
	}
	s.Notes = append(s.Notes, gp.Notes...)
}

// bootArgIntents are the intent entries for one command of the kernel-args
// step: an entry per argument that a bootloader's own tool (grubby,
// kernel-install, kernelstub, rpm-ostree) adds or removes with it, as
// grub.Boot.PlanEdit planned it (adding only what was not there). Commands
// that only regenerate a boot menu from files (update-grub, grub-mkconfig)
// have none: rollback restores the files and regenerates.
func (p *Plan) bootArgIntents(argv []string) []journal.Entry {
	return BootArgIntents(p.boot, p.grubPlan, argv, "apply")
}

// BootArgIntents are the bootargs-intent entries (see the journal kinds
// above) of one command of gp, a plan of boot (nil: none), for the journal
// under command: what rollback needs to undo the arguments that command
// changes through a bootloader's own tool.
func BootArgIntents(boot *grub.Boot, gp *grub.Plan, argv []string, command string) []journal.Entry {
	if boot == nil || len(argv) == 0 {
		return nil
	}
	parse, ok := toolArgs[boot.Kind]
	if !ok || parse.tool != argv[0] || parse.needPlan && gp == nil {
		return nil
	}
	add, del := parse.args(argv, gp)
	multi := boot.Kind == grub.KindBLS || boot.Kind == grub.KindRpmOstree
	// the step's removals run before its additions (grubby: as an earlier
	// command): an entry's word they remove is gone when an addition runs
	gone := del
	if gp != nil {
		gone = append(slices.Clone(gp.Removed), del...)
	}
	var out []journal.Entry
	for _, d := range del {
		r := journal.BootArgsRecord{Loader: boot.Kind, Remove: d}
		if multi {
			r.Kept = strings.Join(entriesWithout(boot, d), " ")
		}
		out = append(out, r.Entry(command, time.Time{}))
	}
	for _, a := range add {
		r := journal.BootArgsRecord{Loader: boot.Kind, Add: a}
		if multi {
			r.Kept = strings.Join(entriesWithKey(boot, a, gone), " ")
		}
		out = append(out, r.Entry(command, time.Time{}))
	}
	return out
}

// toolParse reads, from one command of a bootloader's own tool, the
// arguments it adds and removes.
type toolParse struct {
	tool     string // argv[0]
	needPlan bool   // the arguments are the grub.Plan's, not the command's
	args     func(argv []string, gp *grub.Plan) (add, del []string)
}

// toolArgs are the bootloader kinds whose own tool changes the kernel
// arguments, each with how its commands say which.
var toolArgs = map[string]toolParse{
	grub.KindBLS:         {tool: "grubby", args: grubbyArgs},
	grub.KindKernelstub:  {tool: "kernelstub", args: kernelstubArgs},
	grub.KindRpmOstree:   {tool: "rpm-ostree", args: rpmOstreeArgs},
	grub.KindSystemdBoot: {tool: "kernel-install", needPlan: true, args: kernelInstallArgs},
}

func grubbyArgs(argv []string, _ *grub.Plan) (add, del []string) {
	for _, a := range argv[1:] {
		if v, ok := strings.CutPrefix(a, "--args="); ok {
			add = append(add, grub.Words(v)...)
		} else if v, ok := strings.CutPrefix(a, "--remove-args="); ok {
			del = append(del, grub.Words(v)...)
		}
	}
	return add, del
}

func kernelstubArgs(argv []string, _ *grub.Plan) (add, del []string) {
	for i := 1; i+1 < len(argv); i++ {
		switch argv[i] {
		case "--add-options", "-a":
			add = append(add, strings.Fields(argv[i+1])...) // kernelstub splits them on blanks
		case "--delete-options", "-d":
			del = append(del, strings.Fields(argv[i+1])...)
		}
	}
	return add, del
}

func rpmOstreeArgs(argv []string, _ *grub.Plan) (add, del []string) {
	for _, a := range argv[1:] {
		for _, pre := range []string{"--append-if-missing=", "--append="} {
			if v, ok := strings.CutPrefix(a, pre); ok {
				add = append(add, v)
			}
		}
		for _, pre := range []string{"--delete-if-present=", "--delete="} {
			if v, ok := strings.CutPrefix(a, pre); ok {
				del = append(del, v)
			}
		}
	}
	return add, del
}

// kernelInstallArgs: the entries are made from /etc/kernel/cmdline, edited
// just before.
func kernelInstallArgs(_ []string, gp *grub.Plan) (add, del []string) {
	return gp.Added, gp.Removed
}

// entryWords are the arguments on a BLS entry's options lines, as written.
func entryWords(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "options" {
			out = append(out, grub.Words(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "options")))...)
		}
	}
	return out
}

// entriesWithout are the BLS entries that do not have word d: removing it
// leaves them as they were, and putting it back everywhere would add it.
func entriesWithout(b *grub.Boot, d string) []string {
	var out []string
	for _, e := range b.Entries {
		if !slices.Contains(entryWords(e.Data), d) {
			out = append(out, e.Path)
		}
	}
	return out
}

// entriesWithKey are the BLS entries that, once the words in del are gone,
// still have a's key (with a's value or another): adding a keeps or
// replaces it there, and removing a everywhere would take it from them.
func entriesWithKey(b *grub.Boot, a string, del []string) []string {
	key := kargs.Norm(kargs.ParseOne(a).Key)
	var out []string
	for _, e := range b.Entries {
		for _, w := range entryWords(e.Data) {
			if !slices.Contains(del, w) && kargs.Norm(kargs.ParseOne(w).Key) == key {
				out = append(out, e.Path)
				break
			}
		}
	}
	return out
}
