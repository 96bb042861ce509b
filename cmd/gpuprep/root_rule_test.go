package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rootRuleCommands are the commands that write, each with arguments that
// parse: gpuprep itself (withoutFixtureRoots) refuses every one of them
// against a --root DIR that is not a system disk, before the lock.
var rootRuleCommands = [][]string{
	{"apply", "--mode", "vm-passthrough", "--yes"},
	{"rollback"},
	{"vfio", "bind", "--select", "0000:18:00.0"},
	{"vfio", "unbind", "--select", "0000:18:00.0"},
	{"vgpu", "install", "--driver", "/nonexistent.run"},
	{"vgpu", "apply", "-f", "/nonexistent.yaml", "-c", "x"},
	{"grub", "ensure", "iommu=pt", "foo=1", "--no-regenerate"},
	{"grub", "remove", "iommu", "--no-regenerate"},
	{"label", "--before-join", "--mode", "container"},
}

// One rule for --root (docs/root.md): a writing command changes / or, for
// the file-only ones, a system disk; against another root it is refused
// with one message, exit 2, and leaves the root as it was: no lock file,
// no journal, no file changed.
func TestWritingCommandsRefuseARootThatIsNotASystemDisk(t *testing.T) {
	for _, args := range rootRuleCommands {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			root := fixtureRoot(t, "boot-grub-debian")
			before := treeOf(t, root)
			_, errs, code := gpuprepWith(t, withoutFixtureRoots(), append(args, "--root", root)...)
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "--root "+root+": gpuprep ")
			require.Contains(t, errs, " changes only / (or, for grub ensure, grub remove, label --before-join and rollback, a system disk named with --system-disk)")
			require.NoFileExists(t, filepath.Join(root, lockFile), "a refused run took the lock")
			require.Equal(t, before, treeOf(t, root), "a refused run changed the root")
		})
	}
}

// The commands that change the running kernel refuse a system disk (an
// offline image) with one message naming the rule and what to do instead,
// a dry run too (it would show changes the image cannot take: vfio bind
// --dry-run planned from the image's empty sysfs), and leave the root as it
// was, with no lock behind. Persistence files into an image (vfio bind
// --persist, vgpu apply --persist, a file-only apply) are not supported
// whole, so they are refused, never half done (docs/root.md).
func TestKernelCommandsRefuseASystemDisk(t *testing.T) {
	cases := append([][]string(nil), rootRuleCommands[:6]...)
	cases = append(cases,
		[]string{"vfio", "bind", "--persist", "--select", "10de:2335"},
		[]string{"vfio", "bind", "--persist", "--dry-run"},
		[]string{"vgpu", "apply", "-f", "/nonexistent.yaml", "-c", "x", "--persist"},
		[]string{"vgpu", "apply", "-f", "/nonexistent.yaml", "-c", "x", "--dry-run"})
	for _, args := range cases {
		if args[0] == "rollback" {
			continue
		}
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			root := fixtureRoot(t, "boot-grub-debian")
			before := treeOf(t, root)
			out, errs, code := gpuprepWith(t, withoutFixtureRoots(), append(args, "--root", root, "--system-disk")...)
			require.Equal(t, exitUsage, code, out+errs)
			name := strings.Join(args[:1], " ")
			if args[0] != "apply" {
				name = strings.Join(args[:2], " ")
			}
			require.Contains(t, errs, "gpuprep: --root "+root+" --system-disk: gpuprep "+name+" does not write an offline image (only grub ensure, grub remove, label --before-join and rollback do): ")
			require.Contains(t, errs, "; see docs/root.md")
			require.Empty(t, out)
			require.NoFileExists(t, filepath.Join(root, lockFile))
			require.Equal(t, before, treeOf(t, root), "a refused run changed the root")
		})
	}
}

