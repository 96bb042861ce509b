package kube

import (
	"os"
	"testing"

	"github.com/gpuprep/gpuprep/internal/testrun"
)

// TestMain: testrun kills the etcd and kube-apiserver processes the tests
// start (kubetest) on every exit path, a panic or -timeout included.
func TestMain(m *testing.M) {
	os.Exit(testrun.Main(m))
}
