package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vfio"
)

func init() { register(newVFIOCmd) }

// hostVFIOKernel is deps.vfioKernel on a real machine: its sysfs and
// commands; on a root other than / only --dry-run and status are possible.
func hostVFIOKernel(root *host.Root) (vfio.Sysfs, host.Runner, error) {
	if !root.IsLive() {
		return nil, nil, usageErr("--root %s: binding changes the running kernel; against another root only `vfio status` and `vfio bind --dry-run` work", root.Name())
	}
	return root, host.DefaultRunner(root), nil
}

type vfioCmd struct {
	g        *globals
	sel      []string
	output   string
	persist  bool
	dryRun   bool
	force    bool
	nvswitch bool
	// bind: host devices (storage, network, USB… controllers) may go to VFIO
	allowHost bool
	// unbind on a board with NVSwitches: only the persistent configuration
	// now (atBoot), or the live rebind all the same (live)
	atBoot, live bool
}

func newVFIOCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vfio",
		Short: "Bind GPUs (every function of their IOMMU groups) to VFIO drivers for passthrough, and back",
		Long: `vfio binds each selected GPU, and every other endpoint function in its IOMMU
group, to its VFIO driver (vfio-pci, or the variant driver modules.alias names,
e.g. nvgrace_gpu_vfio_pci), verifies the binding, and rolls everything back when
a step fails. A group that holds a device that is neither a function of a
selected GPU nor selected itself is refused, and so is every storage, network,
USB or other host controller that is not a function of a GPU card, selected or
in a selected GPU's group, unless bind --allow-host-devices. Devices already on
a VFIO driver are left alone, so a re-run never disturbs a running VM.

Exit codes: 0 done (or nothing to do), 1 refused or failed (changes rolled
back), 2 usage error, 3 the host could not be read.`,
		Args: cobra.NoArgs,
	}
	selFlag := func(c *vfioCmd, f interface {
		StringArrayVar(*[]string, string, []string, string)
		BoolVar(*bool, string, bool, string)
	}) {
		f.StringArrayVar(&c.sel, "select", nil, "GPUs: PCI address (0000:41:00.0), VVVV:DDDD or VVVV; repeatable (default: every NVIDIA GPU)")
		f.BoolVar(&c.nvswitch, "nvswitch", false, "NVSwitches go with the GPUs")
	}

	st := &vfioCmd{g: g}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show, per GPU, its group, drivers, overrides, the VFIO driver bind would use and persistent configuration",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return st.status(cmd) },
	}
	selFlag(st, status.Flags())
	status.Flags().StringVarP(&st.output, "output", "o", "text", "output format: text or json")

	bd := &vfioCmd{g: g}
	bind := &cobra.Command{
		Use:   "bind",
		Short: "Bind the selected GPUs and every endpoint of their IOMMU groups to VFIO",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return bd.bind(cmd) },
	}
	selFlag(bd, bind.Flags())
	bind.Flags().BoolVar(&bd.persist, "persist", false, "make the binding survive reboot (modprobe.d, modules-load.d, udev rule where needed, initramfs; vfio-pci.ids= on the kernel command line where vfio-pci is built in)")
	bind.Flags().BoolVar(&bd.dryRun, "dry-run", false, "print the sysfs writes, commands and files, change nothing")
	bind.Flags().BoolVar(&bd.force, "force", false, "unbind nvidia even while /dev/nvidia* is held open")
	bind.Flags().BoolVar(&bd.allowHost, "allow-host-devices", false, "let storage, network, USB and other host controllers that are selected or in a selected GPU's IOMMU group go to VFIO (refused without it: the host loses them)")

	ub := &vfioCmd{g: g}
	unbind := &cobra.Command{
		Use:   "unbind",
		Short: "Return the selected GPUs' functions to the drivers they had before bind; remove gpuprep's persistent configuration",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return ub.unbind(cmd) },
	}
	selFlag(ub, unbind.Flags())
	unbind.Flags().BoolVar(&ub.force, "force", false, "unbind even while /dev/vfio/<group> is held open (by a VM)")
	unbind.Flags().BoolVar(&ub.atBoot, "at-boot", false, "leave the devices on VFIO now and drop them from gpuprep's persistent configuration: the next boot returns them (what a board with NVSwitches needs)")
	unbind.Flags().BoolVar(&ub.live, "live", false, "on a board with NVSwitches, rebind the GPUs to their drivers now all the same (NVLink training can hang them)")

	cmd.AddCommand(status, bind, unbind)
	return cmd
}

