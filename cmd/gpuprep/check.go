package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/deviceplugin"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

type checkCmd struct {
	g      *globals
	mode   string
	sel    []string
	output string
	ignore []string
	skip   []string
	// compact: -o json on one line (what fleet check asks its hosts for).
	compact bool
	// nfdTTL: with -o nfd, how long NFD keeps the labels.
	nfdTTL time.Duration
	// devicePlugin: --device-plugin-version, the release resource names are for
	devicePlugin string
	// verbose: -v, the text report lists the passes too
	verbose bool
}

func newCheckCmd(g *globals) *cobra.Command {
	c := &checkCmd{g: g}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check (read-only) whether this node is ready for each GPU workload type",
		Long: `check tells, for one GPU node, whether it is ready for each GPU workload type
of the NVIDIA GPU Operator (container, vm-passthrough, vm-vgpu), why not, and how
to fix it. It only reads.

--skip ID leaves a check out, and so leaves the readiness of the modes it belongs
to unestablished: they are not ready ("ready": false; the mode's "skipped" lists
the checks; text: NOT EVALUATED), and check exits 3, never 0, so that a CI gate
cannot pass on a check it did not run. To accept a check's failure (or an
unevaluable result you checked by hand) use --ignore ID: the check still runs and
is shown, its fail or error becomes a warning (marked ignored), and the mode can
be ready.

The mode judged is --mode; without it, the mode the node's kubelet labels it
with (nvidia.com/gpu.workload.config in its --node-labels, what the GPU Operator
reads); without either, none: every mode is shown and none is judged. One line
on stderr says which ("judged: vm-passthrough (from the node's label …)").

Exit codes:
  0  ready for the mode judged
  1  not ready: a check of the mode failed
  2  usage error
  3  not evaluated: a check could not be evaluated or was skipped (and nothing
     failed), or no mode was judged (no --mode and no workload label): a CI
     gate that names no mode never passes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&c.mode, "mode", "", "workload type to judge: container, vm-passthrough or vm-vgpu (default: report every mode)")
	f.StringArrayVar(&c.sel, "select", nil, "devices treated as GPUs: PCI address (0000:41:00.0), VVVV:DDDD or VVVV; repeatable (default: every NVIDIA GPU)")
	f.StringVarP(&c.output, "output", "o", "text", "output format: text, json, junit, markdown, html or nfd (a Node Feature Discovery feature file)")
	f.StringSliceVar(&c.ignore, "ignore", nil, "check IDs whose failures (and unevaluable results) become warnings (comma-separated, or all)")
	f.StringSliceVar(&c.skip, "skip", nil, "check IDs not to run (comma-separated); the modes they belong to are then not evaluated (exit 3)")
	f.BoolVar(&c.compact, "compact", false, "with -o json, the report on one line (for machines and log shippers)")
	f.DurationVar(&c.nfdTTL, "nfd-ttl", report.NFDTTL, "with -o nfd, how long Node Feature Discovery keeps the labels (its expiry-time directive; 0: no expiry)")
	f.BoolVarP(&c.verbose, "verbose", "v", false, "with -o text, list every finding (by default the passes are one line that counts them)")
	addDevicePluginFlag(f, &c.devicePlugin, false)
	return cmd
}

func (c *checkCmd) run(cmd *cobra.Command) error {
	mode, err := c.checkFlags()
	if err != nil {
		return err
	}
	rel, err := deviceplugin.Lookup(cmp.Or(c.devicePlugin, deviceplugin.Default))
	if err != nil {
		return usageErr("--device-plugin-version: %v", err)
	}
	sel, err := pci.ParseSelector(c.sel)
	if err != nil {
		return usageErr("%v", err)
	}
	root, err := c.g.hostRoot()
	if err != nil {
		return err
	}
	// check only reads: a short-lived process with a small heap, so the
	// garbage collector may wait longer, and resolved directories are cached.
	debug.SetGCPercent(400)
	root = root.ReadOnly()
	mode, judged := judgedMode(root, mode)
	env, err := preflight.NewEnv(root, host.DefaultRunner(root), sel, mode)
	if err != nil {
		if strings.HasPrefix(err.Error(), "--select") {
			return usageErr("%v", err)
		}
		return &exitError{code: exitUnknown, err: err}
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{
		Mode: mode, Skip: preflight.ParseIDList(c.skip), Ignore: preflight.ParseIDList(c.ignore)})
	if err != nil {
		return usageErr("%v", err)
	}
	rep := report.Build(env, res, mode)
	for _, n := range rep.NameResources(rel) {
		fmt.Fprintln(cmd.ErrOrStderr(), "gpuprep: note:", n)
	}
	// on a live host with no GPU (every device looked at), a hint where to
	// see a GPU node's report
	noGPUHint := len(rep.GPUs) == 0 && sel.Default() && root.IsLive()
	if err := c.write(cmd.OutOrStdout(), rep, noGPUHint); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "gpuprep:", sanitize.Terminal(judged))
	return &exitError{code: exitCode(rep)}
}

// checkFlags validates --mode, --output and --compact, and returns the
// mode ("": every mode).
func (c *checkCmd) checkFlags() (preflight.Mode, error) {
	var mode preflight.Mode
	if c.mode != "" {
		m, err := preflight.ParseMode(c.mode)
		if err != nil {
			return "", usageErr("--mode: %v", err)
		}
		mode = m
	}
	if !validFormat(c.output) && c.output != "nfd" {
		return "", usageErr("--output %q: want text, json, junit, markdown, html or nfd", c.output)
	}
	if c.compact && c.output != "json" {
		return "", usageErr("--compact is for -o json, not -o %s", c.output)
	}
	return mode, nil
}

// write writes the report in the format asked for (in text, then the
// no-GPU hint when noGPUHint).
func (c *checkCmd) write(out io.Writer, rep *report.Report, noGPUHint bool) error {
	switch {
	case c.compact:
		return report.CompactJSON(out, rep)
	case c.output == "nfd":
		return report.NFD(out, rep, nfdOptions(c.nfdTTL))
	case c.output != "text":
		return report.Render(out, &report.Document{Host: rep}, c.output)
	}
	if err := report.TextWith(out, rep, report.TextOptions{Verbose: c.verbose}); err != nil {
		return err
	}
	if noGPUHint {
		fmt.Fprintln(out, "\nThis host has no NVIDIA GPU. To see the report of a GPU node, run gpuprep against a snapshot or fixture root, e.g. `make run` shows the bundled example node (testdata/roots/hgx-h200).")
	}
	return nil
}

// exitCode is the verdict's exit code (report.Verdict, which fleet check
// gives each host too): 0 ready, 1 not ready, 3 not judged (no mode, an
// unevaluated or skipped check).
func exitCode(r *report.Report) int {
	switch report.Verdict(r) {
	case report.VerdictReady:
		return exitOK
	case report.VerdictNotReady:
		return exitNotReady
	}
	return exitUnknown
}

// nfdOptions: this gpuprep's version, and an expiry ttl from now (none for 0).
func nfdOptions(ttl time.Duration) report.NFDOptions {
	o := report.NFDOptions{Version: version}
	if ttl > 0 {
		o.Expiry = time.Now().Add(ttl)
	}
	return o
}
