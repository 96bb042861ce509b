package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuprep/gpuprep/internal/fleet"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

func init() { register(newFleetCmd) }

type fleetCmd struct {
	g              *globals
	inventory      string
	engine         string
	inventoryNote  string // which reader read the inventory (fleet.Inventory.Note), said on stderr
	limit          string
	groups         []string
	dryRun         bool
	parallel       int
	timeout        time.Duration
	commandTimeout time.Duration
	retries        int
	identities     []string
	knownHosts     string
	acceptNew      bool
	sshConfig      string
	agentBinary    []string
	noSudo         bool
	remoteRoot     string
	output         string
	reportFile     string
	judged         *judgedTally // fleet check: the modes the hosts were judged for
	sshCfg         *fleet.SSHConfig

	// check only
	mode   string
	sel    []string
	ignore []string
	skip   []string
}

func newFleetCmd(g *globals) *cobra.Command {
	c := &fleetCmd{g: g}
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Run gpuprep on every host of an inventory over SSH",
		Long: `fleet runs gpuprep on many hosts over SSH and merges the results. Inventories:
gpuprep's own YAML, or Ansible INI/YAML inventories as they are; ~/.ssh/config is
honoured (User, Port, IdentityFile, ProxyJump).

gpuprep copies itself to each host (into ~/.cache/gpuprep/<sha256>/, reused while
its hash matches) and runs there
under sudo -n when the login user is not root. A host of another architecture
gets the gpuprep-linux-<arch> file beside this binary (make build puts the other
one in bin/), or the one for it among --agent-binary's (repeatable; a directory
such as make dist's); never a binary of another architecture. Host keys are always verified
against known_hosts; --accept-new trusts and records hosts seen for the first time.`,
	}
	pf := cmd.PersistentFlags()
	c.connectionFlags(pf, true)
	pf.StringVarP(&c.output, "output", "o", "text", "output format: text, json, junit, markdown or html")

	check := &cobra.Command{
		Use:   "check",
		Short: "gpuprep check on every host; one fleet report",
		Long: `fleet check runs gpuprep check on every selected host and prints one fleet report:
per host its status (evaluated, unreachable, auth-failed, host-key-unknown,
host-key-changed, timeout, error, cancelled), readiness and counts, then the
fleet-wide view ("iommu.kernel fails on 12 of 200 hosts: …").

Each host is judged for --mode, else for its inventory mode (mode, or the variable
gpuprep_mode), else for every mode.

Exit codes: 0 every host ready, 1 a host is not ready, 3 a host could not be
evaluated (and none is not ready), 2 usage errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd, nil) },
	}
	f := check.Flags()
	f.StringVar(&c.mode, "mode", "", "workload type to judge on every host: container, vm-passthrough or vm-vgpu")
	f.StringArrayVar(&c.sel, "select", nil, "passed to gpuprep check on every host (per host: the inventory variable gpuprep_select, comma-separated, replaces it)")
	f.StringSliceVar(&c.ignore, "ignore", nil, "passed to gpuprep check on every host (check IDs are checked here first)")
	f.StringSliceVar(&c.skip, "skip", nil, "passed to gpuprep check on every host (check IDs are checked here first)")
	c.reportFlag(f)

	run := &cobra.Command{
		Use:   "run -i INVENTORY -- SUBCOMMAND [ARGS...]",
		Short: "Run any gpuprep subcommand on every host and collect the results",
		Long: `fleet run runs "gpuprep SUBCOMMAND ARGS..." on every selected host and collects
each host's exit code and output (kept as JSON when it is JSON, e.g. with -o json).

Each host's outcome is what gpuprep's exit code there says: 0 ok, 1 failed (not
ready, a step failed, refused; also any code gpuprep does not document), 2
usage-error, 3 unknown (could not evaluate, or another gpuprep was changing the
host), 4 reboot-needed, 130 interrupted.

Exit codes: 2 gpuprep refused the command line on a host (or usage errors here),
else 1 it failed on a host, else 3 a host could not be reached or run, or its
outcome is unknown or interrupted, else 4 a host needs a reboot, else 0.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return c.run(cmd, args) },
	}
	c.reportFlag(run.Flags())
	cmd.AddCommand(check, run, c.applyCommand(), c.sudoersCommand())
	return cmd
}

