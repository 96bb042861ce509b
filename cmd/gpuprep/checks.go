package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/report"
)

func newChecksCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "checks [ID...]",
		Short: "List every check: its stable ID, the modes it applies to, what it checks, which apply steps change it; with IDs, describe those",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			checks, err := namedChecks(args)
			if err != nil {
				return err
			}
			rows := []checkRow{}
			for _, c := range checks {
				rows = append(rows, checkRow{c.ID, c.Title, c.Modes, c.Doc, c.ChangedBy, c.Beyond, c.Remedies})
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(checkList[checkRow]{APIVersion: report.APIVersion, Kind: checkListKind, Checks: rows})
			case "markdown":
				return writeChecksMarkdown(cmd.OutOrStdout(), checks)
			case "text":
				if len(args) > 0 {
					return writeCheckDocs(sanitize.NewWriter(cmd.OutOrStdout()), checks)
				}
				var table [][]string
				for _, r := range rows {
					ms := make([]string, len(r.Modes))
					for i, m := range r.Modes {
						ms[i] = string(m)
					}
					table = append(table, []string{r.ID, strings.Join(ms, ","), changedByShort(r.ChangedBy, r.BeyondPlan), r.Title})
				}
				// wrapped to the terminal's width (report.TermWidth), never wider
				out := cmd.OutOrStdout()
				w := sanitize.NewWriter(out)
				width := report.TermWidth(out)
				if err := report.Table(w, width, []string{"ID", "MODES", "CHANGED BY", "CHECKS"}, table); err != nil {
					return err
				}
				fmt.Fprintln(w)
				return report.Paragraph(w, "(gpuprep checks ID describes a check; docs/checks.md describes them all)", 1, width)
			}
			return usageErr("--output %q: want text, json or markdown", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown (docs/checks.md)")
	return cmd
}
