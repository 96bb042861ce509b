package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/report"
	"github.com/gpuprep/gpuprep/vgpu"
)

// fleetApply is `gpuprep fleet apply`: gpuprep apply on canary hosts
// first, then in batches, stopping when too many hosts fail.
type fleetApply struct {
	*fleetCmd
	canary            int
	batch             int
	maxFailures       int
	rollbackOnFailure bool
	yes               bool
	// vm-vgpu: local files uploaded to the hosts that need them
	vgpuConfigFile string
	vgpuConfig     string
	driver         string
	previousDriver string
	files          map[string]*fleet.File // by local path
	// --nvswitch: apply --nvswitch on vm-passthrough hosts
	nvswitch bool
	// --reboot: apply reboots hosts at the reboot step; fleet apply waits
	reboot        bool
	rebootTimeout time.Duration
	rebootPoll    time.Duration
}

func (c *fleetCmd) applyCommand() *cobra.Command {
	a := &fleetApply{fleetCmd: c}
	cmd := &cobra.Command{
		Use:   "apply -i INVENTORY --mode MODE [--canary N] [--batch K] [--max-failures F] [--rollback-on-failure] [--yes]",
		Short: "gpuprep apply on every host: canary hosts first, then in batches; stop on failures",
		Long: `fleet apply runs "gpuprep apply --mode MODE --yes -o json" on the selected hosts, in
inventory order: first on --canary hosts, then in batches of --batch hosts (at most
--parallel at once). apply ends by running gpuprep check; a host counts as done
only when that check says it is ready.

Every canary must end ready: a canary that fails, or that needs a reboot, stops the
rollout before any other host is touched (reboot the canaries and run fleet apply
again: apply continues where it stopped, hosts already ready are left alone). After
the canaries, the rollout stops after a batch when more than --max-failures hosts
have failed (failed: apply failed or the node is not ready after it, or the host
could not be reached or run). Hosts that need a reboot are not failures: they are
reported, the rollout goes on. Hosts never started are reported as skipped.

--rollback-on-failure runs "gpuprep rollback" on each failed host on which apply
ran (not on hosts that could not be reached): it undoes every change the host's
journal records, newest first, as gpuprep rollback does.

--reboot passes --reboot to apply, so a host that needs a reboot for its kernel
arguments reboots itself at the reboot step (systemctl reboot). fleet apply then
waits for it: every 15 seconds it runs apply again, without --reboot, until apply
goes past the reboot — and ends with its check: the host is then ready or failed
like any other — or until --reboot-timeout (failed: "not back from the reboot").
While apply answers from the boot that asked (its boot ID), the host is not back
yet. A host that rebooted without its arguments taking effect fails with apply's
diagnosis. A host that is back (another boot ID) and whose apply asks for another
reboot for another reason (on an NVSwitch board, container mode's reboot to take
GPUs off VFIO, then nouveau's) is rebooted again by apply --reboot and waited for
(each wait up to --reboot-timeout), at most 3 reboots per host: beyond, it is
reported reboot-needed; asked again for the reason of the reboot just done, the
reboot did not help: failed, with apply's notes. A host is never rebooted twice
in one boot. The report gives each host's reboots and why. The canaries' reboots
are waited for before any other host starts.

--mode vm-vgpu takes --vgpu-config-file and --driver as local files: they are
uploaded (by SHA-256, into the login user's cache, reused while unchanged) to the
vm-vgpu hosts only, with --vgpu-config; the host variables gpuprep_vgpu_config_file
and gpuprep_driver (paths on the host) and gpuprep_vgpu_config replace them per host.
The config file, and the config name of each host, are checked before any host is
contacted; the driver is verified by apply on the host (the canary first).
A --driver of another version than the hosts have is the vGPU manager's upgrade
(apply's vgpu-install step changes the version, and rollback changes it back):
the canary changes version and must end ready before any other host starts.
--previous-driver (host variable gpuprep_previous_driver) uploads the installer of
the version the hosts have, for hosts gpuprep did not install it on.

The report shows each host's phase (canary, batch N, skipped) and outcome (ready,
reboot-needed, failed, rolled-back, rollback-failed, cancelled, skipped), with
apply's output, the check report it embeds, and the rollback's output.
--dry-run lists the phases without connecting. It asks before starting when
standard input is a terminal; --yes skips the question, and without a terminal
--yes is required.

Exit codes: 0 every host applied and ready, 1 a host failed (or the rollout
stopped on failures), 2 usage error, 3 interrupted, 4 no failures but a host needs
a reboot (including canaries, which then stopped the rollout).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&c.mode, "mode", "", "workload type to apply on every host (default: each host's inventory mode): container, vm-passthrough or vm-vgpu")
	f.StringArrayVar(&c.sel, "select", nil, "passed to gpuprep apply on every host (per host: the inventory variable gpuprep_select, comma-separated, replaces it)")
	f.IntVar(&a.canary, "canary", 1, "hosts applied and verified first, before any other host; every one must end ready (0: no canary)")
	f.IntVar(&a.batch, "batch", 10, "hosts per batch after the canaries")
	f.IntVar(&a.maxFailures, "max-failures", 0, "stop the rollout (after a batch) when more than this many hosts failed")
	f.BoolVar(&a.rollbackOnFailure, "rollback-on-failure", false, "run gpuprep rollback on each host where apply failed")
	f.BoolVarP(&a.yes, "yes", "y", false, "do not ask for confirmation")
	f.BoolVar(&a.nvswitch, "nvswitch", false, "vm-passthrough hosts: bind the NVSwitches to VFIO with the GPUs (apply --nvswitch), for VMs given whole boards with their NVLink fabric")
	f.BoolVar(&a.reboot, "reboot", false, "let apply reboot hosts at the reboot step (systemctl reboot), wait for each to come back, and run apply again to finish and verify it")
	f.DurationVar(&a.rebootTimeout, "reboot-timeout", 20*time.Minute, "with --reboot: how long a host may take to reboot and finish")
	f.DurationVar(&a.rebootPoll, "reboot-poll", 15*time.Second, "with --reboot: time between tries to reach a rebooting host")
	_ = f.MarkHidden("reboot-poll")
	f.StringVar(&a.vgpuConfigFile, "vgpu-config-file", "", "vm-vgpu: local vgpu-device-manager config file, uploaded to each vm-vgpu host (per host: the variable gpuprep_vgpu_config_file, a path on the host, replaces it)")
	f.StringVar(&a.vgpuConfig, "vgpu-config", "", "vm-vgpu: the config in it to create and label (per host: the variable gpuprep_vgpu_config replaces it)")
	f.StringVar(&a.driver, "driver", "", "vm-vgpu: local vGPU manager installer (.run, .deb or .rpm), uploaded to each vm-vgpu host (per host: the variable gpuprep_driver, a path on the host, replaces it)")
	f.StringVar(&a.previousDriver, "previous-driver", "", "vm-vgpu: with a --driver of another version, the installer of the version the hosts have, uploaded as --driver is, for hosts gpuprep did not install it on (per host: the variable gpuprep_previous_driver)")
	return cmd
}

// vgpuArgs are apply's vm-vgpu arguments for h: a local file is named by
// its fleet.File reference (uploaded, then replaced by its path on the
// host), a host variable by its value.
func (a *fleetApply) vgpuArgs(h *fleet.Host) []string {
	var args []string
	file := func(flag, local, hostVar string) {
		switch {
		case h.Var(hostVar) != "":
			args = append(args, flag, h.Var(hostVar))
		case local != "":
			args = append(args, flag, a.files[local].Ref())
		}
	}
	file("--vgpu-config-file", a.vgpuConfigFile, "gpuprep_vgpu_config_file")
	name := a.vgpuConfig
	if v := h.Var("gpuprep_vgpu_config"); v != "" {
		name = v
	}
	if name != "" {
		args = append(args, "--vgpu-config", name)
	}
	file("--driver", a.driver, "gpuprep_driver")
	file("--previous-driver", a.previousDriver, "gpuprep_previous_driver")
	return args
}

// checkVGPU loads the local vGPU files and checks, before any host is
// contacted, that every vm-vgpu host has a config file and a config name
// (the config in the local file, and the label value, valid), and that no
// vGPU flag is given without a vm-vgpu host.
func (a *fleetApply) checkVGPU(hosts []*fleet.Host) error {
	a.files = map[string]*fleet.File{}
	var cfg *vgpu.Config
	if a.vgpuConfigFile != "" {
		c, err := vgpu.LoadConfig(a.vgpuConfigFile)
		if err != nil {
			return usageErr("--vgpu-config-file: %v", err)
		}
		cfg = c
	}
	for _, p := range []string{a.vgpuConfigFile, a.driver, a.previousDriver} {
		if p == "" {
			continue
		}
		f, err := fleet.LoadFile(p)
		if err != nil {
			return usageErr("%v", err)
		}
		a.files[p] = f
	}
	// The driver is verified where it is installed (the canary's apply
	// refuses a wrong one before any other host is started): this machine
	// may not be of the hosts' architecture.
	var any bool
	var miss []string
	for _, h := range hosts {
		if a.hostMode(h) != string(preflight.VMVGPU) {
			continue
		}
		any = true
		name := a.vgpuConfig
		if v := h.Var("gpuprep_vgpu_config"); v != "" {
			name = v
		}
		switch {
		case a.vgpuConfigFile == "" && h.Var("gpuprep_vgpu_config_file") == "":
			miss = append(miss, h.Name+": a vgpu-device-manager config (--vgpu-config-file, or the variable gpuprep_vgpu_config_file)")
		case name == "":
			miss = append(miss, h.Name+": the config to create (--vgpu-config, or the variable gpuprep_vgpu_config)")
		}
		if name == "" {
			continue
		}
		if err := kube.ValidateLabelValue(kube.VGPUConfigLabel, name); err != nil {
			return usageErr("%s: vgpu config: %v", h.Name, err)
		}
		if cfg != nil && h.Var("gpuprep_vgpu_config_file") == "" {
			if _, err := cfg.Select(name); err != nil {
				return usageErr("%s: %v", h.Name, err)
			}
		}
	}
	if len(miss) > 0 {
		return usageErr("vm-vgpu hosts need:\n  %s", strings.Join(miss, "\n  "))
	}
	if !any && (a.vgpuConfigFile != "" || a.vgpuConfig != "" || a.driver != "" || a.previousDriver != "") {
		return usageErr("--vgpu-config-file, --vgpu-config and --driver apply to vm-vgpu hosts, and no selected host has mode vm-vgpu")
	}
	if a.nvswitch && !slices.ContainsFunc(hosts, func(h *fleet.Host) bool { return a.hostMode(h) == string(preflight.VMPassthrough) }) {
		return usageErr("--nvswitch applies to vm-passthrough hosts, and no selected host has mode vm-passthrough")
	}
	return nil
}

// phase is a group of hosts applied together.
type phase struct {
	name  string
	hosts []*fleet.Host
}

func (a *fleetApply) phases(hosts []*fleet.Host) []phase {
	var out []phase
	n := min(a.canary, len(hosts))
	if n > 0 {
		out = append(out, phase{name: "canary", hosts: hosts[:n]})
	}
	for i, b := n, 1; i < len(hosts); i, b = i+a.batch, b+1 {
		out = append(out, phase{name: fmt.Sprintf("batch %d", b), hosts: hosts[i:min(i+a.batch, len(hosts))]})
	}
	return out
}

func (a *fleetApply) applyArgs(h *fleet.Host) ([]string, error) {
	args := []string{"apply", "--mode", a.hostMode(h), "--yes", "-o", "json"}
	for _, s := range a.hostSelect(h) {
		args = append(args, "--select", s)
	}
	if a.hostMode(h) == string(preflight.VMVGPU) {
		args = append(args, a.vgpuArgs(h)...)
	}
	if a.nvswitch && a.hostMode(h) == string(preflight.VMPassthrough) {
		args = append(args, "--nvswitch")
	}
	if a.reboot {
		args = append(args, "--reboot")
	}
	return a.remoteArgs(h, args)
}

// resumeArgs are apply's arguments after a reboot: the same, but never
// --reboot (an apply that still asks for a reboot exits 4 and the wait
// goes on; it never reboots the host again).
func (a *fleetApply) resumeArgs(h *fleet.Host) ([]string, error) {
	args, err := a.applyArgs(h)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(args, func(s string) bool { return s == "--reboot" }), nil
}

func (a *fleetApply) rollbackArgs(h *fleet.Host) ([]string, error) {
	return a.remoteArgs(h, []string{"rollback", "-o", "json"})
}

func (a *fleetApply) run(cmd *cobra.Command) error {
	if !validFormat(a.output) {
		return usageErr("--output %q: want text, json, junit, markdown or html", a.output)
	}
	if a.mode != "" {
		if _, err := preflight.ParseMode(a.mode); err != nil {
			return usageErr("--mode: %v", err)
		}
	}
	if a.canary < 0 {
		return usageErr("--canary %d: want 0 or more", a.canary)
	}
	if a.batch < 1 {
		return usageErr("--batch %d: want at least 1", a.batch)
	}
	if a.maxFailures < 0 {
		return usageErr("--max-failures %d: want 0 or more", a.maxFailures)
	}
	if a.rebootTimeout <= 0 || a.rebootPoll <= 0 {
		return usageErr("--reboot-timeout and --reboot-poll: want positive durations")
	}
	if err := a.checkConnectionFlags(); err != nil {
		return err
	}
	hosts, err := a.hosts()
	if err != nil {
		return err
	}
	var noMode []string
	for _, h := range hosts {
		m := a.hostMode(h)
		if m == "" {
			noMode = append(noMode, h.Name)
		} else if _, err := preflight.ParseMode(m); err != nil {
			return usageErr("%s: mode: %v", h.Name, err)
		}
	}
	if len(noMode) > 0 {
		return usageErr("no mode for %s: give --mode, or a mode in the inventory (mode, or the variable gpuprep_mode)", strings.Join(noMode, ", "))
	}
	if err := a.checkVGPU(hosts); err != nil {
		return err
	}
	phases := a.phases(hosts)
	if a.dryRun {
		return a.printPlan(cmd.OutOrStdout(), phases)
	}
	if !a.yes {
		if !stdinTTY() {
			return usageErr("fleet apply changes %d hosts: run it on a terminal to confirm, or pass --yes (--dry-run shows the phases)", len(hosts))
		}
		errw := cmd.ErrOrStderr()
		if err := a.printPlan(errw, phases); err != nil {
			return err
		}
		fmt.Fprint(errw, "\nApply on these hosts, in this order? [y/N] ")
		ans, _ := bufio.NewReader(confirmInput).ReadString('\n')
		if s := strings.ToLower(strings.TrimSpace(ans)); s != "y" && s != "yes" {
			return &exitError{code: exitNotReady, err: errors.New("not confirmed: nothing was changed")}
		}
	}
	sess, err := a.connect(cmd)
	if err != nil {
		return err
	}
	defer sess.close()
	for _, f := range a.files {
		sess.exec.Files = append(sess.exec.Files, f)
	}
	fr := a.rollout(cmd, sess, phases)

	out := cmd.OutOrStdout()
	err = report.Render(out, &report.Document{Fleet: fr}, a.output)
	if err != nil {
		return err
	}
	return &exitError{code: applyExitCode(fr)}
}

// rollout runs the phases in order and builds the report.
func (a *fleetApply) rollout(cmd *cobra.Command, sess *fleetSession, phases []phase) *report.FleetReport {
	ctx, errw := sess.ctx, cmd.ErrOrStderr()
	ro := &report.Rollout{Canary: a.canary, Batch: a.batch, MaxFailures: a.maxFailures, RollbackOnFailure: a.rollbackOnFailure, Reboot: a.reboot}
	if a.reboot {
		ro.MaxReboots = maxReboots
	}
	fr := &report.FleetReport{Mode: a.mode, Rollout: ro}
	runner := func(args func(*fleet.Host) ([]string, error), done func(*fleet.Result, int, int)) *fleet.Runner {
		return &fleet.Runner{Transport: sess.tr, Exec: sess.exec, Parallel: a.parallel, Retries: a.retries,
			CommandTimeout: a.commandTimeout, Args: args, Done: done}
	}
	for pi, ph := range phases {
		if ro.Stopped != "" || ctx.Err() != nil {
			if ro.Stopped == "" {
				ro.Stopped = "interrupted"
			}
			for _, h := range ph.hosts {
				fr.Hosts = append(fr.Hosts, report.FleetHost{Name: h.Name, Address: h.Target(), Status: report.OutcomeSkipped,
					Error: "not started: " + ro.Stopped, Mode: a.hostMode(h), Phase: report.OutcomeSkipped, Outcome: report.OutcomeSkipped})
			}
			continue
		}
		fmt.Fprintf(errw, "gpuprep fleet apply: %s: %d host(s)\n", ph.name, len(ph.hosts))
		prog := newProgress(errw)
		results := runner(a.applyArgs, prog.done).Run(ctx, ph.hosts)
		prog.finish()
		entries := make([]report.FleetHost, len(results))
		started := make([]bool, len(results))
		for i, res := range results {
			entries[i], started[i] = a.applied(res)
		}
		if a.reboot && ctx.Err() == nil {
			a.waitReboots(ctx, errw, sess, results, entries)
		}
		var back []*fleet.Host
		var backIdx []int
		var failed, unverified []string
		for i, res := range results {
			e := entries[i]
			e.Phase = ph.name
			switch e.Outcome {
			case report.OutcomeFailed:
				failed = append(failed, e.Name)
				// not a host whose reboot was never seen through: it may be
				// booting, and its state is unknown
				if started[i] && a.rollbackOnFailure && (e.Reboot == nil || e.Reboot.Completed) {
					back, backIdx = append(back, res.Host), append(backIdx, i)
				}
			case report.OutcomeRebootNeeded, report.OutcomeCancelled:
				unverified = append(unverified, e.Name)
			}
			entries[i] = e
		}
		ro.Failures += len(failed)
		if len(back) > 0 && ctx.Err() == nil {
			fmt.Fprintf(errw, "gpuprep fleet apply: rolling back %s\n", report.Clean(strings.Join(back2names(back), ", ")))
			prog := newProgress(errw)
			rb := runner(a.rollbackArgs, prog.done).Run(ctx, back)
			prog.finish()
			for j, res := range rb {
				e := &entries[backIdx[j]]
				e.Rollback = rolledBack(res)
				e.Outcome = report.OutcomeRolledBack
				if e.Rollback.Error != "" {
					e.Outcome = report.OutcomeRollbackFailed
				}
			}
		}
		fr.Hosts = append(fr.Hosts, entries...)
		last := pi == len(phases)-1
		switch {
		case ctx.Err() != nil:
			ro.Stopped = "interrupted"
		case ph.name == "canary" && len(failed) > 0:
			ro.Stopped = fmt.Sprintf("canary %s failed: no other host was started", strings.Join(failed, ", "))
		case ph.name == "canary" && len(unverified) > 0:
			ro.Stopped = fmt.Sprintf("canary %s not verified ready (reboot needed): reboot it and run fleet apply again", strings.Join(unverified, ", "))
		case ro.Failures > a.maxFailures && !last:
			ro.Stopped = fmt.Sprintf("%d host(s) failed, more than --max-failures %d: stopped after %s", ro.Failures, a.maxFailures, ph.name)
		}
		if ro.Stopped != "" && !last {
			fmt.Fprintf(errw, "gpuprep fleet apply: rollout stopped: %s\n", report.Clean(ro.Stopped))
		}
	}
	fr.Interrupted = ctx.Err() != nil
	if ro.Stopped == "interrupted" {
		fmt.Fprintln(errw, "gpuprep fleet: interrupted; the report shows the hosts that finished")
	}
	fr.Finish()
	return fr
}

// maxReboots is how many times fleet apply --reboot lets apply reboot one
// host: the first reboot and, each time the host comes back and apply asks
// for another reboot for another reason, one more.
const maxReboots = 3

// hostAsk is a reboot apply asked for (and, with --reboot, ran): the boot
// that asked and why, as apply -o json says them ("" where it does not:
// an older gpuprep, an unreadable boot ID, an answer lost with the
// connection).
type hostAsk struct{ boot, reason string }

// applyOutcome is apply's outcome in e's output; nil without one.
func applyOutcome(e report.FleetHost) (*provision.Outcome, []string) {
	var ar applyResult
	if len(e.Output) == 0 || json.Unmarshal(e.Output, &ar) != nil || ar.Outcome == nil {
		return nil, nil
	}
	return ar.Outcome, ar.Log
}

// rebootedSince says whether o, an apply's outcome, comes from a boot after
// the one that asked for ask: its boot ID differs, or apply answered an ask
// the node has rebooted since.
func rebootedSince(ask hostAsk, o *provision.Outcome) bool {
	return o != nil && (ask.boot != "" && o.BootID != "" && o.BootID != ask.boot || len(o.RebootedFor) > 0)
}

// applyNotes are apply's own notes in its log (why the step could not do
// without the reboot), else its last line.
func applyNotes(log []string) string {
	var notes []string
	for _, l := range log {
		if n, ok := strings.CutPrefix(l, "note: "); ok {
			notes = append(notes, n)
		}
	}
	if len(notes) == 0 && len(log) > 0 {
		notes = log[len(log)-1:]
	}
	return strings.Join(notes, "; ")
}

// waitReboots follows the hosts whose apply (run with --reboot) stopped at
// the reboot step, or lost its connection as the host went down: it runs
// apply again (without --reboot) every --reboot-poll until apply answers
// past the reboot — it then ends with its check, or says the reboot did not
// make the arguments effective — or until --reboot-timeout. Until then
// anything short of such an answer means the host is not back yet: it
// cannot be reached, refuses logins (pam_nologin while booting), its
// services or home are not up, apply was killed by the shutdown, or apply
// still asks for the reboot in the boot that asked (its boot ID). Only a
// changed host key, and an apply that outlives --command-timeout, end the
// wait early.
//
// An apply that answers from a later boot (another boot ID, or an ask it
// found the node rebooted since) and asks for another reboot: for the
// reason just served, the reboot did not help (failed, never rebooted
// again); for another reason, apply --reboot reboots the host once more
// and the wait starts over, up to maxReboots reboots in all (beyond,
// reboot-needed). A host is rebooted at most once per boot: never twice
// for the same ask.
func (a *fleetApply) waitReboots(ctx context.Context, errw io.Writer, sess *fleetSession, results []*fleet.Result, entries []report.FleetHost) {
	var idx []int
	for i, e := range entries {
		if e.Outcome == report.OutcomeRebootNeeded || e.Outcome == report.OutcomeFailed && (lostConnection(results[i]) || commandTimedOut(results[i])) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	names := make([]string, len(idx))
	for j, i := range idx {
		names[j] = results[i].Host.Name
	}
	var mu sync.Mutex // errw
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		// one line: a host's name or error cannot add one, nor act on the terminal
		fmt.Fprintln(errw, report.Clean(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")))
	}
	say("gpuprep fleet apply: waiting for %s to reboot (at most %s)\n", strings.Join(names, ", "), a.rebootTimeout)
	start := time.Now()
	sem := make(chan struct{}, a.parallel)
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := results[i].Host
			var ask hostAsk
			if o, _ := applyOutcome(entries[i]); o != nil {
				ask = hostAsk{boot: o.BootID, reason: o.RebootFor}
			}
			rh := &report.HostReboot{Reboots: 1, Reasons: []string{ask.reason}}
			entries[i].Reboot = rh
			deadline := time.Now().Add(a.rebootTimeout)
			stillAsks := "apply still asks for the reboot"
			why := stillAsks
			if lostConnection(results[i]) || commandTimedOut(results[i]) {
				why += "; the connection was lost before apply answered, so the reboot may never have started: run fleet apply --reboot for this host again"
			}
			r := &fleet.Runner{Transport: sess.tr, Exec: sess.exec, Parallel: 1, CommandTimeout: a.commandTimeout, Args: a.resumeArgs}
			// once runs apply (args) on h, one attempt bounded by the
			// deadline (and the command timeout); ok false: interrupted
			// or out of time before it could start
			once := func(args func(*fleet.Host) ([]string, error)) (*fleet.Result, bool) {
				actx, cancel := context.WithDeadline(ctx, deadline.Add(a.commandTimeout))
				defer cancel()
				select {
				case sem <- struct{}{}:
				case <-actx.Done():
					return nil, false
				}
				defer func() { <-sem }()
				r.Args = args
				return r.Run(actx, []*fleet.Host{h})[0], true
			}
			for rh.Error == "" && !rh.Completed {
				select {
				case <-ctx.Done():
				case <-time.After(min(a.rebootPoll, time.Until(deadline))):
				}
				switch {
				case ctx.Err() != nil:
					rh.Error = "interrupted while waiting for the reboot"
					continue
				case !time.Now().Before(deadline):
					nth := ""
					if rh.Reboots > 1 {
						nth = fmt.Sprintf(" (reboot %d, for %s)", rh.Reboots, cmp.Or(ask.reason, "?"))
					}
					rh.Error = fmt.Sprintf("not back from the reboot%s within %s (%s)", nth, a.rebootTimeout, why)
					continue
				}
				res, ok := once(a.resumeArgs)
				if !ok {
					continue
				}
				rh.Attempts++
				e, _ := a.applied(res)
				o, log := applyOutcome(e)
				if last := len(rh.Reasons) - 1; rh.Reasons[last] == "" && rebootedSince(ask, o) {
					// the reboot whose ask was lost with the connection: why, as the apply after it says
					rh.Reasons[last] = strings.Join(o.RebootedFor, ", ")
				}
				switch {
				case ctx.Err() != nil:
				case res.Status == fleet.StatusHostKeyChanged:
					entries[i] = e
					rh.Error = "the host came back with another host key: " + firstLineOf(res.Err)
				case commandTimedOut(res):
					entries[i] = e
					rh.Error = "apply did not finish after the reboot: " + firstLineOf(res.Err)
				case res.Status == fleet.StatusEvaluated && e.Output != nil && e.Outcome != report.OutcomeRebootNeeded:
					entries[i] = e // apply answered past the reboot: ready, or failed saying why
					rh.Completed = true
				case e.Outcome == report.OutcomeRebootNeeded && rebootedSince(ask, o):
					// back, in a later boot, and apply asks for another reboot
					entries[i] = e
					rh.Completed = true
					served := ask.reason
					if served == "" {
						served = strings.Join(o.RebootedFor, ", ")
					}
					again := cmp.Or(o.RebootFor, "?")
					switch {
					case o.RebootFor != "" && (o.RebootFor == ask.reason || slices.Contains(o.RebootedFor, o.RebootFor)):
						entries[i].Outcome = report.OutcomeFailed
						entries[i].Error = fmt.Sprintf("apply asks again for a reboot for %s after its reboot for %s: the reboot did not make the change effective; not rebooted again (apply: %s)",
							again, served, cmp.Or(applyNotes(log), "no note"))
					case rh.Reboots >= maxReboots:
						entries[i].Error = fmt.Sprintf("apply asks for reboot %d, for %s, after %d (%s): fleet apply reboots a host at most %d times; reboot it and run fleet apply again",
							rh.Reboots+1, again, rh.Reboots, rh.Why(), maxReboots)
					default:
						rh.Completed = false
						say("gpuprep fleet: %s is back after its reboot for %s, and apply asks for another, for %s: apply --reboot reboots it again (reboot %d of at most %d)\n",
							h.Name, cmp.Or(served, "?"), again, rh.Reboots+1, maxReboots)
						deadline = time.Now().Add(a.rebootTimeout)
						res, ok := once(a.applyArgs)
						if !ok {
							continue
						}
						rh.Attempts++
						e2, started := a.applied(res)
						o2, _ := applyOutcome(e2)
						switch {
						case ctx.Err() != nil:
						case !started: // apply did not run: nothing rebooted; the next try asks again
							why = "last try: " + cmp.Or(firstLineOf(strings.TrimSpace(e2.Error)), res.Status)
						case res.Status == fleet.StatusEvaluated && e2.Output != nil && e2.Outcome != report.OutcomeRebootNeeded:
							entries[i] = e2
							rh.Completed = true
						default: // rebooting (or cut by the reboot): wait for it
							ask = hostAsk{boot: o.BootID, reason: o.RebootFor}
							if o2 != nil {
								ask = hostAsk{boot: cmp.Or(o2.BootID, o.BootID), reason: cmp.Or(o2.RebootFor, o.RebootFor)}
							}
							rh.Reboots++
							rh.Reasons = append(rh.Reasons, ask.reason)
							why = stillAsks
							if lostConnection(res) || commandTimedOut(res) {
								why += "; the connection was lost before apply answered, so this reboot may never have started"
							}
						}
					}
				default: // not back yet
					if e.Outcome != report.OutcomeRebootNeeded {
						why = "last try: " + cmp.Or(firstLineOf(strings.TrimSpace(e.Error)), res.Status)
					}
				}
			}
			rh.WaitedMs = time.Since(start).Milliseconds()
			entries[i].Reboot = rh
			if rh.Completed {
				after := "its reboot"
				if rh.Reboots > 1 {
					after = fmt.Sprintf("%d reboots", rh.Reboots)
				}
				msg := ""
				if e := entries[i]; e.Outcome != report.OutcomeReady && e.Error != "" {
					msg = ": " + e.Error
				}
				say("gpuprep fleet: %s %s after %s (%s)%s\n", h.Name, entries[i].Outcome, after, time.Since(start).Round(time.Second), msg)
				return
			}
			e := &entries[i]
			e.Outcome, e.Error = report.OutcomeFailed, "reboot: "+rh.Error
			if ctx.Err() != nil {
				e.Outcome = report.OutcomeCancelled
			}
			say("gpuprep fleet: %s %s: %s\n", h.Name, e.Outcome, e.Error)
		}()
	}
	wg.Wait()
}

// commandTimedOut: the host answered, but gpuprep outlived --command-timeout.
func commandTimedOut(res *fleet.Result) bool { return res.CommandTimedOut }

// lostConnection says whether a run ended because the connection went
// away mid-command, as it does when the host goes down for its reboot.
func lostConnection(res *fleet.Result) bool { return res.ConnectionLost }

func back2names(hosts []*fleet.Host) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.Name
	}
	return out
}

// applied turns a host's apply run into its report entry; started says
// whether apply may have changed the host (so a rollback makes sense).
func (a *fleetApply) applied(res *fleet.Result) (report.FleetHost, bool) {
	h := report.FleetHost{Name: res.Host.Name, Address: res.Host.Target(), Status: res.Status, Error: res.Err,
		Mode: a.hostMode(res.Host), DurationMs: res.Duration.Milliseconds()}
	switch res.Status {
	case fleet.StatusEvaluated:
	case fleet.StatusCancelled:
		h.Outcome = report.OutcomeCancelled
		return h, false
	case fleet.StatusTimeout, fleet.StatusError: // apply may have run
		h.Outcome = report.OutcomeFailed
		return h, true
	default: // never ran: unreachable, auth, host keys
		h.Outcome = report.OutcomeFailed
		return h, false
	}
	o := res.Output
	code := o.ExitCode
	h.ExitCode, h.Stderr = &code, string(o.Stderr)
	var ar applyResult
	if json.Unmarshal(o.Stdout, &ar) != nil || ar.Kind != "ApplyResult" {
		h.Stdout = string(o.Stdout)
		h.Outcome = report.OutcomeFailed
		h.Error = fmt.Sprintf("gpuprep apply exited %d without an ApplyResult: %s", code, tail(o.Stderr))
		return h, code != exitUsage
	}
	h.Output = json.RawMessage(o.Stdout)
	h.Report = ar.Report
	switch {
	case code == exitOK && ar.Report != nil && report.Verdict(ar.Report) == report.VerdictReady:
		h.Outcome = report.OutcomeReady
	case code == exitNeedReboot:
		h.Outcome = report.OutcomeRebootNeeded
	default:
		h.Outcome = report.OutcomeFailed
		switch {
		case ar.Error != "":
			h.Error = ar.Error
		case ar.Report != nil:
			h.Error = "not ready after apply: " + report.Verdict(ar.Report)
		default:
			h.Error = fmt.Sprintf("gpuprep apply exited %d: %s", code, tail(o.Stderr))
		}
	}
	return h, true
}

func rolledBack(res *fleet.Result) *report.HostRollback {
	rb := &report.HostRollback{Status: res.Status, Error: res.Err}
	if res.Status != fleet.StatusEvaluated {
		return rb
	}
	code := res.Output.ExitCode
	rb.ExitCode, rb.Stderr = &code, string(res.Output.Stderr)
	if json.Valid(res.Output.Stdout) && strings.TrimSpace(string(res.Output.Stdout)) != "" {
		rb.Output = json.RawMessage(res.Output.Stdout)
	}
	if code != exitOK && code != exitNeedReboot {
		rb.Error = fmt.Sprintf("gpuprep rollback exited %d: %s", code, tail(res.Output.Stderr))
	}
	rb.RebootRequired = code == exitNeedReboot
	return rb
}

// applyExitCode: 1 a host failed, else 3 interrupted, else 4 a host needs a
// reboot (or a rollout stopped on one), else 0.
func applyExitCode(f *report.FleetReport) int {
	n := map[string]int{}
	for _, h := range f.Hosts {
		n[h.Outcome]++
	}
	switch {
	case f.Rollout.Failures > 0:
		return exitNotReady
	case f.Interrupted || n[report.OutcomeCancelled] > 0:
		return exitUnknown
	case n[report.OutcomeRebootNeeded] > 0:
		return exitNeedReboot
	case n[report.OutcomeSkipped] > 0: // cannot happen without one of the above
		return exitNotReady
	}
	return exitOK
}

// showFiles names uploaded files in shown arguments: "upload:LOCAL-PATH".
func (a *fleetApply) showFiles(args []string) []string {
	out := slices.Clone(args)
	for i := range out {
		for local, f := range a.files {
			out[i] = strings.ReplaceAll(out[i], f.Ref(), "upload:"+local)
		}
	}
	return out
}

// printPlan lists the phases and what each host would run.
func (a *fleetApply) printPlan(w io.Writer, phases []phase) error {
	type entry struct {
		*fleet.Host
		Phase  string   `json:"phase"`
		Target string   `json:"target"`
		Args   []string `json:"gpuprepArgs"`
	}
	var list []entry
	for _, ph := range phases {
		for _, h := range ph.hosts {
			args, err := a.applyArgs(h)
			if err != nil {
				return err
			}
			list = append(list, entry{Host: h, Phase: ph.name, Target: h.Target(), Args: a.showFiles(args)})
		}
	}
	if a.output == "json" && a.dryRun {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": report.APIVersion, "kind": "FleetPlan", "hosts": list,
			"rollout": report.Rollout{Canary: a.canary, Batch: a.batch, MaxFailures: a.maxFailures, RollbackOnFailure: a.rollbackOnFailure}})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tHOST\tCONNECT\tGPUPREP ARGS")
	for _, e := range list {
		q, _ := fleet.QuoteArgs(a.showFiles(e.Args)...)
		fmt.Fprintf(tw, "%s\t%s\t%s@%s\t%s\n", e.Phase, report.Clean(e.Name), report.Clean(e.User), report.Clean(e.Target), report.Clean(q))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rb := ""
	if a.rollbackOnFailure {
		rb = "; gpuprep rollback on each host that fails"
	}
	fmt.Fprintf(w, "\n%d hosts in %d phase(s): every canary must end ready; then stop after a batch once more than %d host(s) failed%s.\n",
		len(list), len(phases), a.maxFailures, rb)
	if a.dryRun {
		fmt.Fprintln(w, "Dry run: no host was contacted.")
	}
	return nil
}
