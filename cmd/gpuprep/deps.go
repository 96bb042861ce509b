package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// deps are what commands reach the machine through beyond --root: the
// runners of its programs, its sysfs, the clock, the terminal, the
// process's lifetime. execute gives the real ones
// (realDeps); tests build their own and pass them in globals, instead of
// replacing package variables.
type deps struct {
	// grubRunner runs grub ensure/remove's regeneration commands.
	grubRunner func(*host.Root) host.Runner
	// grubNow is the time grub's backups and journal entries are stamped with.
	grubNow func() time.Time
	// vgpuApplyRunner runs vgpu apply's commands (nvidia-smi for the
	// heterogeneous mode, --persist's systemctl).
	vgpuApplyRunner func(*host.Root) host.Runner
	// provisionQuery answers plan's read-only queries (systemctl
	// is-active, a package's file list): the host's commands on /, none on
	// another root.
	provisionQuery func(*host.Root) host.Runner
	// gpuprepBinary is the file the --persist unit's and the NFD timer's
	// gpuprep is copied from (vgpu.InstalledBinary, which they run): the
	// running image itself, whatever has been put at its path since it
	// started.
	gpuprepBinary func() string
	// vgpuSysfs is what vgpu apply and install write the vGPU attributes
	// through: the host root itself.
	vgpuSysfs func(*host.Root) vgpu.AttrWriter
	// vgpuInstallRunner gives the runner vgpu install runs commands
	// through; against a root other than / only --dry-run works.
	vgpuInstallRunner func(root *host.Root, dryRun bool) (host.Runner, error)
	// vgpuQueryRunner runs the read-only queries of a .deb or .rpm
	// --driver (dpkg-deb -f/-c, rpm -qp/-qlp) on this machine, also for a
	// --dry-run against another root.
	vgpuQueryRunner func() host.Runner
	// confirmInput is where apply and fleet apply read the answer to their
	// question; stdinTTY says whether that is a terminal.
	confirmInput io.Reader
	stdinTTY     func() bool
	// agentContext is gpuprep agent's lifetime.
	agentContext func() (context.Context, context.CancelFunc)
	// snapshotRun runs one command of gpuprep snapshot's comparison (on
	// the node, then on the snapshot) and returns what it printed and its
	// exit code.
	snapshotRun func(args []string, g *globals) string
	// fixtureRootsWritable lets a writing command change a --root other
	// than / that is not a system disk (rootRule): the tests' fixture
	// roots, whose sysfs is the kernel simulator. Never true in gpuprep
	// itself (fixtureRoots is set only by the tests' own init).
	fixtureRootsWritable bool
	// provisionKernel gives what apply and rollback change the running
	// kernel through: sysfs and commands of this machine; against a root
	// other than / it refuses. Tests give the fixture kernel simulator
	// (internal/fixture.Kernel), which reacts to sysfs writes as the kernel
	// does and records commands.
	provisionKernel func(*host.Root) (vfio.Sysfs, host.Runner, error)
	// vfioKernel gives what vfio bind and unbind change the kernel
	// through; on a root other than / only --dry-run and status are
	// possible.
	vfioKernel func(*host.Root) (vfio.Sysfs, host.Runner, error)
	// exitOnSignal ends the process after an interrupt (tests deliver a
	// real signal and keep the test process).
	exitOnSignal func(code int)
	// thisMachine is / — the root of the machine gpuprep runs on, where
	// a change that is not a --root's (a label through the API) is
	// journalled (labelJournal). Tests give a fixture root for it.
	thisMachine func() (*host.Root, error)
}

// fixtureRoots is set by cmd/gpuprep's tests (fixture_roots_test.go) and by
// nothing else: realDeps' fixtureRootsWritable in a test binary.
var fixtureRoots bool

// realDeps are the machine's own.
func realDeps() *deps {
	return &deps{
		grubRunner:        hostGrubRunner,
		grubNow:           time.Now,
		vgpuApplyRunner:   host.DefaultRunner,
		provisionQuery:    host.DefaultRunner,
		gpuprepBinary:     func() string { return "/proc/self/exe" },
		vgpuSysfs:         func(root *host.Root) vgpu.AttrWriter { return root },
		vgpuInstallRunner: hostVGPUInstallRunner,
		vgpuQueryRunner:   func() host.Runner { return host.ExecRunner{} },
		confirmInput:      os.Stdin,
		stdinTTY:          func() bool { return isatty.IsTerminal(os.Stdin.Fd()) || isatty.IsCygwinTerminal(os.Stdin.Fd()) },
		agentContext:      agentLifetime,
		snapshotRun:       runOnce,
		provisionKernel:   hostProvisionKernel,
		vfioKernel:        hostVFIOKernel,
		exitOnSignal:      os.Exit,
		thisMachine:       func() (*host.Root, error) { return host.NewRoot("/") },

		fixtureRootsWritable: fixtureRoots,
	}
}

// dep is the command's deps: the ones given, else the real ones.
func (g *globals) dep() *deps {
	if g == nil {
		return realDeps()
	}
	if g.deps == nil {
		g.deps = realDeps()
	}
	return g.deps
}
