package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/internal/fleet/rollout"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
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
	cfg, err := a.loadFiles()
	if err != nil {
		return err
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
		m, err := a.checkVGPUHost(h, cfg)
		if err != nil {
			return err
		}
		if m != "" {
			miss = append(miss, m)
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

// loadFiles loads the local files given (--vgpu-config-file, --driver,
// --previous-driver) into a.files, and returns the vGPU config file's
// configs (nil when none is given).
func (a *fleetApply) loadFiles() (*vgpu.Config, error) {
	a.files = map[string]*fleet.File{}
	var cfg *vgpu.Config
	if a.vgpuConfigFile != "" {
		c, err := vgpu.LoadConfig(a.vgpuConfigFile)
		if err != nil {
			return nil, usageErr("--vgpu-config-file: %v", err)
		}
		cfg = c
	}
	for _, p := range []string{a.vgpuConfigFile, a.driver, a.previousDriver} {
		if p == "" {
			continue
		}
		f, err := fleet.LoadFile(p)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		a.files[p] = f
	}
	return cfg, nil
}

// checkVGPUHost checks vm-vgpu host h's config name (valid as a label
// value, and in cfg, the local config file, when h takes that one); miss
// says what h lacks ("" when nothing).
func (a *fleetApply) checkVGPUHost(h *fleet.Host, cfg *vgpu.Config) (miss string, _ error) {
	name := a.vgpuConfig
	if v := h.Var("gpuprep_vgpu_config"); v != "" {
		name = v
	}
	switch {
	case a.vgpuConfigFile == "" && h.Var("gpuprep_vgpu_config_file") == "":
		miss = h.Name + ": a vgpu-device-manager config (--vgpu-config-file, or the variable gpuprep_vgpu_config_file)"
	case name == "":
		miss = h.Name + ": the config to create (--vgpu-config, or the variable gpuprep_vgpu_config)"
	}
	if name == "" {
		return miss, nil
	}
	if err := kube.ValidateLabelValue(kube.VGPUConfigLabel, name); err != nil {
		return "", usageErr("%s: vgpu config: %v", h.Name, err)
	}
	if cfg != nil && h.Var("gpuprep_vgpu_config_file") == "" {
		if _, err := cfg.Select(name); err != nil {
			return "", usageErr("%s: %v", h.Name, err)
		}
	}
	return miss, nil
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
	if err := a.checkFlags(); err != nil {
		return err
	}
	hosts, err := a.hosts()
	if err != nil {
		return err
	}
	if err := a.checkHostModes(hosts); err != nil {
		return err
	}
	if err := a.checkVGPU(hosts); err != nil {
		return err
	}
	phases := rollout.Phases(hosts, a.canary, a.batch)
	if a.dryRun {
		return a.printPlan(cmd.OutOrStdout(), phases)
	}
	if !a.yes {
		if err := a.confirm(cmd, phases, len(hosts)); err != nil {
			return err
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
	st, interrupted, err := rollout.Run(sess.ctx, a.deps(cmd, sess), a.options(), a.plan(phases))
	if err != nil {
		return err
	}
	err = st.Render(cmd.OutOrStdout(), a.output, interrupted)
	if cerr := st.Close(interrupted); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return &exitError{code: rollout.ExitCode(st.Report(interrupted))}
}

// checkFlags validates fleet apply's own flags, then the connection flags.
func (a *fleetApply) checkFlags() error {
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
	return a.checkConnectionFlags()
}

// checkHostModes checks that every host has a valid mode, and that no host
// to --reboot is the machine running the rollout.
func (a *fleetApply) checkHostModes(hosts []*fleet.Host) error {
	var noMode []string
	for _, h := range hosts {
		if h.Local && a.reboot {
			// apply --reboot on it would reboot the machine running the rollout
			return usageErr("host %s has connection local (this machine): --reboot would reboot the machine running fleet apply; leave it out (--limit '!%s') or reboot it yourself", h.Name, h.Name)
		}
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
	return nil
}

// confirm shows the phases on stderr and asks whether to apply on the n
// hosts; an error unless the answer is yes (on no terminal, without
// asking).
func (a *fleetApply) confirm(cmd *cobra.Command, phases []rollout.Phase, n int) error {
	if !a.g.dep().stdinTTY() {
		return usageErr("fleet apply changes %s: run it on a terminal to confirm, or pass --yes (--dry-run shows the phases)", plural.N(n, "host"))
	}
	errw := cmd.ErrOrStderr()
	if err := a.printPlan(errw, phases); err != nil {
		return err
	}
	fmt.Fprint(errw, "\nApply on these hosts, in this order? [y/N] ")
	ans, _ := bufio.NewReader(a.g.dep().confirmInput).ReadString('\n')
	if s := strings.ToLower(strings.TrimSpace(ans)); s != "y" && s != "yes" {
		return &exitError{code: exitNotReady, err: errors.New("not confirmed: nothing was changed")}
	}
	return nil
}

func (a *fleetApply) options() rollout.Options {
	return rollout.Options{Canary: a.canary, Batch: a.batch, MaxFailures: a.maxFailures, RollbackOnFailure: a.rollbackOnFailure,
		Reboot: a.reboot, RebootTimeout: a.rebootTimeout, RebootPoll: a.rebootPoll,
		Parallel: a.parallel, Retries: a.retries, CommandTimeout: a.commandTimeout}
}

func (a *fleetApply) plan(phases []rollout.Phase) rollout.Plan {
	return rollout.Plan{Phases: phases, Mode: a.mode, HostMode: a.hostMode, Apply: a.applyArgs, Resume: a.resumeArgs, Rollback: a.rollbackArgs}
}

func (a *fleetApply) deps(cmd *cobra.Command, sess *fleetSession) rollout.Deps {
	errw := cmd.ErrOrStderr()
	return rollout.Deps{Runner: rollout.SSH{Transport: sess.tr, Exec: sess.exec}, Log: errw,
		Progress: func() rollout.Progress { return progressDisplay{newProgress(errw)} }}
}

// progressDisplay is the fleet commands' progress as the rollout shows it.
type progressDisplay struct{ *progress }

func (p progressDisplay) Done(r *fleet.Result, done, total int) { p.done(r, done, total) }
func (p progressDisplay) Finish()                               { p.finish() }

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
func (a *fleetApply) printPlan(w io.Writer, phases []rollout.Phase) error {
	type entry struct {
		*fleet.Host
		Phase  string   `json:"phase"`
		Target string   `json:"target"`
		Args   []string `json:"gpuprepArgs"`
	}
	var list []entry
	for _, ph := range phases {
		for _, h := range ph.Hosts {
			args, err := a.applyArgs(h)
			if err != nil {
				return err
			}
			list = append(list, entry{Host: h, Phase: ph.Name, Target: h.Target(), Args: a.showFiles(args)})
		}
	}
	if a.output == "json" && a.dryRun {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": report.APIVersion, "kind": "FleetPlan", "hosts": list,
			"rollout": report.Rollout{Canary: a.canary, Batch: a.batch, MaxFailures: a.maxFailures, RollbackOnFailure: a.rollbackOnFailure}})
	}
	// wrapped to the terminal's width (report.TermWidth), never wider
	width := report.TermWidth(w)
	rows := make([][]string, 0, len(list))
	for _, e := range list {
		rows = append(rows, []string{e.Phase, report.Clean(e.Name), report.Clean(e.User) + "@" + report.Clean(e.Target), argsCell(a.showFiles(e.Args))})
	}
	if err := argsTable(w, width, []string{"PHASE", "HOST", "CONNECT", "GPUPREP ARGS"}, rows); err != nil {
		return err
	}
	rb := ""
	if a.rollbackOnFailure {
		rb = "; gpuprep rollback on each host that fails"
	}
	fmt.Fprintln(w)
	report.Hanging(w, "", fmt.Sprintf("%s in %s: every canary must end ready; then stop after a batch once more than %s failed%s.",
		plural.N(len(list), "host"), plural.N(len(phases), "phase"), plural.N(a.maxFailures, "host"), rb), 0, width)
	if a.dryRun {
		report.Hanging(w, "", "Dry run: no host was contacted.", 0, width)
	}
	return nil
}