// reportFlag registers --report.
func (c *fleetCmd) reportFlag(f *pflag.FlagSet) {
	f.StringVar(&c.reportFile, "report", "", "also write the JSON report to this file, each host's entry as it finishes (the file ends as -o json's document, hosts in inventory order; gpuprep report render reads it)")
}

// connectionFlags registers the inventory, selection and SSH flags (used by
// fleet and by commands that gather reports from a fleet).
func (c *fleetCmd) connectionFlags(pf *pflag.FlagSet, withDryRun bool) {
	pf.StringVarP(&c.inventory, "inventory", "i", "", "inventory: gpuprep YAML, Ansible INI or YAML (with group_vars/ and host_vars/ beside it), or an Ansible inventory directory (required)")
	pf.StringVar(&c.engine, "inventory-engine", fleet.EngineAuto, "how an Ansible inventory is read: auto (ansible-inventory where it is installed and needed, else gpuprep's reader), ansible, or gpuprep (its own reader: group_vars/, host_vars/ and directories too, no scripts or plugins)")
	pf.StringVar(&c.limit, "limit", "", "host patterns (globs on name, address or group; comma-separated; !x excludes, &x also required)")
	pf.StringArrayVar(&c.groups, "group", nil, "only hosts in this inventory group (repeatable)")
	if withDryRun {
		pf.BoolVar(&c.dryRun, "dry-run", false, "list the hosts that would be contacted, and how, without connecting")
	}
	pf.IntVar(&c.parallel, "parallel", 32, "hosts worked on at once")
	pf.DurationVar(&c.timeout, "timeout", 10*time.Second, "per host: TCP connect plus SSH handshake (each jump host too)")
	pf.DurationVar(&c.commandTimeout, "command-timeout", 5*time.Minute, "per host: upload and run, after connecting (0: none)")
	pf.IntVar(&c.retries, "retries", 2, "extra attempts for connections that fail before SSH is up (refused, reset); never for auth, host-key or timeout failures")
	pf.StringArrayVar(&c.identities, "identity", nil, "private key file to offer (repeatable; besides ssh-agent and IdentityFile)")
	pf.StringVar(&c.knownHosts, "known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts, plus /etc/ssh/ssh_known_hosts)")
	pf.BoolVar(&c.acceptNew, "accept-new", false, "trust and record the key of a host not yet in known_hosts (a changed key is always refused)")
	pf.StringVar(&c.sshConfig, "ssh-config", "", `ssh_config file, read alone as ssh -F reads it (default: ~/.ssh/config, then /etc/ssh/ssh_config, as ssh; "none" for none)`)
	pf.StringArrayVar(&c.agentBinary, "agent-binary", nil, "gpuprep executable to copy to hosts, or a directory of gpuprep-linux-<arch> files such as make dist's (repeatable, one per architecture; each host gets the one for its architecture; default: this one, and the gpuprep-linux-<arch> files beside it for the others)")
	pf.BoolVar(&c.noSudo, "no-sudo", false, "run gpuprep as the login user even when it is not root (less evidence)")
	pf.StringVar(&c.remoteRoot, "remote-root", "", "--root for gpuprep on the hosts (per host: the inventory variable gpuprep_root)")
}

