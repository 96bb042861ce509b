package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/report"
)

func init() { register(newVersionCmd) }

// commit is the commit gpuprep was built from (make sets it: -X
// main.commit=…); "" falls back to the build's VCS stamp (go build in a
// checkout), and to none.
var commit = ""

// versionKind is the kind of gpuprep version -o json (schema:
// docs/schema/Version.json).
const versionKind = "Version"

// versionDoc is gpuprep version -o json. Commit is omitted where the build
// does not say it (a build from a source archive, or with -buildvcs=false
// and no -X main.commit).
type versionDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	GoVersion  string `json:"goVersion"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

func buildVersion() versionDoc {
	return versionDoc{APIVersion: report.APIVersion, Kind: versionKind, Version: version, Commit: buildCommit(),
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// buildCommit is commit, else the VCS revision go build stamped ("+dirty"
// when the tree had changes), else "".
func buildCommit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

func newVersionCmd(_ *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gpuprep's version, the commit it was built from, its Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			case "text":
				fmt.Fprintf(out, "gpuprep %s\n", v.Version)
				fmt.Fprintf(out, "commit:  %s\n", orUnknown(v.Commit))
				fmt.Fprintf(out, "go:      %s\n", v.GoVersion)
				fmt.Fprintf(out, "os/arch: %s/%s\n", v.OS, v.Arch)
				return nil
			}
			return usageErr("--output %q: want text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown (built without -X main.commit or a VCS stamp)"
	}
	return s
}
