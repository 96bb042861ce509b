package kube

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoKubeconfigSaysWhereToGiveOne: with no kubeconfig anywhere, the
// error names the flag and variable that give one and where gpuprep
// looked, not client-go's hint about KUBERNETES_MASTER (a variable it
// does not read).
func TestNoKubeconfigSaysWhereToGiveOne(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	t.Setenv("KUBECONFIG", missing)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	require.NoError(t, os.Unsetenv("KUBERNETES_SERVICE_HOST"))
	_, err := NewClient("")
	require.EqualError(t, err, "no kubeconfig: no --kubeconfig given, $KUBECONFIG ("+missing+") names no readable file, "+
		"and this is not a pod with a service account; name one with --kubeconfig FILE or KUBECONFIG=FILE")
	require.NotContains(t, err.Error(), "KUBERNETES_MASTER")
}
