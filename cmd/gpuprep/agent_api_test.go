package main

// gpuprep agent against a real kube-apiserver (internal/kube/kubetest: skipped
// without one, unless GPUPREP_REQUIRE_KUBE=1) and a fixture root whose state
// changes between evaluations: the GPUPrepReady condition, the NFD feature
// file and the metrics follow it.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/kube/kubetest"
)

// startAgent runs gpuprep agent with args until the test ends; it returns
// the exit code once the agent stopped.
func startAgent(t *testing.T, args ...string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := realDeps()
	d.agentContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	done := make(chan int, 1)
	var errs strings.Builder
	go func() {
		_, e, code := gpuprepWith(t, d, append([]string{"agent"}, args...)...)
		errs.WriteString(e)
		done <- code
	}()
	stopped := false
	stop = func() int {
		if stopped {
			return 0
		}
		stopped = true
		cancel()
		code := <-done
		t.Log("agent stderr:\n" + errs.String())
		return code
	}
	t.Cleanup(func() { stop() })
	return stop
}

// eventually polls f (at most 30 s) until it returns "".
func eventually(t *testing.T, f func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		why := f()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	return string(b)
}

func TestAgentFollowsTheNode(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	s.CreateNode(t, "gpu-1", map[string]string{"zone": "r1"})
	client, err := kube.NewClient(kc)
	require.NoError(t, err)
	root := fixtureRoot(t, "vfio-bound") // ready for vm-passthrough
	kvm := filepath.Join(root, "dev/kvm")
	off := filepath.Join(root, "kvm.off")
	require.NoError(t, os.Rename(kvm, off)) // a BIOS reset: no /dev/kvm
	feature := filepath.Join(root, "etc/kubernetes/node-feature-discovery/features.d/gpuprep")
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", kubetest.FreePort(t))
	addr := strings.TrimSuffix(strings.TrimPrefix(metrics, "http://"), "/metrics")

	stop := startAgent(t, "--root", root, "--kubeconfig", kc, "--node", "gpu-1", "--mode", "vm-passthrough",
		"--interval", "1s", "--metrics", addr, "--feature-file", "default")

	condition := func(status string) func() string {
		return func() string {
			c, err := client.NodeCondition(context.Background(), "gpu-1", ConditionType)
			if err != nil || c == nil || c.Status != status {
				return fmt.Sprintf("GPUPrepReady: want %s, have %+v (%v)", status, c, err)
			}
			return ""
		}
	}
	eventually(t, condition("False"))
	c, _ := client.NodeCondition(context.Background(), "gpu-1", ConditionType)
	require.Equal(t, "ChecksFailed", c.Reason)
	require.Contains(t, c.Message, "not ready for vm-passthrough: kvm.device (/dev/kvm: /dev/kvm missing")
	b, err := os.ReadFile(feature)
	require.NoError(t, err)
	require.Contains(t, string(b), "feature.node.kubernetes.io/gpuprep.ready.vm-passthrough=false\n")
	require.Contains(t, string(b), "feature.node.kubernetes.io/gpuprep.check.kvm.device=fail\n")
	require.Contains(t, string(b), "# +expiry-time=")
	m := scrape(t, metrics)
	require.Contains(t, m, "gpuprep_ready{mode=\"vm-passthrough\"} 0\n")
	require.Contains(t, m, "gpuprep_check_failing{check=\"kvm.device\",status=\"fail\"} 1\n")
	require.Contains(t, m, "gpuprep_evaluation_success 1\n")
	require.Contains(t, m, "gpuprep_build_info{version=\"dev\"} 1\n")

	// the node is fixed: the condition clears, the labels and series follow
	require.NoError(t, os.Rename(off, kvm))
	eventually(t, condition("True"))
	c, _ = client.NodeCondition(context.Background(), "gpu-1", ConditionType)
	require.Equal(t, kube.Condition{Type: ConditionType, Status: "True", Reason: "Ready", Message: "ready for vm-passthrough",
		LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: c.LastTransitionTime}, *c)
	eventually(t, func() string {
		if m := scrape(t, metrics); !strings.Contains(m, "gpuprep_ready{mode=\"vm-passthrough\"} 1\n") || strings.Contains(m, "kvm.device") {
			return "metrics still say not ready:\n" + m
		}
		return ""
	})
	b, err = os.ReadFile(feature)
	require.NoError(t, err)
	require.Contains(t, string(b), "feature.node.kubernetes.io/gpuprep.ready.vm-passthrough=true\n")
	require.NotContains(t, string(b), "kvm.device")
	names, err := os.ReadDir(filepath.Dir(feature))
	require.NoError(t, err)
	require.Len(t, names, 1, "no temporary file or backup beside the feature file: NFD would read a backup")

	labels, _ := s.NodeLabels(t, "gpu-1")
	require.Equal(t, map[string]string{"zone": "r1"}, labels, "the agent changes the condition only")
	require.Equal(t, 0, stop(), "SIGTERM (the context) ends the agent cleanly")
}

// A node the agent cannot evaluate gets Unknown, never True; a refused
// patch is an error naming the RBAC it needs.
func TestAgentOnceUnknownAndForbidden(t *testing.T) {
	s := kubetest.Start(t)
	kc := s.AdminKubeconfig(t)
	s.CreateNode(t, "gpu-2", nil)
	root := fixtureRoot(t, "vfio-bound")
	out, errs, code := gpuprep(t, "agent", "--once", "--root", root, "--kubeconfig", kc, "--node", "gpu-2", "--mode", "vm-passthrough", "--skip", "kvm.device")
	require.Equal(t, 0, code, out+errs)
	client, err := kube.NewClient(kc)
	require.NoError(t, err)
	c, err := client.NodeCondition(context.Background(), "gpu-2", ConditionType)
	require.NoError(t, err)
	require.Equal(t, "Unknown", c.Status)
	require.Equal(t, "NotEvaluated", c.Reason)
	require.Contains(t, c.Message, "kvm.device")

	view := s.Kubeconfig(t, "viewer", s.View)
	out, errs, code = gpuprep(t, "agent", "--once", "--root", root, "--kubeconfig", view, "--node", "gpu-2", "--mode", "vm-passthrough")
	require.Equal(t, exitUnknown, code, out+errs)
	require.Contains(t, errs, `RBAC: grant verb "patch" on resource "nodes/status"`)
}
