package label_test

// Change.Apply and WriteFiles against a real kube-apiserver
// (internal/kube/kubetest: skipped without one, unless
// GPUPREP_REQUIRE_KUBE=1) and a real host root, undone by provision's
// Rollback as gpuprep rollback does.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
	"github.com/gpuprep/gpuprep/label"
	"github.com/gpuprep/gpuprep/provision"
)

var errKilled = errors.New("killed")

// killedAfterPatch is a kube.Client whose process dies right after the
// patch reached the API server, before anything after it ran.
type killedAfterPatch struct{ c *kube.Client }

func (k killedAfterPatch) LabelNode(ctx context.Context, name string, set []kube.Label, remove []string, dryRun bool) (*kube.LabelResult, error) {
	res, err := k.c.LabelNode(ctx, name, set, remove, dryRun)
	if err != nil || dryRun {
		return res, err
	}
	return nil, errKilled
}

func newRoot(t *testing.T) (*host.Root, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	return root, dir
}

var vmPassthrough = label.Change{Node: "n1", Set: []kube.Label{{Key: kube.WorkloadLabel, Value: "vm-passthrough"}}, Remove: []string{kube.VGPUConfigLabel}}

// The intent is journalled before the patch: a process killed right after
// it leaves rollback the labels the Node had, and rollback puts them back.
func TestApplyJournalsBeforeThePatch(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	had := map[string]string{"zone": "r1", kube.WorkloadLabel: "container", kube.VGPUConfigLabel: "A10-12Q"}
	s.CreateNode(t, "n1", had)
	client, err := kube.NewClient(kc)
	require.NoError(t, err)
	root, _ := newRoot(t)
	c := vmPassthrough
	c.Kubeconfig = kc
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	res, err := c.Apply(context.Background(), client, label.Options{Root: root, Command: "label", Now: now, DryRun: true})
	require.NoError(t, err)
	require.True(t, res.Changed)
	es, err := journal.Read(root)
	require.NoError(t, err)
	require.Empty(t, es, "a dry run journals nothing")

	_, err = c.Apply(context.Background(), killedAfterPatch{client}, label.Options{Root: root, Command: "label", Now: now})
	require.ErrorIs(t, err, errKilled)
	got, _ := s.NodeLabels(t, "n1")
	require.Equal(t, map[string]string{"zone": "r1", kube.WorkloadLabel: "vm-passthrough"}, got, "the patch was made")
	es, err = journal.Read(root)
	require.NoError(t, err)
	require.Equal(t, []journal.Entry{{Time: now, Command: "label", Kind: journal.KindLabel, Device: "n1", Path: kc,
		Before: "nvidia.com/gpu.workload.config=container,nvidia.com/vgpu.config=A10-12Q",
		After:  "nvidia.com/gpu.workload.config,nvidia.com/vgpu.config"}}, es)

	_, err = provision.Rollback(context.Background(), effect.Effector{Root: root}, provision.RollbackOptions{})
	require.NoError(t, err)
	got, _ = s.NodeLabels(t, "n1")
	require.Equal(t, had, got, "rollback put the labels back")
}

// An intent that cannot be journalled stops the patch, unless Unrecorded
// says to go on (gpuprep label on a workstation).
func TestApplyUnrecorded(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	s.CreateNode(t, "n1", map[string]string{kube.WorkloadLabel: "container"})
	client, err := kube.NewClient(kc)
	require.NoError(t, err)
	root, dir := newRoot(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "var/lib"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "var/lib/gpuprep"), nil, 0o644)) // no journal there
	c := vmPassthrough
	c.Kubeconfig = kc

	_, err = c.Apply(context.Background(), client, label.Options{Root: root, Command: "apply", Now: time.Now()})
	require.ErrorContains(t, err, "journal: ")
	got, _ := s.NodeLabels(t, "n1")
	require.Equal(t, map[string]string{kube.WorkloadLabel: "container"}, got, "not patched without its intent")

	var told journal.LabelRecord
	res, err := c.Apply(context.Background(), client, label.Options{Root: root, Command: "label", Now: time.Now(),
		Unrecorded: func(rec journal.LabelRecord, err error) error { told = rec; return nil }})
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, kube.WorkloadLabel+"=container", told.Before)
	got, _ = s.NodeLabels(t, "n1")
	require.Equal(t, map[string]string{kube.WorkloadLabel: "vm-passthrough"}, got)
}

// Each file WriteFiles writes is journalled: rollback restores it.
func TestWriteFilesRollBack(t *testing.T) {
	root, dir := newRoot(t)
	env := filepath.Join(dir, "etc/default/kubelet")
	require.NoError(t, os.MkdirAll(filepath.Dir(env), 0o755))
	was := "KUBELET_EXTRA_ARGS=--node-labels=zone=r1\n"
	require.NoError(t, os.WriteFile(env, []byte(was), 0o644))
	edit := change.Edit("/etc/default/kubelet", []byte(was), []byte("KUBELET_EXTRA_ARGS=--node-labels=zone=r1,"+kube.WorkloadLabel+"=container\n"))
	var wrote []string
	require.NoError(t, label.WriteFiles(root, []change.File{edit}, "label --before-join", time.Now(), func(f change.File, res host.WriteResult) {
		wrote = append(wrote, f.Path+" "+filepath.Base(res.Backup))
	}))
	require.Len(t, wrote, 1)
	b, _ := os.ReadFile(env)
	require.Equal(t, string(edit.New), string(b))

	_, err := provision.Rollback(context.Background(), effect.Effector{Root: root}, provision.RollbackOptions{})
	require.NoError(t, err)
	b, _ = os.ReadFile(env)
	require.Equal(t, was, string(b))
}

// A label entry as main's gpuprep (a32c023) wrote it, with no record
// version, rolls back as one of this version.
func TestRollbackOfAnOldLabelEntry(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	s.CreateNode(t, "n1", map[string]string{"zone": "r1", kube.WorkloadLabel: "vm-passthrough"})
	root, dir := newRoot(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "var/lib/gpuprep"), 0o700))
	old := `{"time":"2026-01-02T03:04:10Z","command":"label","kind":"label","path":"` + kc + `","device":"n1","before":"nvidia.com/gpu.workload.config=container,nvidia.com/vgpu.config=A10-12Q","after":"nvidia.com/gpu.workload.config,nvidia.com/vgpu.config"}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, journal.Path), []byte(old), 0o600))
	_, err := provision.Rollback(context.Background(), effect.Effector{Root: root}, provision.RollbackOptions{})
	require.NoError(t, err)
	got, _ := s.NodeLabels(t, "n1")
	require.Equal(t, map[string]string{"zone": "r1", kube.WorkloadLabel: "container", kube.VGPUConfigLabel: "A10-12Q"}, got)
}
