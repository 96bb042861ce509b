package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

func newChecksCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "checks",
		Short: "List every check: its stable ID, the modes it applies to, what it checks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type row struct {
				ID    string           `json:"id"`
				Title string           `json:"title"`
				Modes []preflight.Mode `json:"modes"`
			}
			rows := []row{}
			for _, c := range preflight.All() {
				rows = append(rows, row{c.ID, c.Title, c.Modes})
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(checkList[row]{APIVersion: report.APIVersion, Kind: checkListKind, Checks: rows})
			case "text":
				tw := tabwriter.NewWriter(sanitize.NewWriter(cmd.OutOrStdout()), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tMODES\tCHECKS")
				for _, r := range rows {
					ms := make([]string, len(r.Modes))
					for i, m := range r.Modes {
						ms[i] = string(m)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", r.ID, strings.Join(ms, ","), r.Title)
				}
				return tw.Flush()
			}
			return usageErr("--output %q: want text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
