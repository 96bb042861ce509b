package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/internal/snapshot"
	"github.com/gpuprep/gpuprep/provision"
)

// systemDisk is r named a system disk (--system-disk): a --root DIR that
// is neither / nor a snapshot, packed or unpacked. A program run from a
// root is that root's code run as root, and chroot does not keep a root
// process in, so gpuprep runs one only where the user said the root is a
// system disk, and never for a snapshot, which anyone may have made.
func systemDisk(g *globals, r *host.Root) (*host.Root, error) {
	switch {
	case r.IsLive():
		return nil, usageErr("--system-disk names a --root DIR other than /")
	case isTarball(g.root):
		return nil, usageErr("--system-disk: --root %s is a packed snapshot, not a system disk", g.root)
	case snapshot.IsSnapshot(r):
		return nil, usageErr("--system-disk: --root %s is a gpuprep snapshot (%s), not a system disk: its programs are not run", g.root, snapshot.Marker)
	}
	return r.SystemDisk(), nil
}

// errNotSystemDisk is why a root's own programs are not run: it was not
// named a system disk.
func errNotSystemDisk(r *host.Root) error {
	return fmt.Errorf("--root %s: gpuprep runs a root's own programs (inside it, with chroot) only for a system disk named with --system-disk, never for a snapshot", r.Name())
}

// offlineImageHow is, for each writing command an offline image (a system
// disk) does not take, what the user does instead.
var offlineImageHow = map[string]string{
	"apply":        "its binds, drivers and vGPUs need the node's running kernel, and a file-only apply with the binds deferred to the image's first boot is not supported; write the image's file steps with gpuprep grub ensure and gpuprep label --before-join (--root DIR --system-disk), and run gpuprep apply on the node after its first boot",
	"vfio bind":    "binding changes the running kernel's sysfs and drivers, and the persistence files of --persist alone (the binds deferred to the image's first boot) are not written into an image; run gpuprep vfio bind --persist on the node after its first boot",
	"vfio unbind":  "unbinding changes the running kernel's sysfs and drivers; run it on the node",
	"vgpu install": "the vGPU manager's installer builds and loads kernel modules and starts daemons of a running system; run it on the node after its first boot",
	"vgpu apply":   "vGPUs are made in a running kernel's sysfs, and the unit of --persist alone (the vGPUs deferred to the image's first boot) is not written into an image; run gpuprep vgpu apply --persist on the node after its first boot",
}

// errOfflineImage refuses a writing command that an offline image (--root
// DIR --system-disk) does not take: one message naming the rule
// (docs/root.md), before the lock and before anything is read or written,
// for a dry run too (it would show changes the image cannot take).
func errOfflineImage(name string, root *host.Root) error {
	how := offlineImageHow[name]
	if how == "" {
		how = "it changes a running kernel"
	}
	return usageErr("--root %s --system-disk: gpuprep %s does not write an offline image (only grub ensure, grub remove, label --before-join and rollback do): %s; see docs/root.md", root.Name(), name, how)
}

// offlineImagePlanNote says, on stderr, under a plan for an offline image
// (--root DIR --system-disk), that apply does not write the image
// (errOfflineImage), and which of the plan's steps the image does take, by
// which command: the plan shows what a node in the image's state needs,
// not what gpuprep will write there.
func offlineImagePlanNote(w io.Writer, root *host.Root, p *provision.Plan, viaAPI bool) {
	if root == nil || !root.IsSystemDisk() || len(p.Steps) == 0 {
		return
	}
	var take []string
	for _, s := range p.Steps {
		switch s.ID {
		case provision.StepKernelArgs:
			take = append(take, "the kernel-args step (gpuprep grub ensure)")
		case provision.StepLabel:
			if viaAPI {
				take = append(take, "the label step (gpuprep label --kubeconfig: the cluster's change, journalled on this machine)")
			} else {
				take = append(take, "the label step (gpuprep label --before-join)")
			}
		}
	}
	how := "none of this plan's steps is written into an image: run them on the node after its first boot"
	if len(take) > 0 {
		how = "of this plan, run " + strings.Join(take, " and ") + " with --root " + root.Name() + " --system-disk, the other steps on the node after its first boot"
	}
	fmt.Fprintf(sanitize.NewWriter(w), "gpuprep: note: --root %s --system-disk is an offline image: gpuprep apply does not write it (docs/root.md); %s\n", root.Name(), how)
}
