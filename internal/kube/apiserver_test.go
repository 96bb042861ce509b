package kube

// Integration tests against a real kube-apiserver and etcd on loopback.
// The apiserver comes from scripts/kube-apiserver.sh (make kube-apiserver),
// etcd from Debian's etcd-server. Without them the tests skip, unless
// GPUPREP_REQUIRE_KUBE=1 (set by make test) makes that a failure.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type apiServer struct {
	url   string
	dir   string
	admin string // bearer tokens
	view  string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func need(t *testing.T, what, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("GPUPREP_REQUIRE_KUBE") == "1" {
			t.Fatalf("%s missing at %s (make kube-apiserver; apt-get install etcd-server)", what, path)
		}
		t.Skipf("%s missing at %s: run make kube-apiserver and install etcd-server", what, path)
	}
	return path
}

// startAPIServer starts etcd and kube-apiserver (RBAC, token auth) and
// stops them when the test ends.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	bin := os.Getenv("GPUPREP_KUBE_APISERVER")
	if bin == "" {
		d := os.Getenv("GPUPREP_KUBE_DIR")
		if d == "" {
			d = "/var/tmp/gpuprep-kube"
		}
		bin = filepath.Join(d, "bin/kube-apiserver")
	}
	need(t, "kube-apiserver", bin)
	etcd := need(t, "etcd", "/usr/bin/etcd")
	dir := t.TempDir()
	s := &apiServer{dir: dir, admin: "admintoken0123456789", view: "viewtoken0123456789"}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.csv"),
		[]byte(s.admin+",admin,admin-uid,system:masters\n"+s.view+",viewer,viewer-uid,\n"), 0o600))
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600))

	client, peer, secure := freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	start := func(name string, argv ...string) {
		log, err := os.Create(filepath.Join(dir, name+".log"))
		require.NoError(t, err)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = log, log
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
			log.Close()
			if t.Failed() {
				b, _ := os.ReadFile(log.Name())
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
			}
		})
	}
	start("etcd", etcd, "--name", "gpuprep", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("gpuprep=http://127.0.0.1:%d", peer))
	start("kube-apiserver", bin, "--etcd-servers", etcdURL, "--bind-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(secure), "--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"), "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/24", "--advertise-address", "127.0.0.1",
		"--endpoint-reconciler-type", "none")
	s.url = fmt.Sprintf("https://127.0.0.1:%d", secure)
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, _ := s.do(t, s.admin, "GET", "/readyz", "", nil)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 90 s (last status %d)", code)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// the viewer may read nodes but not patch them
	s.mustDo(t, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json",
		`{"metadata":{"name":"node-viewer"},"rules":[{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list"]}]}`)
	s.mustDo(t, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "application/json",
		`{"metadata":{"name":"node-viewer"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"node-viewer"},"subjects":[{"kind":"User","name":"viewer","apiGroup":"rbac.authorization.k8s.io"}]}`)
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

var insecure = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func (s *apiServer) do(t *testing.T, token, method, path, ctype string, body []byte) (int, []byte) {
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := insecure.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *apiServer) mustDo(t *testing.T, method, path, ctype, body string) []byte {
	t.Helper()
	code, b := s.do(t, s.admin, method, path, ctype, []byte(body))
	require.True(t, code >= 200 && code < 300, "%s %s: %d %s", method, path, code, b)
	return b
}

// kubeconfig writes a kubeconfig for token and returns its path.
func (s *apiServer) kubeconfig(t *testing.T, user, token string) string {
	p := filepath.Join(s.dir, user+".kubeconfig")
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: %s
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, s.url, user, token, user)), 0o600))
	return p
}

func (s *apiServer) createNode(t *testing.T, name string, labels map[string]string) {
	var ls []string
	for k, v := range labels {
		ls = append(ls, fmt.Sprintf("%q:%q", k, v))
	}
	s.mustDo(t, "POST", "/api/v1/nodes", "application/json",
		fmt.Sprintf(`{"metadata":{"name":%q,"labels":{%s}}}`, name, strings.Join(ls, ",")))
}

func (s *apiServer) nodeLabels(t *testing.T, name string) (map[string]string, string) {
	c, err := NewClient(s.kubeconfig(t, "admin", s.admin))
	require.NoError(t, err)
	n, err := c.getNode(context.Background(), name)
	require.NoError(t, err)
	return n.Metadata.Labels, n.Metadata.ResourceVersion
}

