package provision

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
)

// rebootNeeded: the configured IOMMU arguments differ from the running ones.
func rebootNeeded(e effect.Effector, boot *grub.Boot) bool {
	if boot == nil {
		return true
	}
	want, err := wanted(e.Root)
	if err != nil {
		return true
	}
	kver, _ := kernelrelease.Running(e.Root)
	conf, _, err := boot.ConfiguredArgs(strings.TrimSpace(kver))
	if err != nil {
		return true
	}
	running := runningArgs(e.Root)
	for _, w := range want {
		if kargs.Satisfied(conf, w) != kargs.Satisfied(running, w) {
			return true
		}
	}
	// an argument that turns the IOMMU or interrupt remapping off, put back
	// (or taken out) by the rollback, changes the next boot too
	for _, k := range []string{"intel_iommu", "amd_iommu", "iommu", "intremap", "nointremap"} {
		c, cok := kargs.Last(conf, k)
		r, rok := kargs.Last(running, k)
		if cok != rok || cok && c.String() != r.String() {
			return true
		}
	}
	return false
}

// bootArgsUndo is what the journal's bootargs-intent entries in range say
// apply's bootloader commands changed, per bootloader kind, in order.
type bootArgsUndo struct {
	kinds []string
	by    map[string]*kindArgs
}

type kindArgs struct {
	remove, readd []string          // undone over every entry (the tool's own way)
	keepAdded     map[string]string // argument → entries it was already in: not removed
	keepRemoved   map[string]string // argument → entries that never had it: not put back
	order         []string          // kept arguments, in order
}

func (b *bootArgsUndo) add(en journal.Entry) {
	if b.by == nil {
		b.by = map[string]*kindArgs{}
	}
	a := en.BootArgs()
	k := b.by[a.Loader]
	if k == nil {
		k = &kindArgs{keepAdded: map[string]string{}, keepRemoved: map[string]string{}}
		b.by[a.Loader] = k
		b.kinds = append(b.kinds, a.Loader)
	}
	switch {
	case a.Add != "" && a.Kept != "":
		if _, ok := k.keepAdded[a.Add]; !ok {
			k.order = append(k.order, "+"+a.Add)
		}
		k.keepAdded[a.Add] = a.Kept
	case a.Add != "":
		k.remove = appendNew(k.remove, a.Add)
	case a.Remove != "" && a.Kept != "":
		if _, ok := k.keepRemoved[a.Remove]; !ok {
			k.order = append(k.order, "-"+a.Remove)
		}
		k.keepRemoved[a.Remove] = a.Kept
	case a.Remove != "":
		k.readd = appendNew(k.readd, a.Remove)
	}
}

func (b *bootArgsUndo) any() bool { return len(b.kinds) > 0 }

func (b *bootArgsUndo) has(kind string) bool { return b.by[kind] != nil }

// undo runs, through each bootloader's own tool, the inverse of what apply's
// commands changed: the arguments they added removed, those they removed put
// back (in that order, as separate commands, so no tool's ordering of one
// command's options matters). systemd-boot's entries are made from
// /etc/kernel/cmdline, which the file rollback restored: kernel-install add
// makes them again for every installed kernel. It reports whether the next
// boot's arguments now differ from the running kernel's (a reboot is needed).
func (b *bootArgsUndo) undo(ctx context.Context, e effect.Effector, res *RollbackResult) bool {
	running := runningArgs(e.Root)
	reboot := false
	for _, kind := range b.kinds {
		k := b.by[kind]
		mk := undoCommands[kind]
		if mk == nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: the journal records kernel arguments changed through its own tool, which gpuprep cannot undo: check them with gpuprep grub show", kind))
			continue
		}
		cmds, ok := mk(e, k, res)
		if !ok {
			continue
		}
		if runBootUndo(ctx, e, cmds, res) {
			// a reboot is needed when the next boot (as the commands, and
			// the arguments left alone, make it) differs from the running
			// kernel in an argument apply touched; the configuration as
			// read now says so too, once the tool has run
			reboot = k.changedReboot(e, kind, running) || reboot
		}
		reboot = k.keptReboot(running) || reboot
		res.Notes = append(res.Notes, k.keptNotes(kind)...)
	}
	return reboot
}

