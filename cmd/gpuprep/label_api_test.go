package main

// gpuprep label and apply's label step against a real kube-apiserver
// (internal/kube/kubetest: skipped without one, unless GPUPREP_REQUIRE_KUBE=1),
// and gpuprep rollback putting the labels back.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
	"github.com/gpuprep/gpuprep/provision"
)

func labelEntries(t *testing.T, root string) []journal.Entry {
	t.Helper()
	return entriesOfKind(t, root, provision.KindLabel)
}

func TestLabelThroughAPIJournalsAndRollsBack(t *testing.T) {
	s := kubetest.Start(t)
	d := realDeps()
	simulatedKernel(t, d) // rollback acts on the fixture root
	root := fixtureRoot(t, "hgx-h200")
	kc := s.AdminKubeconfig(t)
	// n1: the workload label with another value, a stale vGPU config; n2: neither
	n1 := map[string]string{"zone": "r1", kube.WorkloadLabel: "container", kube.VGPUConfigLabel: "A10-12Q"}
	n2 := map[string]string{"zone": "r2"}
	s.CreateNode(t, "n1", n1)
	s.CreateNode(t, "n2", n2)

	// --dry-run changes and journals nothing
	out, errs, code := gpuprepWith(t, d, "label", "--root", root, "--kubeconfig", kc, "--node", "n1", "--mode", "vm-passthrough", "--dry-run")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "would label (server-side dry run) node n1")
	got, _ := s.NodeLabels(t, "n1")
	require.Equal(t, n1, got)
	require.Equal(t, 0, journalLen(t, root))

	// a journal that cannot be written (not root on a workstation): labelled all the same, with a warning that
	// names what the labels were
	s.CreateNode(t, "n3", map[string]string{"zone": "r3", kube.WorkloadLabel: "container"})
	bad := fixtureRoot(t, "hgx-h200")
	require.NoError(t, os.MkdirAll(filepath.Join(bad, "var/lib"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "var/lib/gpuprep"), nil, 0o644))
	out, errs, code = gpuprepWith(t, d, "label", "--root", bad, "--kubeconfig", kc, "--node", "n3", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, errs, "gpuprep: warning: the change is not recorded for gpuprep rollback (journal: ")
	require.Contains(t, errs, "the labels before it: "+kube.WorkloadLabel+"=container\n")
	got, _ = s.NodeLabels(t, "n3")
	require.Equal(t, map[string]string{"zone": "r3", kube.WorkloadLabel: "vm-passthrough"}, got)

	out, errs, code = gpuprepWith(t, d, "label", "--root", root, "--kubeconfig", kc, "--node", "n1", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, "labelled node n1: nvidia.com/gpu.workload.config=vm-passthrough, removed nvidia.com/vgpu.config\n", out)
	got, _ = s.NodeLabels(t, "n1")
	require.Equal(t, map[string]string{"zone": "r1", kube.WorkloadLabel: "vm-passthrough"}, got)

	// the default kubeconfig ($KUBECONFIG) is journalled as the file it is
	t.Setenv("KUBECONFIG", kc)
	out, errs, code = gpuprepWith(t, d, "label", "--root", root, "--node", "n2", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs)
	got, _ = s.NodeLabels(t, "n2")
	require.Equal(t, map[string]string{"zone": "r2", kube.WorkloadLabel: "vm-passthrough"}, got)

	es := labelEntries(t, root)
	require.Len(t, es, 2)
	require.Equal(t, journal.Entry{Time: es[0].Time, Command: "label", Kind: "label", Device: "n1", Path: kc,
		Before: "nvidia.com/gpu.workload.config=container,nvidia.com/vgpu.config=A10-12Q",
		After:  "nvidia.com/gpu.workload.config,nvidia.com/vgpu.config"}, es[0])
	require.False(t, es[0].Time.IsZero())
	require.Equal(t, "n2", es[1].Device)
	require.Equal(t, kc, es[1].Path)
	require.Equal(t, "", es[1].Before)

	// nothing to change: nothing journalled
	out, errs, code = gpuprepWith(t, d, "label", "--root", root, "--node", "n2", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "nothing to do")
	require.Equal(t, 2, journalLen(t, root))
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // rollback gets it from --kubeconfig

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--kubeconfig", kc)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Rolled back.")
	got, rv1 := s.NodeLabels(t, "n1")
	require.Equal(t, n1, got, "the workload label's old value and the vGPU config are back")
	got, rv2 := s.NodeLabels(t, "n2")
	require.Equal(t, n2, got, "the label it added is gone")

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--kubeconfig", kc)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Nothing to roll back.")
	_, rv := s.NodeLabels(t, "n1")
	require.Equal(t, rv1, rv, "n1 not written again")
	_, rv = s.NodeLabels(t, "n2")
	require.Equal(t, rv2, rv, "n2 not written again")
}

