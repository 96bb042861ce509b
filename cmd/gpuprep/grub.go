package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
)

func init() { register(newGrubCmd) }

// hostGrubRunner runs the regeneration commands: on this machine for /,
// inside the root (chroot) for a root named a system disk (--system-disk),
// and for no other root (see rootPrograms). It is deps.grubRunner.
func hostGrubRunner(root *host.Root) host.Runner {
	if err := rootPrograms(root); err != nil {
		return refusingRunner{err}
	}
	if root.IsLive() {
		return host.ExecRunner{}
	}
	return host.ChrootRunner{Dir: root.Dir()}
}

// rootPrograms says whether the programs of root may run: nil for / and
// for a system disk, else why not (a packed snapshot, or a root not named
// a system disk).
func rootPrograms(root *host.Root) error {
	if err := root.Writable("/"); err != nil {
		return err // a packed snapshot: run nothing from it
	}
	if root.IsLive() || root.IsSystemDisk() {
		return nil
	}
	return errNotSystemDisk(root)
}

// refusingRunner runs nothing and answers every command with err.
type refusingRunner struct{ err error }

func (r refusingRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", host.ShellQuote(argv), r.err)
}

type grubCmd struct {
	g            *globals
	mode         string
	output       string
	dryRun       bool
	noRegenerate bool
}

func newGrubCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "grub",
		Short: "Show and edit the kernel arguments the bootloader passes (GRUB, BLS, systemd-boot, kernelstub, rpm-ostree, proxmox-boot-tool)",
		Long: `grub shows and edits the kernel command line of the next boot, on the
bootloader it finds under the root: Debian/Ubuntu/Arch GRUB (/etc/default/grub
and grub.d, then update-grub or grub-mkconfig), openSUSE (grub2-mkconfig),
RHEL/Rocky/Alma/Fedora with BLS (grubby for installed kernels, plus
/etc/default/grub and /etc/kernel/cmdline for later ones), systemd-boot
(/etc/kernel/cmdline, kernel-install), Pop!_OS (kernelstub), rpm-ostree, and
Proxmox VE whose ESPs proxmox-boot-tool keeps (/etc/kernel/proxmox-boot-uuids):
the first line of /etc/kernel/cmdline where they boot systemd-boot, or
/etc/default/grub where they boot GRUB, then proxmox-boot-tool refresh.

Edits keep every other byte of a file, keep its quoting, refuse (naming the
file and line) what they cannot edit safely, write atomically with a backup
beside the file (recorded in /var/lib/gpuprep/journal.jsonl) and do nothing
when the arguments are already in effect (on BLS: in every boot entry, and in
/etc/kernel/cmdline and /etc/default/grub, which kernels installed later get
them from; grub show says not-for-later-kernels when only those lack them). With --root DIR
other than /, the regeneration commands run inside it (chroot) only when
--system-disk names it a system disk (never a snapshot); otherwise they are
refused before anything changes (--dry-run still shows the diff).

Exit codes: 0 done (or nothing to do), 2 usage error, 3 the configuration
could not be read or edited safely, 4 a reboot is needed for the change to
take effect.`,
		Args: cobra.NoArgs,
	}
	show := &grubCmd{g: g}
	showCmd := &cobra.Command{
		Use:   "show",
		Short: "Show each wanted argument: configured, running, and its state",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return show.show(c) },
	}
	showCmd.Flags().StringVar(&show.mode, "mode", "vm-passthrough", "workload type whose arguments are wanted: vm-passthrough or vm-vgpu")
	showCmd.Flags().StringVarP(&show.output, "output", "o", "text", "output format: text or json")

	ens := &grubCmd{g: g}
	ensureCmd := &cobra.Command{
		Use:   "ensure ARG... | --mode MODE",
		Short: "Make kernel arguments part of the next boot (intel_iommu=on iommu=pt on Intel, iommu=pt on AMD, iommu.passthrough=1 on arm64 for --mode vm-*)",
		RunE:  func(c *cobra.Command, args []string) error { return ens.edit(c, args, false) },
	}
	ensureCmd.Flags().StringVar(&ens.mode, "mode", "", "workload type: vm-passthrough or vm-vgpu (the IOMMU arguments for this node's IOMMU)")
	ensureCmd.Flags().BoolVar(&ens.dryRun, "dry-run", false, "print a unified diff of each file and the commands, change nothing")
	ensureCmd.Flags().BoolVar(&ens.noRegenerate, "no-regenerate", false, "edit the files but do not run update-grub/grub-mkconfig/grubby/kernel-install")

	rm := &grubCmd{g: g}
	removeCmd := &cobra.Command{
		Use:   "remove KEY...",
		Short: "Remove every occurrence of kernel arguments (by key) from the next boot",
		Args:  cobra.MinimumNArgs(1),
		RunE:  func(c *cobra.Command, args []string) error { return rm.edit(c, args, true) },
	}
	removeCmd.Flags().BoolVar(&rm.dryRun, "dry-run", false, "print a unified diff of each file and the commands, change nothing")
	removeCmd.Flags().BoolVar(&rm.noRegenerate, "no-regenerate", false, "edit the files but do not run update-grub/grub-mkconfig/grubby/kernel-install")

	cmd.AddCommand(showCmd, ensureCmd, removeCmd)
	return cmd
}

