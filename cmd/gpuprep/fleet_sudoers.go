package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

// sudoersCommand is fleet sudoers: the sudoers line pinning the binary the
// fleet deploys by its SHA-256.
func (c *fleetCmd) sudoersCommand() *cobra.Command {
	var user, cacheDir string
	cmd := &cobra.Command{
		Use:   "sudoers [--user USER [--cache-dir DIR] | -i INVENTORY] [--agent-binary FILE|DIR]...",
		Short: "Print the sudoers rule that lets the login user run exactly this gpuprep as root",
		Long: `fleet sudoers prints, for the login user (--user, or each login user of the
inventory's selected hosts), the sudoers line that allows running as root, without
a password, the gpuprep binary fleet deploys (this one, or --agent-binary) and no
other file:

  USER ALL=(root) NOPASSWD: sha256:DIGEST CACHE/DIGEST/gpuprep

sudo hashes the file before running it and runs the very file it hashed, so
neither the user nor anyone who can write the cache can get another program run
as root through the rule, unlike a wildcard rule on CACHE/*/gpuprep, which grants
the user root. What it does grant: gpuprep, with any arguments, as root. Each new
gpuprep build has a new digest: install its line before the fleet uses it.

With a binary per architecture (--agent-binary repeated or a directory such as
make dist's, or the gpuprep-linux-<arch> files beside this one) it prints one line
per architecture's digest for each user: a host runs only the one for its own.

CACHE is the inventory's gpuprep_cache_dir, else --cache-dir, else ~USER/.cache/gpuprep
assumed at /home/USER (/root for root); check the hosts' HOME. Put the lines in a
file under /etc/sudoers.d (mode 0440) and check it with visudo -cf FILE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.printSudoers(cmd.OutOrStdout(), user, cacheDir)
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the login user the rule is for (instead of the inventory's)")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "the hosts' gpuprep_cache_dir for --user (default: /home/USER/.cache/gpuprep)")
	return cmd
}

// sudoersTarget is one login user and cache directory a rule is for.
type sudoersTarget struct{ user, cacheDir string }

func (c *fleetCmd) sudoersTargets(user, cacheDir string) ([]sudoersTarget, error) {
	if user != "" {
		if c.inventory != "" {
			return nil, usageErr("--user and --inventory: give one")
		}
		if cacheDir == "" {
			cacheDir = fleet.DefaultCacheHome(user)
		}
		return []sudoersTarget{{user, cacheDir}}, nil
	}
	if cacheDir != "" {
		return nil, usageErr("--cache-dir goes with --user (an inventory gives gpuprep_cache_dir)")
	}
	if c.inventory == "" {
		return nil, usageErr("--user or --inventory (-i) is required")
	}
	hosts, err := c.hosts()
	if err != nil {
		return nil, err
	}
	var out []sudoersTarget
	seen := map[sudoersTarget]bool{}
	for _, h := range hosts {
		t := sudoersTarget{h.User, h.Var("gpuprep_cache_dir")}
		if t.cacheDir == "" {
			t.cacheDir = fleet.DefaultCacheHome(h.User)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func (c *fleetCmd) printSudoers(w io.Writer, user, cacheDir string) error {
	targets, err := c.sudoersTargets(user, cacheDir)
	if err != nil {
		return err
	}
	bins, err := c.agents()
	if err != nil {
		return err
	}
	for _, bin := range bins {
		fmt.Fprintf(w, "# gpuprep %s (%s, %s)\n", bin.SHA256, bin.Path, bin.Arch)
	}
	for _, t := range targets {
		if t.user == "root" {
			fmt.Fprintf(w, "# root logs in: no sudo rule is needed (cache %s)\n", t.cacheDir)
			continue
		}
		fmt.Fprintf(w, "# %s\n", strings.ReplaceAll(strings.ReplaceAll(fleet.SudoersGrant, "USER", t.user), "\n", "\n# "))
		for _, bin := range bins {
			line, err := fleet.SudoersRule(t.user, t.cacheDir, bin.SHA256)
			if err != nil {
				return usageErr("%v", err)
			}
			if len(bins) > 1 {
				fmt.Fprintf(w, "# %s hosts\n", bin.Arch)
			}
			fmt.Fprintln(w, line)
		}
	}
	return nil
}
