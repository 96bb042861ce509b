package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/internal/snapshot"
)

// Exit codes (documented in docs/exit-codes.md; TestDocsExitCodes holds the two together).
const (
	exitOK         = 0
	exitNotReady   = 1
	exitUsage      = 2
	exitUnknown    = 3
	exitNeedReboot = 4
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error // nil: nothing more to print
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func usageErr(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// globals are the flags every command shares.
type globals struct {
	root string
	deps *deps // what commands reach the machine through (nil: realDeps)
	// systemDisk: --system-disk, the user names --root a system disk,
	// whose own programs (update-grub, grubby, …) may run inside it
	systemDisk bool
	rec        *host.Recorder // gpuprep snapshot: notes what the command reads
	unpacked   string         // --root FILE.tar.gz: where it was unpacked, removed when the command ends
	release    func()         // ends unpacked's removal on an interrupt
	lock       *os.File       // the host's gpuprep lock, held by a command that changes the host
	// interrupted: an interrupt arrived while a command changed the host
	// (see deferInterrupts); stopInterrupts ends that handling
	interrupted atomic.Bool
	// checkOnly: the command line runs check, so the root gets no other
	// subcommand (see executeWith)
	checkOnly bool
	changing  atomic.Bool // the command has begun to change the host (apply: once confirmed)
	// stopsBetweenSteps: an interrupt stops the command before its next
	// step (apply), not at its end
	stopsBetweenSteps bool
	stopInterrupts    func()
}

// isTarball reports whether p names a packed snapshot (gpuprep snapshot FILE.tar.gz).
func isTarball(p string) bool { return strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tgz") }

// rootDir is --root's directory; a packed snapshot is unpacked once, into a
// temporary directory that goes when the command ends (hostRoot freezes it:
// a command that would change files there fails instead).
func (g *globals) rootDir() (string, error) {
	if !isTarball(g.root) {
		return g.root, nil
	}
	if g.unpacked != "" {
		return g.unpacked, nil
	}
	fi, err := os.Stat(g.root)
	if err != nil {
		return "", usageErr("--root: %v", err)
	}
	if !fi.Mode().IsRegular() {
		return "", usageErr("--root %s: not a file", g.root)
	}
	dir, err := os.MkdirTemp("", "gpuprep-root-")
	if err != nil {
		return "", err
	}
	g.unpacked, g.release = dir, removeOnSignal(dir, g.dep().exitOnSignal)
	done := tempsBusy()
	err = snapshot.UnpackUntil(g.root, dir, tempsStopped)
	done()
	if err != nil {
		g.cleanup()
		if errors.Is(err, snapshot.ErrStopped) {
			return "", interrupted()
		}
		return "", usageErr("--root: %v", err)
	}
	return dir, nil
}

func (g *globals) cleanup() {
	g.unlock()
	if g.unpacked != "" {
		// a packed --root's unpacked copy, in the temporary directory: the
		// command has ended, nothing of it is lost with a failed removal
		_ = os.RemoveAll(g.unpacked)
		g.release()
		g.unpacked, g.release = "", nil
	}
}

func (g *globals) hostRoot() (*host.Root, error) {
	dir, err := g.rootDir()
	if err != nil {
		return nil, err
	}
	r, err := host.NewRoot(dir)
	if err != nil {
		return nil, usageErr("--root: %v", err)
	}
	if g.systemDisk {
		if r, err = systemDisk(g, r); err != nil {
			return nil, err
		}
	}
	if g.unpacked != "" {
		r = r.Frozen("--root " + g.root + " is a packed snapshot, unpacked for this command only: it is read, never changed (changes belong on the node, or on a system disk: --root DIR --system-disk)").Named(g.root)
	}
	if g.rec != nil {
		r = r.Recording(g.rec)
	}
	return r, nil
}

var version = "dev"

func newRootCmdWith(stdout, stderr io.Writer, g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpuprep",
		Short: "Prepare bare-metal GPU nodes for containers and VMs on Kubernetes",
		Long: `gpuprep checks and prepares GPU nodes for a Kubernetes cluster that runs GPU
containers and GPU virtual machines (KubeVirt + the NVIDIA GPU Operator with
sandbox workloads): CPU virtualization, IOMMU, kernel arguments, IOMMU groups,
drivers, VFIO and vGPU.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return hostLock(c, g) }
	cmd.PersistentFlags().StringVar(&g.root, "root", g.root, "directory that stands in for / (a host snapshot or fixture), or a snapshot packed by gpuprep snapshot FILE.tar.gz; env GPUPREP_ROOT")
	cmd.PersistentFlags().BoolVar(&g.systemDisk, "system-disk", false, "--root DIR is a system disk (a scratch install, a mounted node disk), not a snapshot: commands that run its own programs (update-grub, grubby, update-initramfs, …) run them inside it with chroot")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	cmd.AddCommand(newCheckCmd(g))
	// nor cobra's completion command
	cmd.CompletionOptions.DisableDefaultCmd = g.checkOnly
	if !g.checkOnly {
		cmd.AddCommand(newChecksCmd())
		for _, sub := range subcommands {
			cmd.AddCommand(sub(g))
		}
		addCompletions(cmd, g)
	}
	return cmd
}

// subcommands are the commands each cmd/gpuprep/<name>.go registers from
// its init function, so that adding a command touches only its own file.
var subcommands []func(*globals) *cobra.Command

func register(c func(*globals) *cobra.Command) { subcommands = append(subcommands, c) }

// execute runs gpuprep with args and returns the process exit code.
func execute(args []string, stdout, stderr io.Writer) int {
	return executeWith(args, stdout, stderr, &globals{root: os.Getenv("GPUPREP_ROOT")})
}

func executeWith(args []string, stdout, stderr io.Writer, g *globals) int {
	defer g.cleanup()
	// A fleet runs `gpuprep check` on every host, and scripts do too: the
	// other commands' trees (about 40 commands and their flags: 0.1 ms and
	// 170 kB in a process that starts and checks in 4 ms) are not built for
	// it. Only when check comes first: after a flag (gpuprep -h check) the
	// root's help must list every command.
	g.checkOnly = len(args) > 0 && args[0] == "check"
	cmd := newRootCmdWith(stdout, stderr, g)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "gpuprep:", sanitize.Lines(ee.err.Error()))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "gpuprep:", sanitize.Lines(err.Error()))
	// cobra's own errors (unknown command, bad arguments) are usage errors.
	return exitUsage
}
