package preflight_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/preflight"
)

// The workload label went into /etc/default/kubelet a month after kubeadm
// joined the node: the kubelet applies --node-labels only when it
// registers the Node, so node.label cannot pass on the file (it did:
// "set in /etc/default/kubelet; the host's state agrees").
func TestLabelAddedAfterRegistrationIsNotProof(t *testing.T) {
	_, res := run(t, "kubeadm-relabelled")
	f := one(t, res, "node.label", preflight.WorkloadLabel+"=vm-passthrough", preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "after the kubelet registered the Node (/var/lib/kubelet/pki/kubelet-client-")
	require.Contains(t, f.Message, "applies --node-labels only when it creates the Node")
	require.Equal(t, "gpuprep label --mode vm-passthrough", f.FixCommand)
}

// The label in the kubelet's files before it registered the Node (kubeadm
// join with it in place), or set on the Node by gpuprep label since (its
// journal entry): a pass.
func TestLabelBeforeRegistrationOrThroughTheAPIPasses(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("kubeadm-relabelled", dir))
	early := fixture.BootTime.Add(-31 * 24 * 3600e9)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "etc/default/kubelet"), early, early))
	_, res := runRoot(t, dir)
	f := one(t, res, "node.label", preflight.WorkloadLabel+"=vm-passthrough", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)

	dir = t.TempDir()
	require.NoError(t, fixture.Build("kubeadm-relabelled", dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	rec := journal.LabelRecord{Node: "vfio-node", Kubeconfig: "/etc/kubernetes/admin.conf", Keys: preflight.WorkloadLabel}
	require.NoError(t, journal.Append(root, rec.Entry("label", fixture.BootTime.Add(-30*60e9))))
	_, res = runRoot(t, dir)
	f = one(t, res, "node.label", preflight.WorkloadLabel+"=vm-passthrough", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "gpuprep label set it on the Node through the API server (journal)")
}