// vfioEnv is what bind and unbind act through.
func vfioEnv(root *host.Root, fs vfio.Sysfs, runner host.Runner) effect.Effector {
	return effect.Effector{Root: root, Sysfs: fs, Runner: runner}
}

func (c *vfioCmd) setup() (*host.Root, *pci.Inventory, pci.Selector, error) {
	sel, err := pci.ParseSelector(c.sel)
	if err != nil {
		return nil, nil, sel, usageErr("%v", err)
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return nil, nil, sel, err
	}
	inv, err := pci.Discover(root)
	if err != nil {
		return nil, nil, sel, &exitError{code: exitUnknown, err: err}
	}
	return root, inv, sel, nil
}

// vfioErr maps vfio errors to exit codes.
func vfioErr(err error) error {
	var se *vfio.SelectError
	if errors.As(err, &se) {
		return usageErr("%v", err)
	}
	return &exitError{code: exitNotReady, err: err}
}

func (c *vfioCmd) opts() vfio.Options {
	// a bootloader edit bind or unbind makes (vfio-pci.ids= for a built-in
	// vfio-pci) is journalled as grub ensure's
	return vfio.Options{NVSwitch: c.nvswitch, Force: c.force, Persist: c.persist, AllowHostDevices: c.allowHost, BootIntents: provision.BootArgIntents}
}

func (c *vfioCmd) status(cmd *cobra.Command) error {
	if c.output != "text" && c.output != "json" {
		return usageErr("--output %q: want text or json", c.output)
	}
	root, inv, sel, err := c.setup()
	if err != nil {
		return err
	}
	st, err := vfio.GetStatus(root, inv, sel, c.nvswitch)
	if err != nil {
		return vfioErr(err)
	}
	out := cmd.OutOrStdout()
	if c.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(out, st)
	return nil
}

// printStatus writes st wrapped to the terminal's width (report.TermWidth),
// never wider: each line's rest under its own indent, a device address or
// path never broken (alone on a line where it is longer than one).
func printStatus(w io.Writer, st *vfio.Status) {
	width := report.TermWidth(w)
	w = sanitize.NewWriter(w)
	if len(st.GPUs) == 0 {
		report.Hanging(w, "", "No GPU selected ("+st.Selection+").", 2, width)
	}
	for _, g := range st.GPUs {
		state := "not on VFIO"
		if g.OnVFIO {
			state = "on VFIO"
		}
		name := g.Name
		if name != "" {
			name = " " + name
		}
		where := "IOMMU group " + g.IOMMUGroup + ", viable for passthrough"
		if !g.Viable {
			where = "NOT viable: " + g.WhyNot
			if g.IOMMUGroup != "" {
				where = "IOMMU group " + g.IOMMUGroup + ", " + where
			}
		}
		report.Hanging(w, "", g.Address+name+": "+where+"; "+state, 2, width)
		for _, m := range g.Members {
			lead := fmt.Sprintf("  %-12s %s:%s %s %-8s ", m.Address, m.VendorID, m.DeviceID, m.Class, m.Role)
			line := "driver " + orNone(m.Driver)
			if m.Override != "" {
				line += ", driver_override " + sanitize.Terminal(m.Override)
			}
			if m.VFIODriver != "" && m.VFIODriver != m.Driver {
				line += ", bind would use " + m.VFIODriver
			}
			if m.Persisted != "" {
				line += ", persisted (" + m.Persisted + ")"
			}
			report.Hanging(w, lead, line, 4, width)
		}
		if n := g.Node; n.Path != "" {
			s := "absent"
			if n.Present {
				s = "present"
			}
			if n.Viable != nil {
				if *n.Viable {
					s += ", viable (VFIO_GROUP_GET_STATUS)"
				} else {
					s += ", NOT viable (VFIO_GROUP_GET_STATUS)"
				}
			}
			if n.Error != "" {
				s += ", " + n.Error
			}
			if len(n.Holders) > 0 {
				s += ", open by " + sanitize.Terminal(strings.Join(n.Holders, ", "))
			}
			report.Hanging(w, "  "+n.Path+": ", s, 4, width)
		}
	}
	p := st.Persistent
	switch {
	case len(p.Files) == 0:
		report.Hanging(w, "", "Persistent configuration: none by gpuprep.", 2, width)
	default:
		report.Hanging(w, "", "Persistent configuration: "+strings.Join(p.Files, ", ")+" ("+plural.N(len(p.Devices), "device")+")", 2, width)
	}
	for _, o := range p.Other {
		report.Hanging(w, "  also: ", o, 4, width)
	}
}