func (c *fleetCmd) hosts() ([]*fleet.Host, error) {
	if c.inventory == "" {
		return nil, usageErr("--inventory (-i) is required")
	}
	switch c.engine {
	case fleet.EngineAuto, fleet.EngineAnsible, fleet.EngineGpuprep:
	default:
		return nil, usageErr("--inventory-engine %q: want auto, ansible or gpuprep", c.engine)
	}
	inv, err := fleet.LoadWith(c.inventory, fleet.LoadOptions{Engine: c.engine})
	if err != nil {
		var ie *fleet.Error
		if errors.As(err, &ie) || os.IsNotExist(err) {
			return nil, usageErr("inventory: %v", err)
		}
		return nil, usageErr("inventory %s: %v", c.inventory, err)
	}
	c.inventoryNote = inv.Note
	hosts, err := fleet.Select(inv.Hosts, c.limit, c.groups)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	// As ssh: a named file alone (ssh -F), else ~/.ssh/config and then
	// the system-wide file.
	var cfgFiles []string
	switch c.sshConfig {
	case "none":
	case "":
		if home, err := os.UserHomeDir(); err == nil {
			cfgFiles = append(cfgFiles, filepath.Join(home, ".ssh", "config"))
		}
		cfgFiles = append(cfgFiles, fleet.SystemSSHConfig)
	default:
		// ssh -F with a file that is not there is an error too.
		if _, err := os.Stat(c.sshConfig); err != nil {
			return nil, usageErr("--ssh-config: %v", err)
		}
		cfgFiles = []string{c.sshConfig}
	}
	var sc *fleet.SSHConfig
	if len(cfgFiles) > 0 {
		if sc, err = fleet.LoadSSHConfigs(cfgFiles...); err != nil {
			return nil, usageErr("--ssh-config: %v", err)
		}
	}
	for _, h := range hosts {
		if err := sc.Apply(h); err != nil {
			return nil, usageErr("%s: %v", h.Name, err)
		}
		fleet.Defaults(h)
	}
	c.sshCfg = sc
	return hosts, nil
}

func (c *fleetCmd) run(cmd *cobra.Command, command []string) error {
	if !validFormat(c.output) {
		return usageErr("--output %q: want text, json, junit, markdown or html", c.output)
	}
	st, interrupted, err := c.stream(cmd, command, c.reportFile)
	if err != nil || st == nil {
		return err
	}
	out := cmd.OutOrStdout()
	err = st.Render(out, c.output, interrupted) // host by host, none kept
	if cerr := st.Close(interrupted); err == nil && cerr != nil {
		err = fmt.Errorf("--report %s: %w", c.reportFile, cerr)
	}
	if err != nil {
		return err
	}
	if command == nil {
		// as a local check's: which mode(s) the verdicts are for
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuprep fleet:", report.Clean(c.judged.line()))
	}
	if interrupted {
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuprep fleet: interrupted; the report shows the hosts that finished")
	}
	fr := st.Report(interrupted)
	if command != nil {
		return &exitError{code: fr.RunExitCode()}
	}
	return &exitError{code: fr.ExitCode()}
}

// each runs check on every selected host and gives fn each host's entry,
// one at a time, read back from the fleet report's stream (nothing of the
// fleet is held but what fn keeps); false after a --dry-run listing.
func (c *fleetCmd) each(cmd *cobra.Command, fn func(h *report.FleetHost) error) (bool, error) {
	st, interrupted, err := c.stream(cmd, nil, "")
	if err != nil || st == nil {
		return false, err
	}
	err = st.Each(fn)
	if cerr := st.Close(interrupted); err == nil {
		err = cerr
	}
	return true, err
}

// stream runs gpuprep (check, or command) on every selected host, each
// host's entry written to the fleet report's stream (in reportFile, or a
// temporary file) as it finishes; nil after a --dry-run listing.
func (c *fleetCmd) stream(cmd *cobra.Command, command []string, reportFile string) (_ *report.FleetStream, interrupted bool, _ error) {
	if c.mode != "" {
		if _, err := preflight.ParseMode(c.mode); err != nil {
			return nil, false, usageErr("--mode: %v", err)
		}
	}
	if err := c.checkConnectionFlags(); err != nil {
		return nil, false, err
	}
	hosts, err := c.hosts()
	if err != nil {
		return nil, false, err
	}
	if c.inventoryNote != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "gpuprep fleet: inventory %s: %s\n", c.inventory, c.inventoryNote)
	}
	if c.dryRun {
		return nil, false, c.printDryRun(cmd.OutOrStdout(), hosts, command)
	}
	sess, err := c.connect(cmd)
	if err != nil {
		return nil, false, err
	}
	defer sess.close()
	ctx := sess.ctx

	prog := newProgress(cmd.ErrOrStderr())
	r := &fleet.Runner{
		Transport: sess.tr, Exec: sess.exec,
		Parallel: c.parallel, Retries: c.retries, CommandTimeout: c.commandTimeout,
		Args: func(h *fleet.Host) ([]string, error) { return c.remoteArgs(h, command) },
		Done: prog.done,
	}
	st, err := c.gather(ctx, r, hosts, command, reportFile)
	prog.finish()
	if err != nil && reportFile != "" {
		err = fmt.Errorf("--report %s: %w", reportFile, err)
	}
	return st, ctx.Err() != nil, err
}

