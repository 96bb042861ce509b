package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
)

// initramfsKernel is the fixture kernel simulator whose update-initramfs -u
// does what the real one does as far as gpuprep cares: it remakes the
// running kernel's /boot/initrd.img-KVER from /etc/modprobe.d, by rename
// (fixture.Builder.Initramfs). before, when set, runs first: a test's
// stand-in for a kill there, or the crash test's marker.
type initramfsKernel struct {
	*fixture.Kernel
	before func()
}

func (k initramfsKernel) Run(ctx context.Context, argv ...string) ([]byte, error) {
	out, err := k.Kernel.Run(ctx, argv...) // records it; fails where Fail says
	if err != nil || len(argv) == 0 || argv[0] != "update-initramfs" {
		return out, err
	}
	if k.before != nil {
		k.before()
	}
	kver, _ := k.Root.ReadString("/proc/sys/kernel/osrelease")
	return nil, fixture.New(k.Root.Dir()).Initramfs(kver).Err()
}

// initramfsSim makes apply, rollback and vfio bind act through
// initramfsKernel (a new one per command); last is the newest, for its
// commands; before is given to the next ones.
type initramfsSim struct {
	last   *fixture.Kernel
	before func()
	deps   *deps // the deps simulatedInitramfs set the kernel in
}

func simulatedInitramfs(t *testing.T, d *deps) *initramfsSim {
	t.Helper()
	sim := &initramfsSim{deps: d}
	mk := func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		sim.last = k
		r := initramfsKernel{Kernel: k, before: sim.before}
		return r, r, err
	}
	d.provisionKernel, d.vfioKernel = mk, mk
	return sim
}

// ran counts how often the newest simulator ran argv.
func (s *initramfsSim) ran(argv ...string) int {
	n := 0
	for _, c := range s.last.Commands {
		if strings.Join(c, " ") == strings.Join(argv, " ") {
			n++
		}
	}
	return n
}

// killedAtInitramfs runs gpuprep args and stops it dead when it runs
// update-initramfs, before the image is made: what was written and
// journalled before stays, nothing after it runs (as a SIGKILL there; the
// command's deferred calls do run).
func (s *initramfsSim) killedAtInitramfs(t *testing.T, args ...string) {
	t.Helper()
	s.before = runtime.Goexit
	defer func() { s.before = nil }()
	finished := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		var out, errb strings.Builder
		executeWith(args, &out, &errb, &globals{root: os.Getenv("GPUPREP_ROOT"), deps: s.deps})
		finished = true
	}()
	<-done
	require.False(t, finished, "gpuprep %s never ran update-initramfs", strings.Join(args, " "))
}

const (
	offKernel = "5.15.0-91-generic" // iommu-off-kernel's
	offImage  = "/boot/initrd.img-" + offKernel
)

// passthroughNode is iommu-off-kernel with update-grub and
// update-initramfs (and, with image, the initramfs the running kernel
// booted, made an hour ago from the fixture's /etc/modprobe.d), before any
// apply.
func passthroughNode(t *testing.T, image bool) string {
	t.Helper()
	root := fixtureRoot(t, "iommu-off-kernel")
	withTools(t, root)
	if image {
		require.NoError(t, fixture.New(root).Initramfs(offKernel).Touch(offImage, time.Now().Add(-time.Hour)).Err())
	}
	return root
}

// toReboot runs the first apply (kernel arguments, stop at the reboot) and
// reboots the node.
func toReboot(t *testing.T, d *deps, root string) {
	t.Helper()
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNeedReboot, code, out+errs)
	simulateReboot(t, root)
}

func applyPassthrough(t *testing.T, d *deps, root string) string {
	t.Helper()
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Contains(t, []int{exitOK, exitNotReady}, code, out+errs)
	require.NotContains(t, out+errs, "failed", out+errs)
	return out
}

func planPassthrough(t *testing.T, root string) planJSON { return planMode(t, root, "vm-passthrough") }

