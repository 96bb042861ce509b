package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vfio"
)

func init() { register(newApplyCmd) }

// hostProvisionKernel is deps.provisionKernel on a real machine: its sysfs
// and commands; against a root other than / apply and rollback refuse.
func hostProvisionKernel(root *host.Root) (vfio.Sysfs, host.Runner, error) {
	if root.IsSystemDisk() {
		// rollback of an offline image (rootRule): its files, its own
		// programs run inside it; it has no running kernel
		return noKernel{root.Name()}, hostGrubRunner(root), nil
	}
	if !root.IsLive() {
		return nil, nil, usageErr("--root %s: apply and rollback change the running kernel; against another root only gpuprep plan works", root.Name())
	}
	return root, host.ExecRunner{}, nil
}

// noKernel is the sysfs of a system disk: none; every write is refused.
type noKernel struct{ name string }

func (k noKernel) WriteAttr(p, _ string) error {
	return fmt.Errorf("write %s: --root %s is a system disk, not a running kernel: gpuprep changes no sysfs there", p, k.name)
}

type applyCmd struct {
	provisionFlags
	yes    bool
	reboot bool
}

func newApplyCmd(g *globals) *cobra.Command {
	c := &applyCmd{provisionFlags: provisionFlags{g: g}}
	cmd := &cobra.Command{
		Use:   "apply --mode MODE [--yes] [--reboot] [--select …] [--vgpu-config-file FILE --vgpu-config NAME [--driver FILE]] [-o text|json]",
		Short: "Make this node ready for a mode: run the plan step by step, journalled, across the reboot, then check",
		Long: `apply runs gpuprep plan's steps in order, recording each step's start and end in
/var/lib/gpuprep/journal.jsonl together with every change (files with their backups,
drivers before and after, labels before), and stops at the reboot step (exit 4; with
--reboot it runs systemctl reboot). Run it again after the boot: with the kernel
arguments in effect and the IOMMU active it continues (bind, or for vm-vgpu the
vGPU manager install and the vGPUs, then label). It ends by
running gpuprep check for the mode and shows its report (embedded with -o json).
A node already ready is left alone. Killed at any point, a re-run (or gpuprep
rollback) finishes the job.

It shows the plan and asks before changing anything when standard input is a
terminal; --yes skips the question, and without a terminal --yes is required.

Exit codes: 0 done and the node is ready, 1 not ready after the steps (see the
report) or a step failed, 2 usage error, 3 the host could not be read or a check
could not be evaluated, 4 a reboot is needed (stopped at the reboot step, or
rebooting with --reboot).

When the node has rebooted since apply asked for the reboot (its boot ID, or
else its boot time, says so) and the running kernel still lacks the IOMMU
arguments, apply changes nothing and exits 1 with the diagnosis: the missing
arguments, /proc/cmdline, what the bootloader configuration has, the boot time
against the ask, and the likely causes with how to check them. It does not ask
for, nor with --reboot run, another reboot: fix the cause and reboot yourself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	c.add(cmd)
	cmd.Flags().BoolVarP(&c.yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&c.reboot, "reboot", false, "at the reboot step, run systemctl reboot instead of stopping")
	return cmd
}

// applyResult is apply -o json.
type applyResult struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Mode       string             `json:"mode"`
	Plan       *provision.Plan    `json:"plan"`
	Outcome    *provision.Outcome `json:"outcome"`
	Error      string             `json:"error,omitempty"`
	Report     *report.Report     `json:"report,omitempty"`
	Log        []string           `json:"log,omitempty"`
}

func (c *applyCmd) run(cmd *cobra.Command) error {
	// the commands apply runs also answer its plan's questions (systemctl
	// is-active …); against another root, where they cannot run, only an
	// empty plan goes ahead
	var sysfs vfio.Sysfs
	var runner host.Runner
	kerr := error(nil)
	if root, err := c.g.hostRoot(); err == nil {
		sysfs, runner, kerr = c.g.dep().provisionKernel(root)
	}
	root, p, err := c.plan(cmd.Context(), runner)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	text := c.output == "text"
	// a blocked plan fails before changing anything: nothing to confirm
	if !p.Empty() && !c.yes && p.Blocked() == nil {
		if err := c.confirm(cmd.ErrOrStderr(), p); err != nil {
			return err
		}
	}
	c.g.changing.Store(true) // from here an interrupt finishes the step in progress
	if kerr != nil {
		if !p.Empty() {
			return kerr
		}
		sysfs, runner = nil, host.NoRunner{} // nothing to change: apply only checks
	}
	var log strings.Builder
	env := effect.Effector{Root: root, Sysfs: sysfs, Runner: runner}
	if text {
		env.Out = sanitize.NewWriter(out)
		if p.Empty() {
			printProvisionPlan(out, p)
		}
	} else {
		env.Out = &log
	}
	res := applyResult{APIVersion: "gpuprep/v1", Kind: "ApplyResult", Mode: p.Mode, Plan: p}
	oc, aerr := provision.Apply(cmd.Context(), env, p, provision.ApplyOptions{Reboot: c.reboot, Interrupted: c.g.interrupted.Load, Again: againCommand(cmd)})
	res.Outcome = oc
	if s := strings.TrimSpace(log.String()); s != "" {
		res.Log = strings.Split(s, "\n")
	}
	code, err := c.closingCheck(root, &res, aerr)
	if err != nil {
		return err
	}
	if err := writeApplyResult(out, text, &res); err != nil {
		return err
	}
	return applyExit(aerr, code)
}

// confirm shows the plan on errw and asks whether to apply it; an error
// unless the answer is yes (on no terminal, without asking).
func (c *applyCmd) confirm(errw io.Writer, p *provision.Plan) error {
	if !c.g.dep().stdinTTY() {
		return usageErr("apply changes this node: run it on a terminal to confirm, or pass --yes (see gpuprep plan --mode %s for what it does)", p.Mode)
	}
	printProvisionPlan(errw, p)
	fmt.Fprint(errw, "\nApply these steps? [y/N] ")
	ans, _ := bufio.NewReader(c.g.dep().confirmInput).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(ans)); a != "y" && a != "yes" {
		return &exitError{code: exitNotReady, err: errors.New("not confirmed: nothing was changed")}
	}
	return nil
}

// closingCheck is apply's exit code: 1 when it failed (aerr, recorded in
// res), 4 when a reboot is needed, else check's, run now (its report in
// res).
func (c *applyCmd) closingCheck(root *host.Root, res *applyResult, aerr error) (int, error) {
	switch {
	case aerr != nil:
		res.Error = aerr.Error()
		return exitNotReady, nil
	case res.Outcome.Reboot:
		return exitNeedReboot, nil
	}
	rep, err := c.check(root)
	if err != nil {
		return 0, err
	}
	res.Report = rep
	return exitCode(rep), nil
}

// writeApplyResult writes res as JSON, or in text its closing check's
// report (the steps were written as they ran).
func writeApplyResult(out io.Writer, text bool, res *applyResult) error {
	if !text {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if res.Report == nil {
		return nil
	}
	fmt.Fprintln(out)
	return report.Text(out, res.Report)
}

// applyExit is apply's exit: code, and for a failure (aerr) what to do
// next.
func applyExit(aerr error, code int) error {
	var rerr *provision.RebootError
	switch {
	case errors.Is(aerr, provision.ErrInterrupted):
		return &exitError{code: 130, err: fmt.Errorf("%w (run gpuprep apply again to continue, or gpuprep rollback to undo)", aerr)}
	case errors.As(aerr, &rerr):
		return &exitError{code: code, err: aerr} // it says what to do
	case aerr != nil:
		return &exitError{code: code, err: fmt.Errorf("%w (run gpuprep apply again to retry, or gpuprep rollback to undo)", aerr)}
	}
	return &exitError{code: code}
}

// check runs gpuprep check for the mode and returns its report.
func (c *applyCmd) check(root *host.Root) (*report.Report, error) {
	mode, _ := preflight.ParseMode(c.mode)
	sel, _ := pci.ParseSelector(c.sel)
	env, err := preflight.NewEnv(root, host.DefaultRunner(root), sel, mode)
	if err != nil {
		return nil, &exitError{code: exitUnknown, err: err}
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{Mode: mode})
	if err != nil {
		return nil, &exitError{code: exitUnknown, err: err}
	}
	return report.Build(env, res, mode), nil
}

// againCommand is this apply's command line, its flags as given (--reboot
// left out: it is not needed to go on), for "run it again" messages.
func againCommand(cmd *cobra.Command) string {
	argv := []string{"gpuprep", "apply"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "reboot" {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				argv = append(argv, "--"+f.Name+"="+v)
			}
			return
		}
		if f.Value.Type() == "bool" && f.Value.String() == "true" {
			argv = append(argv, "--"+f.Name)
			return
		}
		argv = append(argv, "--"+f.Name+"="+f.Value.String())
	})
	return host.ShellQuote(argv)
}