// gather runs r on hosts: each host's entry goes to the fleet report's
// stream as it finishes, and nothing of it is kept here (its output is
// dropped).
func (c *fleetCmd) gather(ctx context.Context, runner *fleet.Runner, hosts []*fleet.Host, command []string, reportFile string) (*report.FleetStream, error) {
	r := *runner // its Done and Evaluated are this run's
	st, err := report.NewFleetStream(reportFile, &report.FleetReport{Mode: c.mode, Command: command}, len(hosts))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	reports := map[*fleet.Host]*report.Report{} // each host's, parsed once, as it finishes, until added
	if command == nil {
		r.Evaluated = func(h *fleet.Host, o fleet.Output) error {
			rep, err := parseReport(o)
			if err == nil {
				mu.Lock()
				reports[h] = rep
				mu.Unlock()
			}
			return err
		}
	}
	c.judged = &judgedTally{}
	var addErr error
	add := func(res *fleet.Result) {
		mu.Lock()
		rep := reports[res.Host]
		delete(reports, res.Host)
		mu.Unlock()
		h := c.fleetHost(res, command, rep)
		if command == nil {
			c.judged.add(&h, c.mode != "")
		}
		if err := st.Add(res.Index, &h); err != nil && addErr == nil {
			addErr = err
		}
		res.Output = fleet.Output{}
	}
	done := r.Done
	r.Done = func(res *fleet.Result, n, total int) {
		add(res)
		if done != nil {
			done(res, n, total)
		}
	}
	for _, res := range r.Run(ctx, hosts) {
		if !st.Added(res.Index) { // never started (interrupted)
			add(res)
		}
	}
	if addErr != nil {
		// the report file stays as the stream left it, cut short (report
		// render reads it so): its rewrite in inventory order needs every
		// host added, which addErr says failed
		_ = st.Close(true)
		return nil, addErr
	}
	return st, nil
}

// checkConnectionFlags validates --parallel, --timeout, --retries,
// --identity, --select, --skip and --ignore, and refuses the global --root
// (fleet apply's and kubevirt config -i's too).
func (c *fleetCmd) checkConnectionFlags() error {
	if c.g != nil && c.g.root != "" {
		// it would be ignored: the hosts' gpuprep reads their own root
		return usageErr("--root %s (or GPUPREP_ROOT) is the root of gpuprep on this machine, and the fleet commands run gpuprep on the inventory's hosts: give their root with --remote-root, or the host variable gpuprep_root", c.g.root)
	}
	if c.parallel < 1 {
		return usageErr("--parallel %d: want at least 1", c.parallel)
	}
	if c.timeout <= 0 {
		return usageErr("--timeout %s: want a positive duration", c.timeout)
	}
	if c.retries < 0 {
		return usageErr("--retries %d: want 0 or more", c.retries)
	}
	if err := c.checkCheckFlags(); err != nil {
		return err
	}
	// as an inventory's key files: the transport passes over a file it
	// cannot read, so a misspelt one would be an auth failure on every host
	for i, f := range c.identities {
		p, err := fleet.KeyFile(f)
		if err != nil {
			return usageErr("--identity: %v", err)
		}
		c.identities[i] = p
	}
	return nil
}