// wanted returns the IOMMU arguments for mode on the node under root, and
// which of them it needs (preflight.KernelArgs: as check judges them).
func wanted(root *host.Root, mode string) (preflight.KernelArgs, error) {
	m, err := preflight.ParseMode(mode)
	if err != nil {
		return preflight.KernelArgs{}, usageErr("--mode: %v", err)
	}
	if m == preflight.Container {
		return preflight.KernelArgs{}, usageErr("--mode container: containers need no IOMMU kernel arguments (use gpuprep grub remove to drop some)")
	}
	k, err := preflight.NodeKernelArgs(root)
	if err != nil {
		return k, &exitError{code: exitUnknown, err: fmt.Errorf("%w: name the arguments instead, e.g. gpuprep grub ensure intel_iommu=on iommu=pt", err)}
	}
	return k, nil
}

func (c *grubCmd) edit(cmd *cobra.Command, args []string, remove bool) error {
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	command := "grub ensure"
	if remove {
		command = "grub remove"
	}
	req, notNeeded, err := c.request(root, args, remove)
	if err != nil {
		return err
	}
	boot, err := grub.Detect(root)
	if err != nil {
		return &exitError{code: exitUnknown, err: err}
	}
	plan, noRegenerate, err := c.planEdit(boot, req)
	if err != nil {
		return &exitError{code: exitUnknown, err: err}
	}
	out := sanitize.NewWriter(cmd.OutOrStdout())
	printEditHead(out, root, boot, plan, notNeeded)
	noteEntriesRight(boot, plan)
	runner := c.g.dep().grubRunner(root)
	refused := refusal(runner)
	if c.dryRun {
		printEditDryRun(out, plan, refused, noRegenerate)
		return nil
	}
	if len(plan.Commands) > 0 && refused != nil && root.Writable("/") == nil {
		// refused before any file changes, not half-way
		return &exitError{code: exitUsage, err: fmt.Errorf("would run %s: %w; add --system-disk if %s is one, or give --no-regenerate and regenerate it yourself", host.ShellQuote(plan.Commands[0]), refused, root.Name())}
	}
	// what a bootloader's own tool changes goes in the journal too, so
	// that gpuprep rollback undoes it as it undoes apply's
	plan.Intents = func(argv []string) []journal.Entry { return provision.BootArgIntents(boot, plan, argv, command) }
	if err := plan.Apply(context.Background(), root, runner, command, c.g.dep().grubNow()); err != nil {
		return &exitError{code: exitUnknown, err: err}
	}
	printEditDone(out, plan)
	if rebootNeeded(root, req, plan) {
		fmt.Fprintln(out, "reboot the node for the change to take effect")
		return &exitError{code: exitNeedReboot}
	}
	return nil
}