// A system disk is an offline image: grub ensure and label --before-join
// write it and journal there, and rollback --root DIR --system-disk undoes
// both, leaving the files as they were.
func TestSystemDiskOfflineImageRollsBack(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200") // no update-grub to run
	grubFile := filepath.Join(root, "etc/default/grub")
	grubBefore, err := os.ReadFile(grubFile)
	require.NoError(t, err)
	d := withoutFixtureRoots()
	out, errs, code := gpuprepWith(t, d, "grub", "ensure", "--root", root, "--system-disk", "foo=1", "--no-regenerate")
	require.Equal(t, exitNeedReboot, code, out+errs)
	out, errs, code = gpuprepWith(t, withoutFixtureRoots(), "label", "--root", root, "--system-disk", "--before-join", "--mode", "container")
	require.Equal(t, 0, code, out+errs)
	require.FileExists(t, filepath.Join(root, "var/lib/gpuprep/journal.jsonl"))
	var labelled []string
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(l, "wrote "); ok {
			labelled = append(labelled, strings.Fields(p)[0])
		}
	}
	require.NotEmpty(t, labelled, out)
	for _, p := range labelled {
		got, err := os.ReadFile(filepath.Join(root, p))
		require.NoError(t, err)
		require.Contains(t, string(got), "nvidia.com/gpu.workload.config=container", p)
	}
	grubAfter, _ := os.ReadFile(grubFile)
	require.Contains(t, string(grubAfter), "foo=1")

	out, errs, code = gpuprepWith(t, withoutFixtureRoots(), "rollback", "--root", root, "--system-disk")
	require.Contains(t, []int{0, exitNeedReboot}, code, out+errs)
	got, err := os.ReadFile(grubFile)
	require.NoError(t, err)
	require.Equal(t, string(grubBefore), string(got), out)
	for _, p := range labelled {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err == nil {
			require.NotContains(t, string(got), "nvidia.com/gpu.workload.config", p)
		}
	}
}

// grub ensure --dry-run shows the diff plan shows even where the root has
// no update-grub (the run itself would stop: the dry run says so), exit 0.
func TestGrubEnsureDryRunWithoutUpdateGrubShowsTheDiff(t *testing.T) {
	root := fixtureRoot(t, "hgx-h200")
	require.NoFileExists(t, filepath.Join(root, "usr/sbin/update-grub"))
	out, errs, code := gpuprepWith(t, withoutFixtureRoots(), "grub", "ensure", "--root", root, "foo=1", "--dry-run")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "+++ b/etc/default/grub")
	require.Contains(t, out, `+GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt foo=1"`)
	require.Contains(t, out, "note: without --dry-run this stops before any change: no update-grub")
	require.NotContains(t, out, "note: --no-regenerate:")
	require.NoFileExists(t, filepath.Join(root, lockFile))
}

// treeOf is every path under root with its mode and content.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() && fi.Size() < 1<<16 {
			b, _ := os.ReadFile(p)
			v += string(b)
		}
		m[p] = v
		return nil
	}))
	return m
}

// plan against an offline image shows what a node in the image's state
// needs, and says on stderr that apply does not write the image and which
// of the plan's steps it does take, by which command; -o json stays one
// document, and against any other root there is no such note.
func TestPlanOnAnOfflineImageSaysWhatTheImageTakes(t *testing.T) {
	root := fixtureRoot(t, "iommu-off-kernel")
	out, errs, code := gpuprepWith(t, withoutFixtureRoots(), "plan", "--root", root, "--system-disk", "--mode", "vm-passthrough", "-o", "json")
	require.Contains(t, []int{0, exitNotReady}, code, out+errs)
	require.Contains(t, out, `"id": "kernel-args"`)
	require.Contains(t, errs, "gpuprep: note: --root "+root+" --system-disk is an offline image: gpuprep apply does not write it (docs/root.md); of this plan, run the kernel-args step (gpuprep grub ensure) and the label step (gpuprep label --before-join) with --root "+root+" --system-disk, the other steps on the node after its first boot\n")
	_, errs, _ = gpuprepWith(t, withoutFixtureRoots(), "plan", "--root", root, "--mode", "vm-passthrough")
	require.NotContains(t, errs, "offline image")
}