// checkIDRe is what every check ID looks like: lowercase dotted words.
var checkIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$`)

// checkCheckFlags validates --select, --skip and --ignore before any host
// is contacted (a typo would otherwise be one error per host). The hosts
// run this gpuprep, and know its checks; with an --agent-binary that is not
// this executable (another version may have other checks), an ID this
// gpuprep does not know passes when it looks like a check ID, and the
// hosts judge it. Selectors are checked here whatever the binary.
func (c *fleetCmd) checkCheckFlags() error {
	if _, err := pci.ParseSelector(c.sel); err != nil {
		return usageErr("%v", err)
	}
	checks := preflight.All()
	known := func(id string) bool {
		return slices.ContainsFunc(checks, func(ch preflight.Check) bool { return ch.ID == id })
	}
	same := c.runsThisBinary()
	for _, fl := range []struct {
		name string
		vals []string
	}{{"--skip", c.skip}, {"--ignore", c.ignore}} {
		for _, v := range fl.vals {
			for _, id := range strings.Split(v, ",") {
				id = strings.TrimSpace(id)
				switch {
				case id == "", known(id), fl.name == "--ignore" && id == "all":
				case same || !checkIDRe.MatchString(id):
					return usageErr("%s %s: no such check (gpuprep checks lists them)", fl.name, id)
				}
			}
		}
	}
	return nil
}

// runsThisBinary reports whether the hosts run this gpuprep (no
// --agent-binary: this one, and the builds of the same tree beside it, or
// --agent-binary this very file alone).
func (c *fleetCmd) runsThisBinary() bool {
	if len(c.agentBinary) == 0 {
		return true
	}
	exe, err := os.Executable()
	if err != nil || len(c.agentBinary) != 1 {
		return false
	}
	a, err1 := os.Stat(c.agentBinary[0])
	b, err2 := os.Stat(exe)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// fleetSession is what runs gpuprep on hosts: the SSH transport, the
// binary to run, and a context that Ctrl-C (or SIGTERM) cancels.
type fleetSession struct {
	ctx  context.Context
	tr   *fleet.Transport
	exec *fleet.Exec
	done []func()
}

func (s *fleetSession) close() {
	for i := len(s.done) - 1; i >= 0; i-- {
		s.done[i]()
	}
}

// connect prepares the transport and the binary from the flags.
func (c *fleetCmd) connect(cmd *cobra.Command) (_ *fleetSession, err error) {
	sess := &fleetSession{}
	defer func() {
		if err != nil {
			sess.close()
		}
	}()
	bins, err := c.agents()
	if err != nil {
		return nil, err
	}
	for _, bin := range bins {
		if bin.Dynamic {
			fmt.Fprintf(cmd.ErrOrStderr(), "gpuprep: note: %s is dynamically linked (a cgo build): hosts whose C library differs may not run it; build it with CGO_ENABLED=0 (make build)\n", bin.Path)
		}
	}
	tr := &fleet.Transport{AcceptNew: c.acceptNew, Identities: c.identities, SSHConfig: c.sshCfg, ConnectTimeout: c.timeout}
	if c.knownHosts != "" {
		tr.KnownHosts = []string{c.knownHosts}
	} else {
		if home, err := os.UserHomeDir(); err == nil {
			tr.KnownHosts = append(tr.KnownHosts, filepath.Join(home, ".ssh", "known_hosts"))
		}
		tr.KnownHosts = append(tr.KnownHosts, "/etc/ssh/ssh_known_hosts")
	}
	if err := tr.Init(); err != nil {
		return nil, usageErr("%v", err)
	}
	if ag, closer := fleet.AgentFromEnv(); ag != nil {
		tr.Agent = ag
		// the agent's socket: nothing written there is lost on its close
		sess.done = append(sess.done, func() { _ = closer.Close() })
	}

	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	sess.done = append(sess.done, stop)
	sess.ctx, sess.tr, sess.exec = ctx, tr, &fleet.Exec{Binary: bins[0], Binaries: bins, NoSudo: c.noSudo}
	return sess, nil
}

// remoteArgs are the arguments of gpuprep on a host: its --root first (a
// global flag), then the subcommand.
func (c *fleetCmd) remoteArgs(h *fleet.Host, command []string) ([]string, error) {
	var rootArg []string
	root := h.Var("gpuprep_root")
	if root == "" {
		root = c.remoteRoot
	}
	if root != "" {
		rootArg = []string{"--root=" + root}
	}
	if command != nil {
		return append(rootArg, command...), nil
	}
	// check first: gpuprep then builds the check command alone (see
	// executeWith); --root is the root's persistent flag
	args := append([]string{"check"}, rootArg...)
	args = append(args, "-o", "json", "--compact")
	if m := c.hostMode(h); m != "" {
		args = append(args, "--mode", m)
	}
	for _, s := range c.hostSelect(h) {
		args = append(args, "--select", s)
	}
	if len(c.ignore) > 0 {
		args = append(args, "--ignore", strings.Join(c.ignore, ","))
	}
	if len(c.skip) > 0 {
		args = append(args, "--skip", strings.Join(c.skip, ","))
	}
	return args, nil
}

// hostSelect is --select for gpuprep check on h: the host variable
// gpuprep_select (comma-separated) when set, since which devices are the
// GPUs is a property of the host, else the fleet's --select.
func (c *fleetCmd) hostSelect(h *fleet.Host) []string {
	v := h.Var("gpuprep_select")
	if strings.TrimSpace(v) == "" {
		return c.sel
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (c *fleetCmd) hostMode(h *fleet.Host) string {
	if c.mode != "" {
		return c.mode
	}
	return h.Mode
}

// parseReport reads a host's ReadinessReport; gpuprep check exits 0, 1 or
// 3 with one, anything else is an error.
func parseReport(o fleet.Output) (*report.Report, error) {
	if o.ExitCode != 0 && o.ExitCode != 1 && o.ExitCode != 3 {
		return nil, fmt.Errorf("gpuprep check exited %d: %s", o.ExitCode, tail(o.Stderr))
	}
	var r report.Report
	if err := json.Unmarshal(o.Stdout, &r); err != nil || r.Kind != report.Kind {
		if err == nil {
			err = fmt.Errorf("kind %q", r.Kind)
		}
		return nil, fmt.Errorf("gpuprep check printed no ReadinessReport (%v): %s", err, tail(o.Stderr))
	}
	return &r, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		i := len(s) - 500
		for i < len(s) && !utf8.RuneStart(s[i]) { // not inside a character
			i++
		}
		s = "…" + s[i:]
	}
	return s
}

// fleetHost turns a host's result into its report entry; rep is its
// ReadinessReport when check ran there and answered.
func (c *fleetCmd) fleetHost(res *fleet.Result, command []string, rep *report.Report) report.FleetHost {
	h := report.FleetHost{Name: res.Host.Name, Address: res.Host.Target(), Status: res.Status, Error: res.Err,
		Mode: c.hostMode(res.Host), DurationMs: res.Duration.Milliseconds()}
	if command != nil {
		h.Mode = ""
	}
	if res.Status != fleet.StatusEvaluated {
		return h
	}
	if command == nil {
		if rep == nil { // cannot happen: Evaluated parsed it
			h.Status, h.Error = fleet.StatusError, "gpuprep check printed no ReadinessReport"
			return h
		}
		h.Report = rep
		return h
	}
	code := res.Output.ExitCode
	h.ExitCode = &code
	if json.Valid(res.Output.Stdout) && len(strings.TrimSpace(string(res.Output.Stdout))) > 0 {
		h.Output = json.RawMessage(res.Output.Stdout)
	} else {
		h.Stdout = string(res.Output.Stdout)
	}
	h.Stderr = string(res.Output.Stderr)
	return h
}

func (c *fleetCmd) printDryRun(w io.Writer, hosts []*fleet.Host, command []string) error {
	type entry struct {
		*fleet.Host
		Target string   `json:"target"`
		Args   []string `json:"gpuprepArgs"`
	}
	var list []entry
	for _, h := range hosts {
		args, err := c.remoteArgs(h, command)
		if err != nil {
			return err
		}
		list = append(list, entry{Host: h, Target: h.Target(), Args: args})
	}
	if c.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": report.APIVersion, "kind": "FleetPlan", "hosts": list})
	}
	// wrapped to the terminal's width (report.TermWidth), never wider
	width := report.TermWidth(w)
	var rows [][]string
	var problems []string
	for _, e := range list {
		if e.Problem != "" {
			problems = append(problems, e.Problem)
			rows = append(rows, []string{report.Clean(e.Name), "(not contacted)", "-", report.Clean(strings.Join(e.Groups, ",")), "-"})
			continue
		}
		via := e.Jump
		if via == "" {
			via = "-"
		}
		connect := e.User + "@" + e.Target
		if e.Local {
			connect, via = "local (this machine, no SSH)", "-"
		}
		rows = append(rows, []string{report.Clean(e.Name), report.Clean(connect), report.Clean(via),
			report.Clean(strings.Join(e.Groups, ",")), argsCell(e.Args)})
	}
	if err := argsTable(w, width, []string{"HOST", "CONNECT", "VIA", "GROUPS", "GPUPREP ARGS"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	report.Hanging(w, "", plural.N(len(list)-len(problems), "host")+" would be contacted (dry run: nothing was).", 0, width)
	if len(problems) > 0 {
		report.Hanging(w, "", fmt.Sprintf("%d not, for a problem of their own in the inventory:", len(problems)), 0, width)
		for _, p := range problems {
			report.Hanging(w, "  ", report.Clean(p), 4, width)
		}
	}
	return nil
}

// argsCell is args shell-quoted for a dry run's table, the blanks inside
// an argument ('--root=/srv/roots/a b') non-breaking, so that the table's
// wrap never splits an argument; argsTable puts them back.
func argsCell(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = report.Clean(fleet.Quote(a))
		if !strings.ContainsRune(q[i], nbsp) {
			q[i] = strings.ReplaceAll(q[i], " ", string(nbsp))
		}
	}
	return strings.Join(q, " ")
}

// nbsp is U+00A0 NO-BREAK SPACE.
const nbsp = '\u00a0'

// argsTable is report.Table for rows whose last cell is an argsCell: the
// table wrapped to width, the arguments' own blanks put back.
func argsTable(w io.Writer, width int, head []string, rows [][]string) error {
	var b strings.Builder
	if err := report.Table(&b, width, head, rows); err != nil {
		return err
	}
	_, err := io.WriteString(w, strings.ReplaceAll(b.String(), string(nbsp), " "))
	return err
}

// progress reports finished hosts on stderr: a live line on a terminal,
// one line per host otherwise.
type progress struct {
	w      io.Writer
	tty    bool
	counts map[string]int
	start  time.Time
	active bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, counts: map[string]int{}, start: time.Now()}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) && os.Getenv("TERM") != "dumb" {
		p.tty = true
	}
	return p
}

func (p *progress) done(r *fleet.Result, done, total int) {
	p.counts[r.Status]++
	if !p.tty {
		line := fmt.Sprintf("gpuprep fleet: [%d/%d] %s %s", done, total, report.Clean(r.Host.Name), r.Status)
		if r.Err != "" {
			line += ": " + report.Clean(firstLineOf(r.Err))
		}
		fmt.Fprintf(p.w, "%s (%.1fs)\n", line, r.Duration.Seconds())
		return
	}
	const width = 30
	n := width * done / total
	bar := strings.Repeat("█", n) + strings.Repeat("░", width-n)
	var parts []string
	for _, s := range []string{fleet.StatusEvaluated, fleet.StatusUnreachable, fleet.StatusAuthFailed, fleet.StatusHostKeyUnknown,
		fleet.StatusHostKeyChanged, fleet.StatusTimeout, fleet.StatusError, fleet.StatusCancelled} {
		if p.counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, p.counts[s]))
		}
	}
	fmt.Fprintf(p.w, "\r\033[K%s %d/%d  %s  %.0fs", bar, done, total, strings.Join(parts, " · "), time.Since(p.start).Seconds())
	p.active = true
}

func (p *progress) finish() {
	if p.tty && p.active {
		fmt.Fprintln(p.w)
	}
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