// orNone is a driver's name as shown (sanitize.Terminal: one line), or "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return sanitize.Terminal(s)
}

func (c *vfioCmd) bind(cmd *cobra.Command) error {
	root, inv, sel, err := c.setup()
	if err != nil {
		return err
	}
	opts := c.opts()
	plan, err := vfio.NewPlan(root, inv, sel, opts)
	if err != nil {
		return vfioErr(err)
	}
	out, errw := cmd.OutOrStdout(), sanitize.NewWriter(cmd.ErrOrStderr())
	for _, w := range plan.Warnings {
		fmt.Fprintln(errw, "gpuprep: warning:", w)
	}
	if len(plan.Holders) > 0 {
		fmt.Fprintf(errw, "gpuprep: warning: --force: unbinding nvidia while /dev/nvidia* is open by %s\n", plural.N(len(plan.Holders), "process"))
	}
	if c.dryRun {
		printPlan(out, root, plan)
		return nil
	}
	fs, runner, err := c.g.dep().vfioKernel(root)
	if err != nil {
		return err
	}
	res, err := vfio.Bind(context.Background(), vfioEnv(root, fs, runner), inv, plan, opts)
	printResult(out, res)
	if err != nil {
		return vfioErr(err)
	}
	return nil
}

func printPlan(w io.Writer, root *host.Root, p *vfio.Plan) {
	w = sanitize.NewWriter(w)
	fmt.Fprintln(w, "Dry run: nothing is changed.")
	for _, t := range p.Targets {
		if t.Bound {
			fmt.Fprintf(w, "  %s on %s already: left alone\n", t.Dev.Address, sanitize.Terminal(t.Driver))
			continue
		}
		via := "fallback"
		if t.Alias != "" {
			via = "modules.alias " + t.Alias
		}
		fmt.Fprintf(w, "  %s (%s, group %s): %s -> %s (module %s, %s)\n", t.Dev.Address, t.Role, t.Dev.IOMMUGroup, orNone(t.Driver), t.VFIO, t.Module, via)
	}
	d := change.Dry{W: w, Run: "run: "}
	for _, m := range p.Modules {
		d.Command("modprobe " + m)
	}
	for _, s := range p.Steps {
		d.Sysfs(s.Path, s.Value)
	}
	pending := 0
	if pp := p.Persist; pp != nil {
		files, initramfs := pp.Pending(root)
		pending = len(files)
		if initramfs {
			pending++
		}
		for _, f := range files {
			if f.Removed {
				d.Line("remove (backed up): " + f.Path)
				continue
			}
			d.Line("write (atomic, backed up): " + f.Path)
			change.Dry{W: w, Indent: "    "}.Content(f.New)
		}
		switch {
		case initramfs && len(files) == 0:
			d.Command(strings.Join(pp.Initramfs, " ") + " (" + pp.Regenerate + ")")
		case initramfs:
			d.Command(strings.Join(pp.Initramfs, " "))
		case len(files) == 0 && len(pp.Files) > 0:
			d.Line("persistent configuration: already as it should be")
		}
		if c := pp.CmdlinePending(); c != nil {
			pending++
			d.Line("kernel command line (" + c.Boot.Kind + "): " + c.Why)
			for _, ch := range c.Plan.Changes {
				d.Diff(ch)
			}
			for _, argv := range c.Plan.Commands {
				d.Command(host.ShellQuote(argv))
			}
		}
		for _, n := range pp.Warnings {
			d.Line("note: " + n)
		}
	}
	if len(p.Steps) == 0 && pending == 0 {
		fmt.Fprintln(w, "Nothing to do.")
	}
}