// bootCmd is one command of a bootloader's tool rollback runs, and why.
type bootCmd struct {
	argv []string
	why  string
}

// undoCommands are, for each bootloader kind whose own tool changes the
// kernel arguments, the commands that undo what apply's did; ok false: the
// kind's undo failed or cannot run (said in res).
var undoCommands = map[string]func(e effect.Effector, k *kindArgs, res *RollbackResult) (cmds []bootCmd, ok bool){
	grub.KindBLS: func(_ effect.Effector, k *kindArgs, _ *RollbackResult) ([]bootCmd, bool) {
		return k.removeReadd(func(a []string) []string {
			return []string{"grubby", "--update-kernel=ALL", "--remove-args=" + strings.Join(a, " ")}
		}, func(a []string) []string {
			return []string{"grubby", "--update-kernel=ALL", "--args=" + strings.Join(a, " ")}
		}), true
	},
	grub.KindKernelstub: func(_ effect.Effector, k *kindArgs, _ *RollbackResult) ([]bootCmd, bool) {
		return k.removeReadd(func(a []string) []string { return []string{"kernelstub", "--delete-options", strings.Join(a, " ")} },
			func(a []string) []string { return []string{"kernelstub", "--add-options", strings.Join(a, " ")} }), true
	},
	// -if-present / -if-missing: a second run (after a failure further
	// on) finds them done and changes nothing
	grub.KindRpmOstree: func(_ effect.Effector, k *kindArgs, _ *RollbackResult) ([]bootCmd, bool) {
		return k.removeReadd(func(a []string) []string { return prefixed([]string{"rpm-ostree", "kargs"}, "--delete-if-present=", a) },
			func(a []string) []string { return prefixed([]string{"rpm-ostree", "kargs"}, "--append-if-missing=", a) }), true
	},
	grub.KindSystemdBoot: systemdBootUndo,
}

func prefixed(argv []string, prefix string, args []string) []string {
	for _, a := range args {
		argv = append(argv, prefix+a)
	}
	return argv
}

// removeReadd are the commands that remove the arguments apply added and
// put back those it removed, in that order, as separate commands (so no
// tool's ordering of one command's options matters).
func (k *kindArgs) removeReadd(remove, readd func([]string) []string) []bootCmd {
	var cmds []bootCmd
	if len(k.remove) > 0 {
		cmds = append(cmds, bootCmd{remove(k.remove), "removes " + strings.Join(k.remove, " ") + " (apply added them)"})
	}
	if len(k.readd) > 0 {
		cmds = append(cmds, bootCmd{readd(k.readd), "puts back " + strings.Join(k.readd, " ") + " (apply removed them)"})
	}
	return cmds
}

// systemdBootUndo: systemd-boot's entries are made from
// /etc/kernel/cmdline, which the file rollback restored: kernel-install
// add makes them again for every installed kernel.
func systemdBootUndo(e effect.Effector, _ *kindArgs, res *RollbackResult) ([]bootCmd, bool) {
	boot, err := grub.Detect(e.Root)
	switch {
	case err != nil:
		res.Failed = append(res.Failed, "systemd-boot: cannot regenerate the boot entries from the restored "+kernelCmdline+": "+err.Error())
		return nil, false
	case boot.Kind != grub.KindSystemdBoot:
		res.Failed = append(res.Failed, fmt.Sprintf("systemd-boot: apply changed the arguments through kernel-install, but this root now looks like %s: regenerate the entries from %s yourself (kernel-install add KVER /lib/modules/KVER/vmlinuz for each kernel)", boot.Kind, kernelCmdline))
		return nil, false
	case len(boot.Kernels) == 0:
		res.Notes = append(res.Notes, "systemd-boot: no kernel image under /lib/modules/*/vmlinuz: run kernel-install add for each installed kernel yourself, so that its entry takes the restored "+kernelCmdline)
	}
	var cmds []bootCmd
	for _, kv := range boot.Kernels {
		// as grub.Boot.PlanEdit runs it: the entry is made again from the restored file
		cmds = append(cmds, bootCmd{[]string{"kernel-install", "add", kv, "/lib/modules/" + kv + "/vmlinuz"}, "makes the entry of " + kv + " again from the restored " + kernelCmdline})
	}
	return cmds, true
}

