// Package kubetest starts a real kube-apiserver and etcd on loopback for
// tests: the labelling tests of internal/kube and of the gpuprep command run
// against it rather than against a mock.
//
// The apiserver comes from scripts/kube-apiserver.sh (make kube-apiserver):
// $GPUPREP_KUBE_APISERVER, else $GPUPREP_KUBE_DIR/bin/kube-apiserver (default
// /var/tmp/gpuprep-kube); etcd is Debian's etcd-server (/usr/bin/etcd).
// Without them Start skips the test, unless GPUPREP_REQUIRE_KUBE=1 (set by
// make test) makes that a failure.
package kubetest

import (
	"bytes"
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

// Server is a running kube-apiserver (RBAC, bearer-token authentication).
type Server struct {
	URL   string // https://127.0.0.1:PORT (a self-signed certificate)
	Dir   string // its certificates, logs and the kubeconfig files written for it
	Admin string // bearer token of user "admin", in group system:masters
	View  string // bearer token of user "viewer", who may get and list nodes but not patch them
}

// FreePort is a TCP port on 127.0.0.1 that nothing listened on just now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// need is path, or skips (fails with GPUPREP_REQUIRE_KUBE=1) when it is missing.
func need(t testing.TB, what, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("GPUPREP_REQUIRE_KUBE") == "1" {
			t.Fatalf("%s missing at %s (make kube-apiserver; apt-get install etcd-server)", what, path)
		}
		t.Skipf("%s missing at %s: run make kube-apiserver and install etcd-server", what, path)
	}
	return path
}

// Start starts etcd and kube-apiserver and stops them when the test ends
// (their logs are shown when it failed).
func Start(t testing.TB) *Server {
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
	s := &Server{Dir: dir, Admin: "admintoken0123456789", View: "viewtoken0123456789"}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.csv"),
		[]byte(s.Admin+",admin,admin-uid,system:masters\n"+s.View+",viewer,viewer-uid,\n"), 0o600))
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600))

	client, peer, secure := FreePort(t), FreePort(t), FreePort(t)
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
			_ = log.Close() // read again by name below
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
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", secure)
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, _ := s.Do(t, s.Admin, "GET", "/readyz", "", nil)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 90 s (last status %d)", code)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// the viewer may read nodes but not patch them
	s.MustDo(t, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json",
		`{"metadata":{"name":"node-viewer"},"rules":[{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list"]}]}`)
	s.MustDo(t, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "application/json",
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

// Do sends one request with token; status 0 when it got no answer.
func (s *Server) Do(t testing.TB, token, method, path, ctype string, body []byte) (int, []byte) {
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
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

// MustDo sends one request as admin and fails the test unless it succeeds.
func (s *Server) MustDo(t testing.TB, method, path, ctype, body string) []byte {
	t.Helper()
	code, b := s.Do(t, s.Admin, method, path, ctype, []byte(body))
	require.True(t, code >= 200 && code < 300, "%s %s: %d %s", method, path, code, b)
	return b
}

// Kubeconfig writes a kubeconfig for user with token into s.Dir and
// returns its path.
func (s *Server) Kubeconfig(t testing.TB, user, token string) string {
	t.Helper()
	p := filepath.Join(s.Dir, user+".kubeconfig")
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
`, s.URL, user, token, user)), 0o600))
	return p
}

// AdminKubeconfig is Kubeconfig for the admin user.
func (s *Server) AdminKubeconfig(t testing.TB) string {
	t.Helper()
	return s.Kubeconfig(t, "admin", s.Admin)
}

// CreateNode creates a Node object with labels.
func (s *Server) CreateNode(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	var ls []string
	for k, v := range labels {
		ls = append(ls, fmt.Sprintf("%q:%q", k, v))
	}
	s.MustDo(t, "POST", "/api/v1/nodes", "application/json",
		fmt.Sprintf(`{"metadata":{"name":%q,"labels":{%s}}}`, name, strings.Join(ls, ",")))
}

// NodeLabels reads a Node's labels and resourceVersion as admin.
func (s *Server) NodeLabels(t testing.TB, name string) (map[string]string, string) {
	t.Helper()
	var n struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Labels          map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(s.MustDo(t, "GET", "/api/v1/nodes/"+name, "", ""), &n))
	if n.Metadata.Labels == nil {
		n.Metadata.Labels = map[string]string{}
	}
	return n.Metadata.Labels, n.Metadata.ResourceVersion
}
