package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/report"
)

func init() {
	register(newReportCmd)
	report.Version = version
}

func newReportCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "report", Short: "Work with saved gpuprep JSON reports"}
	var output string
	var verbose bool
	render := &cobra.Command{
		Use:   "render FILE.json",
		Short: "Render a saved report (host or fleet) as text, json, junit, markdown, html or nfd (a host's report only)",
		Long: `render turns any saved gpuprep JSON report — a host's ReadinessReport (gpuprep check -o json)
or a FleetReport (gpuprep fleet check -o json) — into another format. html is one
self-contained file (no scripts, no external resources) a person can open: the fleet-wide
view, a table of hosts and each host's findings. FILE "-" reads standard input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b []byte
			var err error
			if args[0] == "-" {
				b, err = io.ReadAll(cmd.InOrStdin())
			} else {
				b, err = os.ReadFile(args[0])
			}
			if err != nil {
				return usageErr("%v", err)
			}
			d, err := report.Parse(args[0], b)
			if err != nil {
				return usageErr("%v", err)
			}
			if !validFormat(output) && (output != "nfd" || d.Host == nil) {
				return usageErr("--output %q: want text, json, junit, markdown or html (or nfd, for a host's report)", output)
			}
			if err := report.RenderWith(cmd.OutOrStdout(), d, output, report.TextOptions{Verbose: verbose}); err != nil {
				return err
			}
			if d.Cut != nil {
				// a fleet run killed before it finished: what it has, said
				// to be incomplete, and exit 3 (not every host evaluated)
				fmt.Fprintf(cmd.ErrOrStderr(), "gpuprep report: %s: %s\n", report.Clean(args[0]), d.Cut)
				return &exitError{code: 3}
			}
			return nil
		},
	}
	render.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json, junit, markdown, html or nfd (a host's report only)")
	render.Flags().BoolVarP(&verbose, "verbose", "v", false, "with -o text, a host's report lists every finding (by default the passes are one line that counts them)")
	cmd.AddCommand(render)
	return cmd
}

func validFormat(f string) bool {
	for _, x := range report.Formats {
		if x == f {
			return true
		}
	}
	return false
}
