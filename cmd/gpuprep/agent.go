package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

func init() { register(newAgentCmd) }

// NFDFeatureFile is where Node Feature Discovery's local source reads
// feature files (node-feature-discovery source/local/local.go
// featureFilesDir), and gpuprep's file there.
const NFDFeatureFile = "/etc/kubernetes/node-feature-discovery/features.d/gpuprep"

type agentCmd struct {
	g           *globals
	node        string
	mode        string
	kubeconfig  string
	featureFile string
	metrics     string
	interval    time.Duration
	timeout     time.Duration
	nfdTTL      time.Duration
	once        bool
	sel         []string
	ignore      []string
	skip        []string
}

// agentLifetime is the agent's lifetime (deps.agentContext): until SIGINT
// or SIGTERM (a pod being stopped).
func agentLifetime() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func newAgentCmd(g *globals) *cobra.Command {
	c := &agentCmd{g: g}
	cmd := &cobra.Command{
		Use:   "agent [--node NAME --mode MODE] [--feature-file PATH] [--metrics ADDR] [--interval 5m | --once]",
		Short: "Keep evaluating this node: a Node condition, an NFD feature file, Prometheus metrics",
		Long: `agent runs gpuprep check every --interval (read-only, as check does) and publishes
the verdict, for nodes that have joined a cluster:

  --node NAME --mode MODE   sets the Node condition GPUPrepReady: True when the node is ready
                            for MODE; False with the failing checks and why as its message;
                            Unknown when a check could not be evaluated or the node could not
                            be evaluated at all. Needs RBAC get on nodes and patch on
                            nodes/status; the kubeconfig is --kubeconfig, $KUBECONFIG,
                            ~/.kube/config, or the pod's service account.
  --feature-file PATH       writes Node Feature Discovery's local feature file (what
                            gpuprep check -o nfd prints), atomically (a dot-named temporary
                            file renamed over it, which NFD ignores). Default path:
                            ` + NFDFeatureFile + `
  --metrics ADDR            serves /metrics (Prometheus text format): gpuprep_ready{mode},
                            gpuprep_check_failing{check,status}, gpuprep_findings{status},
                            gpuprep_evaluation_success, gpuprep_build_info.

--once evaluates and publishes once, then exits: 0 when published (whatever the
verdict), 3 when the node could not be evaluated or a sink refused (what a systemd
timer runs). A running agent logs such errors and tries again at the next interval. In a pod, run it with the host's /sys, /proc, /etc, /boot and /lib/modules under
one directory and --root pointing there (deploy/daemonset.yaml).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&c.node, "node", "", "Node whose GPUPrepReady condition to set (with --mode)")
	f.StringVar(&c.mode, "mode", "", "workload type the condition judges: container, vm-passthrough or vm-vgpu")
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)")
	f.StringVar(&c.featureFile, "feature-file", "", "write the NFD feature file at this host path (\"default\": "+NFDFeatureFile+")")
	f.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on this address (e.g. :9400)")
	f.DurationVar(&c.interval, "interval", 5*time.Minute, "time between evaluations")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "time limit for each API call")
	f.DurationVar(&c.nfdTTL, "nfd-ttl", 0, "how long NFD keeps the feature file's labels (default: 3 intervals, at least 15m)")
	f.BoolVar(&c.once, "once", false, "evaluate and publish once, then exit")
	f.StringArrayVar(&c.sel, "select", nil, "devices treated as GPUs, as for check")
	f.StringSliceVar(&c.ignore, "ignore", nil, "check IDs whose failures become warnings, as for check")
	f.StringSliceVar(&c.skip, "skip", nil, "check IDs not to run, as for check (their modes are then not ready)")
	return cmd
}

func (c *agentCmd) run(cmd *cobra.Command) error {
	mode, err := c.validate()
	if err != nil {
		return err
	}
	sel, err := pci.ParseSelector(c.sel)
	if err != nil {
		return usageErr("%v", err)
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	var client *kube.Client
	if c.node != "" {
		if client, err = kube.NewClient(c.kubeconfig); err != nil {
			return err
		}
	}
	m := &agentMetrics{version: version}
	ctx, stop := c.g.dep().agentContext()
	defer stop()
	if c.metrics != "" {
		srv, err := serveMetrics(c.metrics, m)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	a := &agent{c: c, root: root, sel: sel, mode: mode, client: client, metrics: m, log: cmd.ErrOrStderr()}
	for {
		err := a.iterate(ctx)
		var ee *exitError
		switch {
		case errors.As(err, &ee) && ee.code == exitUsage: // a bad --skip or --ignore: not for retrying
			return ee
		case c.once && err != nil:
			// not published, or not all of it: neither a usage error nor a verdict
			return &exitError{code: exitUnknown, err: err}
		case c.once:
			return nil
		case err != nil:
			fmt.Fprintln(a.log, "gpuprep agent:", sanitize.Lines(err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.interval):
		}
	}
}

func (c *agentCmd) validate() (preflight.Mode, error) {
	var mode preflight.Mode
	if c.mode != "" {
		m, err := preflight.ParseMode(c.mode)
		if err != nil {
			return "", usageErr("--mode: %v", err)
		}
		mode = m
	}
	switch {
	case c.node != "" && mode == "":
		return "", usageErr("--node sets the GPUPrepReady condition of one workload type: --mode is required")
	case c.node == "" && c.featureFile == "" && c.metrics == "":
		return "", usageErr("nothing to publish: give --node and --mode, --feature-file or --metrics")
	case c.interval < time.Second:
		return "", usageErr("--interval %s: at least 1s", c.interval)
	case c.once && c.metrics != "":
		return "", usageErr("--metrics serves a running agent, not --once")
	}
	if c.featureFile == "default" {
		c.featureFile = NFDFeatureFile
	}
	if c.nfdTTL == 0 {
		c.nfdTTL = max(3*c.interval, 15*time.Minute)
	}
	return mode, nil
}

func serveMetrics(addr string, m *agentMetrics) (*http.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "gpuprep agent: metrics:", err)
		}
	}()
	return srv, nil
}

// agent is one agent's state between evaluations.
type agent struct {
	c       *agentCmd
	root    *host.Root
	sel     pci.Selector
	mode    preflight.Mode
	client  *kube.Client
	metrics *agentMetrics
	log     io.Writer
}

// iterate evaluates the node and publishes the verdict to each sink; the
// errors of all of them, joined.
func (a *agent) iterate(ctx context.Context) error {
	rep, evalErr := a.evaluate()
	var ee *exitError
	if errors.As(evalErr, &ee) && ee.code == exitUsage {
		return evalErr // a bad --skip or --ignore: nothing to publish
	}
	now := time.Now()
	a.metrics.record(rep, evalErr, now)
	errs := []error{evalErr}
	if a.c.featureFile != "" {
		errs = append(errs, a.writeFeatureFile(rep, now))
	}
	if a.client != nil {
		errs = append(errs, a.setCondition(ctx, rep, evalErr, now))
	}
	return errors.Join(errs...)
}

// evaluate runs every check, as check does, on a fresh read-only view of
// the root (its directory cache must not outlive one evaluation).
func (a *agent) evaluate() (*report.Report, error) {
	root := a.root.ReadOnly()
	env, err := preflight.NewEnv(root, host.DefaultRunner(root), a.sel, "")
	if err != nil {
		return nil, fmt.Errorf("evaluating the node: %w", err)
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{
		Skip: preflight.ParseIDList(a.c.skip), Ignore: preflight.ParseIDList(a.c.ignore)})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return report.Build(env, res, ""), nil
}