func TestApplyLabelThroughAPIRollsBack(t *testing.T) {
	s := kubetest.Start(t)
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "hgx-h200")
	orig := tree(t, root)
	kc := s.AdminKubeconfig(t)
	before := map[string]string{"zone": "r1", kube.WorkloadLabel: "vm-vgpu", kube.VGPUConfigLabel: "H200-35C"}
	s.CreateNode(t, "gpu-7", before)

	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "container", "--kubeconfig", kc, "--node", "gpu-7", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"label"}, p.ids(), out)

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--kubeconfig", kc, "--node", "gpu-7", "--yes")
	require.Equal(t, 0, code, out+errs)
	got, _ := s.NodeLabels(t, "gpu-7")
	require.Equal(t, map[string]string{"zone": "r1", kube.WorkloadLabel: "container"}, got)
	require.Equal(t, orig, tree(t, root), "through the API: no file of the node changed")
	es := labelEntries(t, root)
	require.Len(t, es, 1)
	require.Equal(t, "apply", es[0].Command)
	require.Equal(t, kc, es[0].Path)

	// without --kubeconfig: the one apply journalled
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Rolled back.")
	got, rv := s.NodeLabels(t, "gpu-7")
	require.Equal(t, before, got)
	require.Equal(t, orig, tree(t, root))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Nothing to roll back.")
	_, rv2 := s.NodeLabels(t, "gpu-7")
	require.Equal(t, rv, rv2)
}

// A label through the API changes the cluster, not --root (docs/root.md):
// with a system disk or another root as --root, which only names the
// node, the change is journalled on this machine (deps.thisMachine, a
// fixture root standing for /), the root is left as it was, and gpuprep
// rollback on this machine puts the labels back.
func TestLabelThroughAPIWithRootJournalsOnThisMachine(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	had := map[string]string{"zone": "r1", kube.WorkloadLabel: "container"}
	s.CreateNode(t, "n1", had)
	img := fixtureRoot(t, "hgx-h200")
	orig := treeOf(t, img) // every file, the journal too
	here := fixtureRoot(t, "hgx-h200")
	d := withoutFixtureRoots()
	d.thisMachine = func() (*host.Root, error) { return host.NewRoot(here) }

	out, errs, code := gpuprepWith(t, d, "label", "--root", img, "--system-disk", "--kubeconfig", kc, "--node", "n1", "--mode", "vm-passthrough")
	require.Equal(t, 0, code, out+errs)
	out, errs, code = gpuprepWith(t, d, "label", "--root", img, "--kubeconfig", kc, "--node", "n1", "--mode", "vm-vgpu", "--vgpu-config", "H200-35C")
	require.Equal(t, 0, code, out+errs)
	got, _ := s.NodeLabels(t, "n1")
	require.Equal(t, map[string]string{"zone": "r1", kube.WorkloadLabel: "vm-vgpu", kube.VGPUConfigLabel: "H200-35C"}, got)
	require.Equal(t, orig, treeOf(t, img), "--root is left as it was: no journal, no lock")
	require.NoFileExists(t, filepath.Join(img, "var/lib/gpuprep/journal.jsonl"))
	es := labelEntries(t, here)
	require.Len(t, es, 2, "journalled on this machine")
	require.Equal(t, "nvidia.com/gpu.workload.config=container", es[0].Before)

	out, errs, code = gpuprepWith(t, withoutFixtureRoots(), "rollback", "--root", img, "--system-disk")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Nothing to roll back.", "the image has nothing of it")
	rd := realDeps()
	simulatedKernel(t, rd)
	out, errs, code = gpuprepWith(t, rd, "rollback", "--root", here, "--kubeconfig", kc)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "Rolled back.")
	got, _ = s.NodeLabels(t, "n1")
	require.Equal(t, had, got)
}

// label --root IMG without --node names the node as the image's first boot
// will: an offline image has no /proc/sys/kernel/hostname (before, label
// read only that and was refused with "cannot tell this host's name (open
// …/proc/sys/kernel/hostname: no such file or directory): give --node"), so
// its /etc/hostname (hostname(5): comments skipped), lower-cased, said on
// stderr; with neither file it is refused naming both, before any client.
func TestLabelImageNodeNameFromEtcHostname(t *testing.T) {
	img := fixtureRoot(t, "hgx-h200")
	require.NoError(t, os.RemoveAll(filepath.Join(img, "proc")))
	d := withoutFixtureRoots()
	here := fixtureRoot(t, "hgx-h200")
	d.thisMachine = func() (*host.Root, error) { return host.NewRoot(here) }

	_, errs, code := gpuprepWith(t, d, "label", "--root", img, "--system-disk", "--kubeconfig", "/nonexistent", "--mode", "container")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "cannot tell the node's name: --root "+img+" has no /proc/sys/kernel/hostname (no running kernel) and no /etc/hostname: give --node")

	require.NoError(t, os.WriteFile(filepath.Join(img, "etc/hostname"), []byte("# set by the image build\n\n"), 0o644))
	_, errs, code = gpuprepWith(t, d, "label", "--root", img, "--system-disk", "--kubeconfig", "/nonexistent", "--mode", "container")
	require.Equal(t, exitUsage, code, errs)
	require.Contains(t, errs, "its /etc/hostname names no host: give --node")

	require.NoError(t, os.WriteFile(filepath.Join(img, "etc/hostname"), []byte("# set by the image build\nGPU-Node-7\n"), 0o644))
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	s.CreateNode(t, "gpu-node-7", map[string]string{"zone": "r1"})
	out, errs, code := gpuprepWith(t, d, "label", "--root", img, "--system-disk", "--kubeconfig", kc, "--mode", "container")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, errs, "gpuprep: the node's name gpu-node-7 is --root "+img+"'s /etc/hostname (it has no running kernel's host name); --node names another")
	require.Contains(t, out, "labelled node gpu-node-7: ")
	got, _ := s.NodeLabels(t, "gpu-node-7")
	require.Equal(t, map[string]string{"zone": "r1", kube.WorkloadLabel: "container"}, got)
}
