package main

import (
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// deps are what commands reach the machine through beyond --root: the
// runners of its programs and the clock. execute gives the real ones
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
}

// realDeps are the machine's own.
func realDeps() *deps {
	return &deps{grubRunner: hostGrubRunner, grubNow: time.Now, vgpuApplyRunner: host.DefaultRunner, provisionQuery: host.DefaultRunner}
}

// dep is the command's deps: the ones given, else the real ones.
func (g *globals) dep() *deps {
	if g.deps == nil {
		g.deps = realDeps()
	}
	return g.deps
}