// runBootUndo runs cmds in order until one fails; ok: all ran.
func runBootUndo(ctx context.Context, e effect.Effector, cmds []bootCmd, res *RollbackResult) bool {
	for _, c := range cmds {
		e.Logf("run: %s", host.ShellQuote(c.argv))
		if out, err := e.Runner.Run(ctx, c.argv...); err != nil {
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %v%s", host.ShellQuote(c.argv), err, host.OutputTail(out)))
			return false
		}
		res.Undone = append(res.Undone, Undo{Kind: "command", Target: host.ShellQuote(c.argv), Action: "ran: " + c.why})
	}
	return true
}

// changedReboot: the arguments rollback changed back differ from the
// running kernel's, or the configuration of kind, read now, does.
func (k *kindArgs) changedReboot(e effect.Effector, kind string, running []kargs.Param) bool {
	reboot := false
	for _, a := range k.remove {
		reboot = reboot || kargs.Satisfied(running, kargs.ParseOne(a))
	}
	for _, d := range k.readd {
		reboot = reboot || !kargs.Satisfied(running, kargs.ParseOne(d))
	}
	if boot, err := grub.Detect(e.Root); err == nil && boot.Kind == kind {
		reboot = reboot || rebootNeeded(e, boot)
	}
	return reboot
}

// keptReboot: an argument rollback left as apply made it differs from the
// running kernel's.
func (k *kindArgs) keptReboot(running []kargs.Param) bool {
	reboot := false
	for a := range k.keepAdded {
		reboot = reboot || !kargs.Satisfied(running, kargs.ParseOne(a))
	}
	for d := range k.keepRemoved {
		reboot = reboot || kargs.Satisfied(running, kargs.ParseOne(d))
	}
	return reboot
}

// keptNotes say, for each argument left as apply made it, why and how to
// undo it by hand.
func (k *kindArgs) keptNotes(kind string) []string {
	var notes []string
	for _, o := range k.order {
		arg := o[1:]
		if o[0] == '+' {
			notes = append(notes, fmt.Sprintf("%s: %s not removed: %s already had %s before apply, and removing it the way apply added it (%s) would take it from there too: remove it yourself where it should not be (%s)",
				kind, arg, k.keepAdded[arg], kargs.ParseOne(arg).Key, toolName(kind), removeHint(kind, arg)))
		} else {
			notes = append(notes, fmt.Sprintf("%s: %s not put back: %s did not have it before apply, and putting it back the way apply removed it (%s) would add it there: put it back yourself where it was (%s)",
				kind, arg, k.keepRemoved[arg], toolName(kind), addHint(kind, arg)))
		}
	}
	return notes
}

const kernelCmdline = "/etc/kernel/cmdline"

func toolName(kind string) string {
	if kind == grub.KindRpmOstree {
		return "rpm-ostree kargs"
	}
	return "grubby --update-kernel=ALL"
}

func removeHint(kind, arg string) string {
	if kind == grub.KindRpmOstree {
		return "rpm-ostree kargs --delete-if-present=" + arg
	}
	return "grubby --update-kernel=/boot/vmlinuz-VERSION --remove-args=" + host.ShellQuote([]string{arg})
}

func addHint(kind, arg string) string {
	if kind == grub.KindRpmOstree {
		return "rpm-ostree kargs --append-if-missing=" + arg
	}
	return "grubby --update-kernel=/boot/vmlinuz-VERSION --args=" + host.ShellQuote([]string{arg})
}