func planMode(t *testing.T, root, mode string) planJSON {
	t.Helper()
	out, errs, code := gpuprep(t, "plan", "--root", root, "--mode", mode, "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	return p
}

// resumes checks the re-run (by apply, of mode) of an apply killed in step
// at update-initramfs: it resumes step, regenerates the initramfs once and
// ends as an uninterrupted apply (want, the GPU on driver); run again, it
// does nothing: no command, no journal entry, an empty plan.
func (s *initramfsSim) resumes(t *testing.T, root, mode, step string, want map[string]string, driver string, d *deps, apply func(*testing.T, *deps, string) string) {
	t.Helper()
	require.Contains(t, apply(t, d, root), "resuming: step "+step)
	require.Equal(t, 1, s.ran("update-initramfs", "-u"), "regenerated once")
	require.Equal(t, want, tree(t, root), "as after an uninterrupted apply")
	require.Equal(t, driver, driverOf(t, root, offGPU))
	require.Empty(t, unfinished(t, root))

	// finished: a re-run does nothing
	n := journalLen(t, root)
	require.Contains(t, apply(t, d, root), "Nothing to do")
	require.Empty(t, s.last.Commands)
	require.Equal(t, n, journalLen(t, root))
	require.Empty(t, planMode(t, root, mode).Steps)
}

func unfinished(t *testing.T, root string) []string {
	t.Helper()
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	return provision.Unfinished(es)
}

func readImage(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, offImage))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// Apply killed in the vfio-bind step after the persistent files were
// written and before update-initramfs: the re-run regenerates the initramfs
// once (the plan says so), ends where an uninterrupted apply ends, is then
// a no-op, and rollback restores everything. With an initramfs image the
// image's age tells; without one (a layout gpuprep does not know) the
// journal's unfinished step does.
func TestApplyRegeneratesInitramfsAfterKill(t *testing.T) {
	for _, image := range []bool{true, false} {
		t.Run(map[bool]string{true: "image-older", false: "no-image"}[image], func(t *testing.T) {
			d := realDeps()
			sim := simulatedInitramfs(t, d)

			// what an uninterrupted apply leaves
			ref := passthroughNode(t, image)
			toReboot(t, d, ref)
			applyPassthrough(t, d, ref)
			require.Equal(t, 1, sim.ran("update-initramfs", "-u"))
			want := tree(t, ref)
			require.Contains(t, want[strings.TrimPrefix(offImage, "/")], "== etc/modprobe.d/gpuprep-vfio.conf\n")

			root := passthroughNode(t, image)
			orig := tree(t, root)
			toReboot(t, d, root)
			sim.killedAtInitramfs(t, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
			require.FileExists(t, filepath.Join(root, vfio.ModprobeConf))
			require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
			require.NotContains(t, readImage(t, root), "gpuprep-vfio.conf", "killed before the initramfs was made")
			require.Equal(t, []string{provision.StepVFIOBind}, unfinished(t, root))

			p := planPassthrough(t, root)
			require.Equal(t, []string{"vfio-bind", "label"}, p.ids())
			s := p.Steps[0]
			require.Empty(t, s.Files, "the files are as wanted")
			require.Empty(t, s.Sysfs, "the GPU is on vfio-pci")
			require.Equal(t, []string{"update-initramfs -u"}, s.Commands)
			require.Contains(t, s.Title, "regenerate the initramfs")
			why := "the journal shows it started and not done"
			if image {
				why = "the initramfs (" + offImage + ") is older than /etc/"
			}
			require.Contains(t, strings.Join(s.Notes, "\n"), why)

			sim.resumes(t, root, "vm-passthrough", provision.StepVFIOBind, want, "vfio-pci", d, applyPassthrough)

			_, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitNeedReboot, code, errs)
			require.Equal(t, 1, sim.ran("update-initramfs", "-u"))
			require.Equal(t, "nvidia", driverOf(t, root, offGPU))
			if image {
				require.Equal(t, orig, tree(t, root), "the initramfs remade without gpuprep's files")
			} else {
				got := tree(t, root)
				require.NotContains(t, got[strings.TrimPrefix(offImage, "/")], "gpuprep-vfio.conf")
				delete(got, strings.TrimPrefix(offImage, "/"))
				require.Equal(t, orig, got)
			}
			out, _, code := gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, 0, code)
			require.Contains(t, out, "Nothing to roll back.")
		})
	}
}