// request is what grub ensure (the arguments, or --mode's) or grub remove
// (the keys) asks for; notNeeded are --mode's wanted arguments this node
// does not need, each with why.
func (c *grubCmd) request(root *host.Root, args []string, remove bool) (req grub.Request, notNeeded []string, _ error) {
	switch {
	case remove:
		for _, k := range args {
			if strings.ContainsAny(k, "= \t\"'") || k == "" {
				return req, nil, usageErr("remove takes keys (e.g. intel_iommu), not %q", k)
			}
		}
		req.Remove = args
	case c.mode != "" && len(args) > 0:
		return req, nil, usageErr("give either arguments or --mode, not both")
	case c.mode != "":
		k, err := wanted(root, c.mode)
		if err != nil {
			return req, nil, err
		}
		req = k.Request()
		for _, w := range k.Wanted {
			if why, ok := k.NotNeeded[w.String()]; ok {
				notNeeded = append(notNeeded, w.String()+": not needed, "+why)
			}
		}
	case len(args) == 0:
		return req, nil, usageErr("ensure needs arguments (e.g. iommu=pt) or --mode vm-passthrough|vm-vgpu")
	default:
		for _, a := range args {
			if err := grub.ValidateArg(a); err != nil {
				return req, nil, usageErr("%v", err)
			}
			req.Ensure = append(req.Ensure, kargs.ParseOne(a))
		}
	}
	return req, notNeeded, nil
}

// planEdit plans req on boot. A dry run that could not regenerate the boot
// configuration shows the diff all the same (as plan does), planned
// without regenerating; noRegenerate says why the run itself would stop.
func (c *grubCmd) planEdit(boot *grub.Boot, req grub.Request) (_ *grub.Plan, noRegenerate, _ error) {
	plan, err := boot.PlanEdit(req, !c.noRegenerate)
	if errors.Is(err, grub.ErrNoRegenerate) && c.dryRun {
		noRegenerate = err
		if plan, err = boot.PlanEdit(req, false); err == nil {
			plan.Notes = slices.DeleteFunc(plan.Notes, func(n string) bool { return strings.HasPrefix(n, "--no-regenerate:") })
		}
	}
	if errors.Is(err, grub.ErrNoRegenerate) {
		err = fmt.Errorf("%w (use --no-regenerate and regenerate it yourself)", err)
	}
	return plan, noRegenerate, err
}

// noteEntriesRight notes, on BLS, a change that leaves every boot entry as
// it is.
func noteEntriesRight(boot *grub.Boot, plan *grub.Plan) {
	if boot.Kind == grub.KindBLS && plan.Changed() && len(plan.EntriesAdded)+len(plan.EntriesRemoved) == 0 {
		plan.Notes = append(plan.Notes, "every boot entry is right already (no grubby, no reboot): the files are edited for kernels installed later, which get their arguments from /etc/kernel/cmdline, itself rewritten from /etc/default/grub by grub2-mkconfig")
	}
}

// refusal is why runner refuses every command (a refusingRunner's error);
// nil when it runs them.
func refusal(runner host.Runner) error {
	if rr, ok := runner.(refusingRunner); ok {
		return rr.err
	}
	return nil
}

// printEditHead prints the bootloader, the arguments already configured,
// and those --mode leaves out.
func printEditHead(out io.Writer, root *host.Root, boot *grub.Boot, plan *grub.Plan, notNeeded []string) {
	if e := espsSay(boot); e != "" {
		fmt.Fprintf(out, "bootloader: %s, %s\n", boot.Kind, e)
	} else {
		fmt.Fprintf(out, "bootloader: %s\n", boot.Kind)
	}
	kver, _ := kernelrelease.Running(root)
	conf, _, _ := boot.ConfiguredArgs(grub.NextRelease(root, kver))
	for _, s := range plan.Satisfied {
		fmt.Fprintf(out, "already configured: %s%s\n", s, kargs.AsEquivalent(conf, s))
	}
	for _, s := range notNeeded {
		fmt.Fprintf(out, "left out: %s\n", s)
	}
}

