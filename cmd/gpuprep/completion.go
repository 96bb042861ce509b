package main

import (
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
)

// outputFormats are every format an -o flag of gpuprep takes; a command's
// own are those its flag's usage names.
var outputFormats = []string{"text", "json", "yaml", "junit", "markdown", "html", "nfd"}

// addCompletions registers, on every command of root's tree, the completion
// of the flag values gpuprep's commands share by name: --mode (the modes
// the flag's usage names), -o (the formats it names), --skip and --ignore
// (the check IDs of the registry), and --select (the NVIDIA GPUs of
// --root's host, for the commands that run here). The usage a flag is
// registered with is what its command accepts, so the values come from it.
func addCompletions(root *cobra.Command, g *globals) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		register := func(f *pflag.Flag) {
			if fn := completerFor(c, f, g); fn != nil {
				_ = c.RegisterFlagCompletionFunc(f.Name, fn) // an error: one is registered already, it stays
			}
		}
		c.Flags().VisitAll(register)
		c.PersistentFlags().VisitAll(register) // fleet's -o, say: its subcommands'

		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

type completer = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

func completerFor(c *cobra.Command, f *pflag.Flag, g *globals) completer {
	switch f.Name {
	case "mode":
		return fixedValues(modesNamed(f.Usage))
	case "output":
		return fixedValues(formatsNamed(f.Usage))
	case "skip", "ignore":
		return checkIDs(f.Name == "ignore" && wordIn("all", f.Usage))
	case "select":
		if strings.Contains(" "+c.CommandPath()+" ", " fleet ") {
			return nil // the hosts' GPUs, not this one's
		}
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return hostGPUs(g), cobra.ShellCompDirectiveNoFileComp
		}
	}
	return nil
}

func fixedValues(vs []string) completer {
	if len(vs) == 0 {
		return nil
	}
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vs, cobra.ShellCompDirectiveNoFileComp
	}
}

// modesNamed are the modes usage names, every mode where it names none.
func modesNamed(usage string) []string {
	var out, all []string
	for _, m := range preflight.Modes {
		all = append(all, string(m))
		if wordIn(string(m), usage) {
			out = append(out, string(m))
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

// formatsNamed are the output formats usage names before its first
// parenthesis (which explains one of them), in its order.
func formatsNamed(usage string) []string {
	usage, _, _ = strings.Cut(usage, "(")
	var out []string
	for _, f := range outputFormats {
		if wordIn(f, usage) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return wordAt(a, usage) - wordAt(b, usage) })
	return out
}

func wordIn(word, s string) bool { return wordAt(word, s) >= 0 }

// wordAt is where word is in s as a word of its own (not part of
// vm-vgpu's), -1 where it is not.
func wordAt(word, s string) int {
	loc := regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(word) + `($|[^a-z0-9-])`).FindStringIndex(s)
	if loc == nil {
		return -1
	}
	return loc[0]
}

// checkIDs completes a comma-separated list of check IDs (and "all" when
// all): the values already in the list are kept as its prefix and not
// offered again.
func checkIDs(all bool) completer {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		var given []string
		prefix := ""
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			prefix = toComplete[:i+1]
			given = strings.Split(toComplete[:i], ",")
		}
		var out []string
		if all && prefix == "" {
			out = append(out, "all\tevery check")
		}
		for _, c := range preflight.All() {
			if !slices.Contains(given, c.ID) {
				out = append(out, prefix+c.ID+"\t"+c.Title)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// hostGPUs are the PCI addresses of --root's NVIDIA GPUs (what --select
// defaults to), each described by its name and driver; none when the host
// cannot be read.
func hostGPUs(g *globals) []string {
	root, err := g.hostRoot()
	if err != nil {
		return nil
	}
	inv, err := pci.Discover(root)
	if err != nil {
		return nil
	}
	gpus, _ := pci.Selector{}.Select(inv)
	inv.Name(root, gpus)
	var out []string
	for _, d := range gpus {
		desc := strings.TrimSpace(d.VendorName + " " + d.Name)
		if d.Driver != "" {
			desc += " (" + d.Driver + ")"
		}
		out = append(out, d.Address+"\t"+sanitize.Terminal(desc))
	}
	return out
}