func printResult(w io.Writer, r *vfio.Result) {
	w = sanitize.NewWriter(w)
	if r == nil {
		return
	}
	for _, c := range r.Commands {
		fmt.Fprintf(w, "ran: %s\n", strings.Join(c, " "))
	}
	for _, c := range r.Changed {
		fmt.Fprintf(w, "%s: %s -> %s\n", c.Device, orNone(c.Before), orNone(c.After))
	}
	for _, a := range r.Unchanged {
		fmt.Fprintf(w, "%s: already on a VFIO driver, left alone\n", a)
	}
	for _, f := range r.Files {
		switch {
		case f.Removed:
			fmt.Fprintf(w, "removed %s (backup %s)\n", f.Path, f.Backup)
		case f.Backup != "":
			fmt.Fprintf(w, "wrote %s (backup %s)\n", f.Path, f.Backup)
		default:
			fmt.Fprintf(w, "wrote %s\n", f.Path)
		}
	}
	groups := make([]string, 0, len(r.Groups))
	for g := range r.Groups {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if r.Groups[g] {
			fmt.Fprintf(w, "/dev/vfio/%s ready\n", g)
		} else {
			fmt.Fprintf(w, "/dev/vfio/%s did not appear\n", g)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
}

func (c *vfioCmd) unbind(cmd *cobra.Command) error {
	root, inv, sel, err := c.setup()
	if err != nil {
		return err
	}
	fs, runner, err := c.g.dep().vfioKernel(root)
	if err != nil {
		return err
	}
	if c.atBoot && c.live {
		return usageErr("--at-boot and --live exclude each other")
	}
	selected, err := vfio.Selection(inv, sel, c.nvswitch)
	if err != nil {
		return vfioErr(err)
	}
	var addrs, live []string
	for _, d := range vfio.UnbindTargets(root, inv, selected) {
		addrs = append(addrs, d.Address)
		if pci.DriverIsVFIO(d.Driver) {
			live = append(live, d.Address)
		}
	}
	env := vfioEnv(root, fs, runner)
	if c.atBoot {
		if len(addrs) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "Nothing to unbind: no selected device is on a VFIO driver or persisted.")
			return nil
		}
		res, err := vfio.Unpersist(context.Background(), env, inv, addrs, c.opts())
		printResult(cmd.OutOrStdout(), res)
		if err != nil {
			return vfioErr(err)
		}
		if len(live) > 0 {
			fmt.Fprintf(sanitize.NewWriter(cmd.OutOrStdout()), "%s stay on VFIO until the next boot, which gives each its own driver: reboot the node\n", strings.Join(live, ", "))
		}
		return nil
	}
	if len(live) > 0 && len(pci.NVSwitches(inv)) > 0 && !c.live {
		again := []string{"gpuprep", "vfio", "unbind", "--at-boot"}
		for _, s := range c.sel {
			again = append(again, "--select", s)
		}
		if c.nvswitch {
			again = append(again, "--nvswitch")
		}
		return &exitError{code: exitNotReady, err: fmt.Errorf("refused: %s are on VFIO on a board with NVSwitches, where moving a GPU from vfio-pci to nvidia while the system runs starts NVLink training that can hang and leave it to no driver: run %s and reboot (or gpuprep apply --mode container, which does that), or pass --live to rebind now all the same", strings.Join(live, ", "), host.ShellQuote(again))}
	}
	res, err := vfio.Unbind(context.Background(), env, inv, sel, c.opts())
	if errors.Is(err, vfio.ErrNothing) {
		fmt.Fprintln(cmd.OutOrStdout(), "Nothing to unbind: no selected device is on a VFIO driver or persisted.")
		return nil
	}
	printResult(cmd.OutOrStdout(), res)
	if err != nil {
		return vfioErr(err)
	}
	return nil
}