// printEditDryRun prints what the edit would do: the diffs and commands,
// and why the run itself would be refused (refused) or stop
// (noRegenerate).
func printEditDryRun(out io.Writer, plan *grub.Plan, refused, noRegenerate error) {
	d := change.Dry{W: out, Run: "would run: "}
	for _, ch := range plan.Changes {
		d.Diff(ch)
	}
	for _, argv := range plan.Commands {
		d.Command(host.ShellQuote(argv))
	}
	if len(plan.Commands) > 0 && refused != nil {
		fmt.Fprintf(out, "note: without --dry-run this is refused: %v (or give --no-regenerate and regenerate it yourself)\n", refused)
	}
	if noRegenerate != nil && plan.Changed() {
		fmt.Fprintf(out, "note: without --dry-run this stops before any change: %v (give --no-regenerate and regenerate it yourself)\n", noRegenerate)
	}
	printEditNotes(out, plan)
}

// printEditDone prints what the edit did: the files written, the commands
// run, the arguments removed and added.
func printEditDone(out io.Writer, plan *grub.Plan) {
	for _, ch := range plan.Changes {
		fmt.Fprintf(out, "wrote %s\n", ch.Path)
	}
	for _, argv := range plan.Commands {
		fmt.Fprintf(out, "ran: %s\n", host.ShellQuote(argv))
	}
	if len(plan.Removed) > 0 {
		fmt.Fprintf(out, "removed: %s\n", strings.Join(plan.Removed, " "))
	}
	if len(plan.Added) > 0 {
		fmt.Fprintf(out, "added: %s", strings.Join(plan.Added, " "))
		if plan.Var != "" {
			fmt.Fprintf(out, " (to %s)", plan.Var)
		}
		fmt.Fprintln(out)
	}
	printEditNotes(out, plan)
}

// printEditNotes prints the plan's notes, and whether there was nothing to
// change.
func printEditNotes(out io.Writer, plan *grub.Plan) {
	for _, n := range plan.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	if !plan.Changed() {
		fmt.Fprintln(out, "nothing to change")
	}
}

// rebootNeeded: the running kernel's arguments do not yet match the request.
func rebootNeeded(root *host.Root, req grub.Request, plan *grub.Plan) bool {
	raw, err := kargs.ReadString(root, "/proc/cmdline")
	if err != nil {
		return plan.Changed()
	}
	running := kargs.Parse(raw)
	for _, w := range req.Ensure {
		if !kargs.Satisfied(running, w) {
			return true
		}
	}
	for _, k := range req.Remove {
		if _, ok := kargs.Last(running, k); ok {
			return true
		}
	}
	for _, k := range req.NotOff {
		if len(kargs.OffIndexes(running, k)) > 0 {
			return true
		}
	}
	return false
}

// argState is one wanted argument in `grub show`.
type argState struct {
	Wanted     string `json:"wanted"`
	Configured string `json:"configured"` // the occurrence that counts, "" when absent
	Running    string `json:"running"`
	State      string `json:"state"` // ok, configured-running-unknown (the running command line could not be read), not-for-later-kernels (BLS: in effect, but not where kernels installed later get their arguments), missing, configured-reboot-pending, configured-not-in-boot-menu, configured-but-not-effective, running-not-configured, not-needed
	Reason     string `json:"reason,omitempty"`
}

// offState is, in `grub show`, an argument that turns off what the mode
// needs (the IOMMU, interrupt remapping), configured or running.
type offState struct {
	Arg        string `json:"arg"`
	Configured string `json:"configured"` // where the next boot's configuration has it ("file:line"), "" when it does not
	Running    string `json:"running"`    // the running kernel's occurrence, "" when it has none
	State      string `json:"state"`      // next-boot-breaks (configured, not running), in-effect (running and configured), reboot-drops (running, not configured), in-boot-menu (running, not configured, but still in the generated GRUB menu)
	Reason     string `json:"reason,omitempty"`
}

// nextBootState is, in `grub show`, the kernel the next boot runs, as
// grub.NextBoot reads it for check too.
type nextBootState struct {
	Kernel string `json:"kernel"`           // its release, "" when it cannot be told
	Initrd string `json:"initrd,omitempty"` // the initramfs its boot entry loads, "" when none was found
	// NoInitramfs: its boot entry loads no initramfs at all (no initrd
	// line; Ubuntu's initrdless GRUB_FORCE_PARTUUID boot)
	NoInitramfs bool   `json:"noInitramfs,omitempty"`
	From        string `json:"from,omitempty"`    // the file and setting that decided (a menu entry and GRUB_DEFAULT or grubenv, loader.conf's default, a pin file)
	Missing     string `json:"missing,omitempty"` // when kernel is "": what was missing to tell
	// Read is the kernel whose configuration "configured" is: the next
	// boot's, else (unknown) the running kernel's
	Read string `json:"read"`
}

type showReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Bootloader string `json:"bootloader"`
	Source     string `json:"source"`
	// ESPs (proxmox-boot-tool) is what its ESPs boot, and how gpuprep knows
	ESPs string `json:"esps,omitempty"`
	// NextBoot is the kernel the next boot runs and what decided it
	NextBoot   nextBootState `json:"nextBoot"`
	Configured string        `json:"configured"`
	Running    string        `json:"running"`
	// RunningError says why /proc/cmdline could not be read ("" when it was)
	RunningError string     `json:"runningError,omitempty"`
	Mode         string     `json:"mode"`
	Args         []argState `json:"args"`
	Off          []offState `json:"off,omitempty"`
}

func (c *grubCmd) show(cmd *cobra.Command) error {
	if c.output != "text" && c.output != "json" {
		return usageErr("--output %q: want text or json", c.output)
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	k, err := wanted(root, c.mode)
	if err != nil {
		return err
	}
	boot, err := grub.Detect(root)
	if err != nil {
		return &exitError{code: exitUnknown, err: err}
	}
	kver, _ := kernelrelease.Running(root)
	// the same reading of the next boot as check's (grub.Configured
	// through grub.NextRelease)
	nk, rel := grub.NextBoot(root, kver)
	source, err := boot.Source(rel)
	if err != nil {
		return &exitError{code: exitUnknown, err: err}
	}
	var conf []kargs.Param
	src := ""
	if source != nil {
		conf, src = source.Args(), source.File
	}
	raw, rerr := kargs.ReadString(root, "/proc/cmdline")
	running := kargs.Parse(raw)
	rep := showReport{APIVersion: "gpuprep/v1", Kind: "KernelArgs", Bootloader: boot.Kind, Source: src, ESPs: espsSay(boot), Running: raw, Mode: c.mode,
		NextBoot: nextBootState{Kernel: nk.Release, Initrd: nk.Initrd, NoInitramfs: nk.NoInitramfs, From: nk.From, Missing: nk.Missing, Read: rel}}
	if rerr != nil {
		rep.RunningError = rerr.Error()
	}
	var cw []string
	for _, p := range conf {
		cw = append(cw, p.String())
	}
	rep.Configured = strings.Join(cw, " ")
	r := &argReading{root: root, boot: boot, conf: conf, running: running, rerr: rerr, k: k,
		srcNewer: boot.ChangedSince(root, source, bootTime(root))}
	for _, w := range k.Wanted {
		rep.Args = append(rep.Args, r.state(w))
	}
	rep.Off = offStates(root, boot, source, k, c.mode, conf, running, rerr == nil)
	out := cmd.OutOrStdout()
	if c.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return showText(out, rep)
}

// argReading is what `grub show` judges each wanted argument by: the
// next boot's configured arguments, the running ones (rerr: why they
// could not be read), and whether the configuration changed after the
// last boot.
type argReading struct {
	root          *host.Root
	boot          *grub.Boot
	k             preflight.KernelArgs
	conf, running []kargs.Param
	rerr          error
	srcNewer      bool
}

// state is wanted argument w's state.
func (r *argReading) state(w kargs.Param) argState {
	a := argState{Wanted: w.String()}
	// the occurrence that decides, which for iommu=pt can be its
	// equivalent iommu.passthrough=
	var equiv []string
	if p, ok := kargs.Deciding(r.conf, w); ok {
		a.Configured = p.String()
		if kargs.Equivalent(p, w) && kargs.Satisfied(r.conf, w) {
			equiv = append(equiv, "configured")
		}
	}
	if p, ok := kargs.Deciding(r.running, w); ok {
		a.Running = p.String()
		if kargs.Equivalent(p, w) && kargs.Satisfied(r.running, w) {
			equiv = append(equiv, "running")
		}
	}
	a.State, a.Reason = r.judge(w)
	if len(equiv) > 0 {
		met := a.Configured
		if met == "" || !slices.Contains(equiv, "configured") {
			met = a.Running
		}
		eq := "met by " + met + " (" + strings.Join(equiv, " and ") + "), its equivalent"
		if a.Reason == "" {
			a.Reason = eq
		} else {
			a.Reason = eq + "; " + a.Reason
		}
	}
	return a
}

// judge is w's state and why: whether it is needed, configured for the
// next boot (and in its boot menu), and running.
func (r *argReading) judge(w kargs.Param) (state, reason string) {
	isConf, isRun := kargs.Satisfied(r.conf, w), r.rerr == nil && kargs.Satisfied(r.running, w)
	why, notNeeded := r.k.NotNeeded[w.String()]
	menu, menuLacks := "", false // GRUB: the generated menu's content decides, not its age
	if isConf {
		menu, menuLacks = r.boot.BootMenuLacks(r.root, grub.Request{Ensure: []kargs.Param{w}})
	}
	switch {
	case notNeeded:
		return "not-needed", why + ": no edit and no reboot is for it"
	case menuLacks:
		return "configured-not-in-boot-menu", "configured, but the boot menu " + menu + " does not have it (" + r.boot.MenuEntry() + "): the next boot goes without it until it is regenerated (" + r.boot.MenuRegenerate(r.root, menu) + "; gpuprep grub ensure runs it)"
	case isConf && r.rerr != nil:
		return "configured-running-unknown", "configured; whether the running kernel has it is unknown: " + r.rerr.Error()
	case isConf && isRun:
		if lack := r.boot.LaterLack(grub.Request{Ensure: []kargs.Param{w}}); len(lack) > 0 {
			// BLS: the entries have it, kernels installed later may not
			return "not-for-later-kernels", "in effect and in the boot entry, but " + grub.LaterLackSays(lack) + ": kernels installed later would go without it; gpuprep grub ensure adds it there (no reboot)"
		}
		return "ok", ""
	case isConf && r.srcNewer:
		return "configured-reboot-pending", "changed after the last boot"
	case isConf:
		return "configured-but-not-effective", "configured before the last boot but not in /proc/cmdline: overridden (a later grub.d file, a BLS entry), another boot entry or menu booted, or unknown to this kernel"
	case isRun:
		return "running-not-configured", "in /proc/cmdline but not configured: the next boot loses it"
	}
	return "missing", ""
}

// showText writes rep wrapped to the terminal's width (report.TermWidth),
// never wider: the header's values under their own indent, a kernel
// argument never broken (alone on a line where it is longer than one), the
// tables through report.Table.
func showText(out io.Writer, rep showReport) error {
	width := report.TermWidth(out)
	out = sanitize.NewWriter(out)
	running := strings.TrimSpace(rep.Running)
	if rep.RunningError != "" {
		running = "unknown (" + rep.RunningError + ")"
	}
	bl := rep.Bootloader
	if rep.ESPs != "" {
		bl += ", " + rep.ESPs
	}
	const indent = len("configured: ")
	report.Hanging(out, "bootloader: ", bl+" ("+rep.Source+")", indent, width)
	report.Hanging(out, "next boot:  ", sanitize.Terminal(nextBootSays(rep.NextBoot)), indent, width)
	report.Hanging(out, "configured: ", sanitize.Terminal(rep.Configured), indent, width)
	report.Hanging(out, "running:    ", sanitize.Terminal(running), indent, width)
	fmt.Fprintln(out)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	// each cell one line of its own: sanitize.Terminal shows a host's \n,
	// \t, \v or \f, which would otherwise make rows and cells
	rows := make([][]string, 0, len(rep.Args))
	for _, a := range rep.Args {
		rows = append(rows, []string{sanitize.Terminal(a.Wanted), sanitize.Terminal(dash(a.Configured)), sanitize.Terminal(dash(a.Running)), sanitize.Terminal(a.State)})
	}
	if err := report.Table(out, width, []string{"WANTED", "CONFIGURED", "RUNNING", "STATE"}, rows); err != nil {
		return err
	}
	for _, a := range rep.Args {
		if a.Reason != "" {
			report.Hanging(out, sanitize.Terminal(a.Wanted)+": ", sanitize.Terminal(a.Reason), 2, width)
		}
	}
	if len(rep.Off) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	rows = rows[:0]
	for _, o := range rep.Off {
		rows = append(rows, []string{sanitize.Terminal(o.Arg), sanitize.Terminal(dash(o.Configured)), sanitize.Terminal(dash(o.Running)), sanitize.Terminal(o.State)})
	}
	if err := report.Table(out, width, []string{"TURNS OFF", "CONFIGURED", "RUNNING", "STATE"}, rows); err != nil {
		return err
	}
	for _, o := range rep.Off {
		report.Hanging(out, sanitize.Terminal(o.Arg)+": ", sanitize.Terminal(o.Reason), 2, width)
	}
	return nil
}

// nextBootSays is the next boot's kernel in grub show's text: its release
// and what decided it, or unknown with what was missing (and whose
// configuration is read instead).
func nextBootSays(n nextBootState) string {
	if n.Kernel == "" {
		s := "kernel unknown (" + n.Missing + ")"
		if n.Read != "" {
			s += "; the configuration read is the running kernel's, " + n.Read
		}
		return s
	}
	s := "kernel " + n.Kernel + ", " + n.From
	switch {
	case n.Initrd != "":
		s += "; initramfs " + n.Initrd
	case n.NoInitramfs:
		s += "; no initramfs"
	}
	return s
}

// offStates are the arguments, configured for the next boot or running,
// that turn off what the mode needs (k.NotOff), one per switch.
func offStates(root *host.Root, boot *grub.Boot, src *grub.Source, k preflight.KernelArgs, mode string, conf, running []kargs.Param, runKnown bool) []offState {
	fix := "gpuprep grub ensure --mode " + mode + " removes it"
	var out []offState
	for _, key := range k.NotOff {
		ci, ri := kargs.OffIndexes(conf, key), kargs.OffIndexes(running, key)
		if !runKnown {
			ri = nil
		}
		if len(ci) == 0 && len(ri) == 0 {
			continue
		}
		var o offState
		switch {
		case len(ci) > 0:
			p := conf[ci[len(ci)-1]]
			o.Arg = p.String()
			o.Configured = "configured"
			if src != nil {
				o.Configured = src.Locate(p)
			}
		default:
			o.Arg = running[ri[len(ri)-1]].String()
		}
		if len(ri) > 0 {
			o.Running = running[ri[len(ri)-1]].String()
		}
		what := "the IOMMU"
		if key == "intremap" {
			what = "interrupt remapping"
		}
		switch {
		case len(ci) > 0 && len(ri) == 0:
			o.State, o.Reason = "next-boot-breaks", "the next boot turns "+what+" off; the running kernel does not have it: "+fix+" before the node reboots"
		case len(ci) > 0:
			o.State, o.Reason = "in-effect", what+" is off now and stays off at the next boot: "+fix+", then reboot"
		default:
			o.State, o.Reason = "reboot-drops", what+" is off now; the configuration no longer has it: a reboot drops it"
			if menu, lacks := boot.BootMenuLacks(root, grub.Request{NotOff: []string{key}}); lacks && src != nil {
				o.State = "in-boot-menu"
				o.Reason = what + " is off now; the configuration no longer has it, but the boot menu " + menu + " still does (" + boot.MenuEntry() + "): regenerate it (" + boot.MenuRegenerate(root, menu) + ") before rebooting, or the next boot keeps it"
			}
		}
		out = append(out, o)
	}
	return out
}

func bootTime(root *host.Root) time.Time {
	b, err := root.ReadString("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, l := range strings.Split(b, "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}

// espsSay is, on a proxmox-boot-tool node, what its ESPs boot and the
// evidence ("ESPs with systemd-boot: booted by …"), else "".
func espsSay(boot *grub.Boot) string {
	if boot.Kind != grub.KindProxmox {
		return ""
	}
	if boot.ESPMode == "" {
		return "ESPs with systemd-boot or GRUB: " + boot.ESPModeWhy
	}
	return "ESPs with " + boot.ESPMode + ": " + boot.ESPModeWhy
}