func TestLabelNodeAgainstARealAPIServer(t *testing.T) {
	s := startAPIServer(t)
	ctx := context.Background()
	admin, err := NewClient(s.kubeconfig(t, "admin", s.admin))
	require.NoError(t, err)
	require.Equal(t, "admin", admin.User)
	s.createNode(t, "gpu-1", map[string]string{"zone": "r1", WorkloadLabel: "container", VGPUConfigLabel: "A10-12Q"})

	// create/update: workload label changed, stale vGPU config removed, others kept
	res, err := admin.LabelNode(ctx, "gpu-1", setPT, []string{VGPUConfigLabel}, false)
	require.NoError(t, err)
	require.True(t, res.Changed)
	labels, rv := s.nodeLabels(t, "gpu-1")
	require.Equal(t, "vm-passthrough", labels[WorkloadLabel])
	require.NotContains(t, labels, VGPUConfigLabel)
	require.Equal(t, "r1", labels["zone"])

	// no-op: nothing written, resourceVersion unchanged
	res, err = admin.LabelNode(ctx, "gpu-1", setPT, []string{VGPUConfigLabel}, false)
	require.NoError(t, err)
	require.False(t, res.Changed)
	_, rv2 := s.nodeLabels(t, "gpu-1")
	require.Equal(t, rv, rv2)

	// server-side dry run: validated, not persisted
	res, err = admin.LabelNode(ctx, "gpu-1", setVGPU, nil, true)
	require.NoError(t, err)
	require.True(t, res.Changed)
	labels, _ = s.nodeLabels(t, "gpu-1")
	require.Equal(t, "vm-passthrough", labels[WorkloadLabel])

	// a conflict: another writer changes the Node between gpuprep's read and
	// its patch; the patch carries the old resourceVersion, is refused (409)
	// and retried on a fresh read, and nobody's change is lost
	calls := 0
	admin.beforePatch = func() {
		calls++
		if calls == 1 {
			s.mustDo(t, "PATCH", "/api/v1/nodes/gpu-1", "application/merge-patch+json", `{"metadata":{"labels":{"rack":"r7"}}}`)
		}
	}
	res, err = admin.LabelNode(ctx, "gpu-1", []Label{{WorkloadLabel, "container"}}, nil, false)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, 2, calls, "retried once after the conflict")
	labels, _ = s.nodeLabels(t, "gpu-1")
	require.Equal(t, "container", labels[WorkloadLabel])
	require.Equal(t, "r7", labels["rack"], "the other writer's change survives")
	admin.beforePatch = nil

	// a user without patch on nodes
	viewer, err := NewClient(s.kubeconfig(t, "viewer", s.view))
	require.NoError(t, err)
	_, err = viewer.LabelNode(ctx, "gpu-1", setVGPU, nil, false)
	require.ErrorContains(t, err, `forbidden: viewer may not patch nodes (RBAC: grant verb "patch" on resource "nodes" in API group "")`)

	// a missing node
	_, err = admin.LabelNode(ctx, "gpu-404", setPT, nil, false)
	require.ErrorContains(t, err, `node "gpu-404" not found on `+s.url)

	// wrong credentials
	bad, err := NewClient(s.kubeconfig(t, "nobody", "wrongtoken"))
	require.NoError(t, err)
	_, err = bad.LabelNode(ctx, "gpu-1", setPT, nil, false)
	require.ErrorContains(t, err, "unauthorized")
}

func TestLabelNodeAPIServerDown(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kubeconfig")
	port := freePort(t) // nothing listens there now
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:%d\", insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", port)), 0o600))
	c, err := NewClient(p)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.LabelNode(ctx, "gpu-1", setPT, nil, false)
	require.ErrorContains(t, err, fmt.Sprintf("API server https://127.0.0.1:%d unreachable", port))
}

const kubeVirtCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"kubevirts.kubevirt.io"},
"spec":{"group":"kubevirt.io","scope":"Namespaced",
 "names":{"plural":"kubevirts","singular":"kubevirt","kind":"KubeVirt","listKind":"KubeVirtList"},
 "versions":[{"name":"v1","served":true,"storage":true,
  "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func TestApplyKubeVirtAgainstARealAPIServer(t *testing.T) {
	s := startAPIServer(t)
	ctx := context.Background()
	s.mustDo(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", kubeVirtCRD)
	s.mustDo(t, "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"kubevirt"}}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := s.do(t, s.admin, "POST", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts", "application/json",
			[]byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt"},"spec":{"configuration":{
"developerConfiguration":{"featureGates":["LiveMigration"]},
"permittedHostDevices":{"pciHostDevices":[{"pciVendorSelector":"10DE:1EB8","resourceName":"nvidia.com/TU104GL_Tesla_T4","externalResourceProvider":true},
{"pciVendorSelector":"8086:1592","resourceName":"intel.com/ice","externalResourceProvider":false}]}}}}`))
		if code == 201 {
			break
		}
		require.True(t, time.Now().Before(deadline), "KubeVirt CRD never became usable (last %d)", code)
		time.Sleep(200 * time.Millisecond)
	}
	hosts := []Host{{Name: "n1", Report: sampleReport()}}
	patch, _ := KubeVirt(hosts)
	admin, err := NewClient(s.kubeconfig(t, "admin", s.admin))
	require.NoError(t, err)
	res, err := admin.ApplyKubeVirt(ctx, patch, "", "", false)
	require.NoError(t, err)
	require.True(t, res.Changed)
	require.Equal(t, "kubevirt", res.Namespace)
	raw := s.mustDo(t, "GET", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt", "", "")
	var cr kubeVirtCR
	require.NoError(t, json.Unmarshal(raw, &cr))
	require.Equal(t, []string{"LiveMigration", "GPU"}, cr.Spec.Configuration.DeveloperConfiguration.FeatureGates, "existing gates kept")
	require.Equal(t, []PCIHostDevice{
		{"10DE:1EB8", "nvidia.com/TU104GL_TESLA_T4", true}, // the stale mixed-case name corrected in place
		{"8086:1592", "intel.com/ice", false},              // someone else's device kept
		{"10DE:2335", "nvidia.com/GH100_H200_SXM_141GB", true},
	}, cr.Spec.Configuration.PermittedHostDevices.PCIHostDevices)
	res, err = admin.ApplyKubeVirt(ctx, patch, "", "", false)
	require.NoError(t, err)
	require.False(t, res.Changed, "a second apply changes nothing")

	viewer, err := NewClient(s.kubeconfig(t, "viewer", s.view))
	require.NoError(t, err)
	_, err = viewer.ApplyKubeVirt(ctx, patch, "", "", false)
	require.ErrorContains(t, err, `forbidden: viewer may not list kubevirts (RBAC: grant verb "list" on resource "kubevirts" in API group "kubevirt.io")`)
	_, err = admin.ApplyKubeVirt(ctx, patch, "other", "", false)
	require.ErrorContains(t, err, "no KubeVirt resource found")
}