// `gpuprep vfio bind --persist` killed before update-initramfs: no apply
// step is open in the journal, the files are as wanted and the GPU on
// vfio-pci, and only the initramfs's age says it lacks them. apply plans
// and runs the regeneration, once; vfio bind, run again instead, does too.
func TestApplyRegeneratesInitramfsOlderThanVFIOFiles(t *testing.T) {
	d := realDeps()
	sim := simulatedInitramfs(t, d)
	root := passthroughNode(t, true)
	toReboot(t, d, root)
	sim.killedAtInitramfs(t, "vfio", "bind", "--persist", "--root", root)
	require.FileExists(t, filepath.Join(root, vfio.ModulesLoad))
	require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
	require.Empty(t, unfinished(t, root))
	stale := tree(t, root)

	// vfio bind again: it regenerates
	out, errs, code := gpuprepWith(t, d, "vfio", "bind", "--persist", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Equal(t, 1, sim.ran("update-initramfs", "-u"), out)
	require.Contains(t, out, "note: regenerated the initramfs: the initramfs ("+offImage+") is older than /etc/")
	require.Contains(t, readImage(t, root), "== etc/modprobe.d/gpuprep-vfio.conf\n")
	_, _, code = gpuprepWith(t, d, "vfio", "bind", "--persist", "--root", root)
	require.Equal(t, 0, code)
	require.Zero(t, sim.ran("update-initramfs", "-u"), "the initramfs is newer now")

	// or apply: back to the stale initramfs
	img := filepath.Join(root, offImage)
	require.NoError(t, os.WriteFile(img, []byte(stale[strings.TrimPrefix(offImage, "/")]), 0o644))
	require.NoError(t, os.Chtimes(img, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))
	require.Equal(t, stale, tree(t, root))
	p := planPassthrough(t, root)
	require.Equal(t, []string{"vfio-bind", "label"}, p.ids())
	require.Equal(t, []string{"update-initramfs -u"}, p.Steps[0].Commands)
	require.Empty(t, p.Steps[0].Files)
	applyPassthrough(t, d, root)
	require.Equal(t, 1, sim.ran("update-initramfs", "-u"))
	require.Contains(t, readImage(t, root), "== etc/modprobe.d/gpuprep-vfio.conf\n")
	out = applyPassthrough(t, d, root)
	require.Contains(t, out, "Nothing to do")
	require.Empty(t, sim.last.Commands)
}

// update-initramfs failing: vfio bind undoes the step (files and driver),
// so the re-run plans and runs it whole, with update-initramfs once.
func TestApplyInitramfsFailureRetried(t *testing.T) {
	d := realDeps()
	sim := simulatedInitramfs(t, d)
	root := passthroughNode(t, true)
	toReboot(t, d, root)
	before := tree(t, root)
	fail := true
	old := d.provisionKernel
	d.provisionKernel = func(r *host.Root) (vfio.Sysfs, host.Runner, error) {
		s, run, err := old(r)
		if fail {
			sim.last.Fail["update-initramfs -u"] = os.ErrPermission
		}
		return s, run, err
	}
	_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes")
	require.Equal(t, exitNotReady, code)
	require.Contains(t, errs, "regenerate the initramfs")
	require.Equal(t, before, tree(t, root), "undone")
	require.Equal(t, "nvidia", driverOf(t, root, offGPU))

	fail = false
	require.Len(t, planPassthrough(t, root).Steps[0].Files, 2)
	applyPassthrough(t, d, root)
	require.Equal(t, 1, sim.ran("update-initramfs", "-u"))
	require.Contains(t, readImage(t, root), "== etc/modprobe.d/gpuprep-vfio.conf\n")
	require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
}

func applyContainer(t *testing.T, d *deps, root string) string {
	t.Helper()
	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, exitOK, code, out+errs)
	require.NotContains(t, out+errs, "failed", out+errs)
	return out
}

// apply --mode container on a node gpuprep bound to vfio-pci persistently,
// killed in the vfio-unbind step after gpuprep's persistent files were
// removed and before update-initramfs: nothing on disk tells (the files are
// gone), the journal's unfinished step does. The re-run plans and runs only
// the regeneration, once, ends where an uninterrupted apply ends, and is
// then a no-op.
func TestApplyContainerRegeneratesInitramfsAfterKill(t *testing.T) {
	for _, image := range []bool{true, false} {
		t.Run(map[bool]string{true: "image", false: "no-image"}[image], func(t *testing.T) {
			d := realDeps()
			sim := simulatedInitramfs(t, d)
			bound := func() string {
				root := passthroughNode(t, image)
				toReboot(t, d, root)
				applyPassthrough(t, d, root)
				require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
				require.Contains(t, readImage(t, root), "== etc/modprobe.d/gpuprep-vfio.conf\n")
				return root
			}

			// what an uninterrupted apply leaves
			ref := bound()
			applyContainer(t, d, ref)
			require.Equal(t, 1, sim.ran("update-initramfs", "-u"))
			want := tree(t, ref)
			require.NotContains(t, want[strings.TrimPrefix(offImage, "/")], "gpuprep-vfio.conf")
			require.Equal(t, "nvidia", driverOf(t, ref, offGPU))

			root := bound()
			sim.killedAtInitramfs(t, "apply", "--root", root, "--mode", "container", "--yes")
			require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))
			require.NoFileExists(t, filepath.Join(root, vfio.ModulesLoad))
			require.Equal(t, "nvidia", driverOf(t, root, offGPU))
			require.Contains(t, readImage(t, root), "== etc/modprobe.d/gpuprep-vfio.conf\n", "killed before the initramfs was made")
			require.Equal(t, []string{provision.StepVFIOUnbind}, unfinished(t, root))

			p := planMode(t, root, "container")
			require.Equal(t, []string{"vfio-unbind", "label"}, p.ids())
			s := p.Steps[0]
			require.Empty(t, s.Files)
			require.Empty(t, s.Sysfs, "the GPU is back on nvidia")
			require.Equal(t, []string{"update-initramfs -u"}, s.Commands)
			require.Contains(t, s.Title, "regenerate the initramfs")
			require.Contains(t, strings.Join(s.Notes, "\n"), "the journal shows it started and not done")

			sim.resumes(t, root, "container", provision.StepVFIOUnbind, want, "nvidia", d, applyContainer)
		})
	}
}
