package vfio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// A built-in vfio-pci and the persistent binding.
//
// Where vfio-pci is built into the kernel (modules.builtin; stock Ubuntu
// kernels from 5.4 up to 6.2), modprobe never loads it ("module is
// builtin": kmod returns at once, module_is_inkernel), so `options vfio-pci
// ids=` in modprobe.d never reaches it, and no softdep or modules-load.d
// entry changes that. A built-in module takes its parameters from the
// kernel command line only (vfio-pci.ids=): vfio_pci_init adds those IDs
// when its initcall runs. So vfio bind --persist puts the IDs there,
// through the bootloader editor (package grub, as grub ensure does):
// planned, shown in --dry-run, journalled as "grub ensure" (gpuprep rollback
// restores the files and regenerates the boot menu), and undone by vfio
// unbind, which takes out only the IDs gpuprep put there (recorded in
// ModprobeConf) and keeps the admin's own.

// cmdlineHeader records, in ModprobeConf, the IDs gpuprep put into
// vfio-pci.ids= on the kernel command line.
const cmdlineHeader = "# gpuprep-cmdline-ids:"

// CmdlineCommand is the journal command of the kernel-command-line edit of
// a persistent binding (rollback undoes it as it undoes grub ensure's).
const CmdlineCommand = "grub ensure"

// CmdlineIDs is the kernel-command-line part of a persistent binding where
// vfio-pci is built in.
type CmdlineIDs struct {
	Want string   // the vfio-pci.ids= value the next boot gets; "" to remove the argument
	Ours []string // gpuprep's IDs in it, recorded in ModprobeConf
	Why  string
	Boot *grub.Boot
	Plan *grub.Plan // nil when the configuration is as wanted already
}

// Arg is the argument the edit ensures ("" when it removes it).
func (c *CmdlineIDs) Arg() string {
	if c.Want == "" {
		return ""
	}
	return "vfio-pci.ids=" + c.Want
}

// CmdlineWhy is why a built-in vfio-pci gets its IDs on the kernel command
// line.
func CmdlineWhy(kver string) string {
	return "vfio-pci is built into kernel " + kver + " (modules.builtin): modprobe never loads it, so `options vfio-pci ids=` in modprobe.d never reaches it; a built-in module takes its parameters from the kernel command line only, so the IDs go there (vfio-pci.ids=), and take effect at the next boot"
}

// cmdlineOurs reads the IDs gpuprep recorded putting on the command line.
func cmdlineOurs(root *host.Root) []string {
	b, err := root.ReadFile(ModprobeConf)
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, cmdlineHeader); ok {
			return splitIDs(v)
		}
	}
	return nil
}

func splitIDs(v string) []string {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.ToLower(strings.TrimSpace(x)); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// vfioBuiltin reports whether the next boot's kernel (nextKernel, as the
// persistence verdicts read it; the running one where that is unknown)
// has vfio-pci built in: the persistent binding is for that boot.
func vfioBuiltin(root *host.Root) (bool, string) {
	k, _ := nextKernel(root)
	return BuiltinModules(root, k)["vfio_pci"], k
}

// planCmdlineIDs plans vfio-pci.ids= for ids (gpuprep's, after this bind or
// unbind) where vfio-pci is built in, or where gpuprep put IDs there before:
// the admin's own IDs in the argument stay. It returns nil when there is
// nothing to do, and warnings for what it cannot do.
func planCmdlineIDs(root *host.Root, ids []string) (*CmdlineIDs, []string) {
	builtin, kver := vfioBuiltin(root)
	prev := cmdlineOurs(root)
	if !builtin && len(prev) == 0 {
		return nil, nil
	}
	if !builtin {
		ids = nil // a kernel with vfio-pci a module now: gpuprep's IDs come out
	}
	cur := ""
	if p, ok := kargs.Last(NextBootCmdline(root), "vfio_pci.ids"); ok {
		cur = p.Value
	}
	want := slices.Clone(ids)
	for _, x := range splitIDs(cur) {
		if !slices.Contains(prev, x) && !slices.Contains(want, x) {
			want = append(want, x) // the admin's
		}
	}
	sort.Strings(want)
	c := &CmdlineIDs{Want: strings.Join(want, ","), Ours: ids, Why: CmdlineWhy(kver)}
	if !builtin {
		c.Why = "vfio-pci is a module of kernel " + kver + " now: the IDs gpuprep put on the kernel command line come out (modprobe.d's options apply)"
	}
	if c.Want == strings.Join(sorted(splitIDs(cur)), ",") {
		return c, nil // as wanted already
	}
	boot, err := grub.Detect(root)
	if err != nil {
		return nil, []string{cmdlineByHand(c, err)}
	}
	// every vfio-pci.ids= goes, then the wanted one is appended: Ensure
	// alone leaves a list that holds the value as one of its options
	req := grub.Request{Remove: []string{"vfio-pci.ids"}}
	if c.Want != "" {
		req.Ensure = []kargs.Param{{Key: "vfio-pci.ids", Value: c.Want, HasValue: true}}
	}
	gp, err := boot.PlanEdit(req, true)
	if err != nil {
		return nil, []string{cmdlineByHand(c, err)}
	}
	c.Boot = boot
	if gp.Changed() {
		c.Plan = gp
	}
	return c, nil
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// cmdlineByHand is the warning where gpuprep cannot edit the command line.
func cmdlineByHand(c *CmdlineIDs, err error) string {
	what := "put " + c.Arg() + " on the kernel command line yourself"
	if c.Want == "" {
		what = "take gpuprep's IDs (" + strings.Join(c.Ours, ",") + ") out of vfio-pci.ids= on the kernel command line yourself"
	}
	if errors.Is(err, grub.ErrNoRegenerate) {
		err = fmt.Errorf("%w (no update-grub or grub-mkconfig under the root)", err)
	}
	return "NOT PERSISTENT ACROSS A REBOOT until then: " + c.Why + "; gpuprep cannot edit this node's bootloader configuration (" + err.Error() + "): " + what + " and reboot"
}

// applyCmdline applies c's bootloader edit (journalled as CmdlineCommand).
func applyCmdline(ctx context.Context, e effect.Effector, opts Options, c *CmdlineIDs, now time.Time, res *Result) error {
	if c == nil || c.Plan == nil {
		return nil
	}
	if opts.BootIntents != nil {
		c.Plan.Intents = func(argv []string) []journal.Entry { return opts.BootIntents(c.Boot, c.Plan, argv, CmdlineCommand) }
	}
	if err := c.Plan.Apply(ctx, e.Root, e.Runner, CmdlineCommand, now); err != nil {
		return fmt.Errorf("kernel command line (%s): %w", c.Boot.Kind, err)
	}
	res.Commands = append(res.Commands, c.Plan.Commands...)
	if c.Want == "" {
		res.Notes = append(res.Notes, "took vfio-pci.ids= off the next boot's kernel command line ("+c.Boot.Kind+"); reboot for it to take effect")
	} else {
		res.Notes = append(res.Notes, "put "+c.Arg()+" on the next boot's kernel command line ("+c.Boot.Kind+"): "+c.Why)
	}
	return nil
}
