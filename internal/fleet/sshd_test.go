package fleet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
	"github.com/gpuprep/gpuprep/internal/testrun"
)

// These tests run the real OpenSSH sshd on loopback addresses and log in as
// dedicated users (see sshdtest); they skip, saying why, when not root or
// without sshd.

// TestMain: testrun points the fleet client's local hash cache (see
// fleet.hashOpenFile) into a directory of the tests' own, not the user's,
// and removes it, the sshd users and processes on every exit path.
func TestMain(m *testing.M) {
	os.Exit(testrun.Main(m))
}

type rig struct {
	env  *sshdtest.Env
	bin  *Binary
	kh   string
	root string // a fixture root readable by the test users
}

func newRig(t *testing.T) *rig {
	env := sshdtest.Shared(t, "fleet")
	bin, err := LoadBinary(sshdtest.Gpuprep(t))
	require.NoError(t, err)
	r := &rig{env: env, bin: bin, kh: filepath.Join(t.TempDir(), "known_hosts")}
	r.root = filepath.Join(env.Dir, "root-hgx-h200")
	if _, err := os.Stat(r.root); err != nil {
		require.NoError(t, fixture.Build("hgx-h200", r.root))
		require.NoError(t, exec.Command("chmod", "-R", "a+rX", r.root).Run())
	}
	return r
}

func (r *rig) transport() *Transport {
	return &Transport{KnownHosts: []string{r.kh}, Identities: []string{r.env.ClientKey}, ConnectTimeout: 5 * time.Second}
}

func (r *rig) host(name string, s *sshdtest.Server, user string) *Host {
	return &Host{Name: name, Address: s.Host, Port: s.Port, User: user, Vars: map[string]string{}}
}

func (r *rig) runner(tr *Transport) *Runner {
	return &Runner{Transport: tr, Exec: &Exec{Binary: r.bin}, Parallel: 4, CommandTimeout: time.Minute,
		Args: func(h *Host) ([]string, error) {
			root := h.Var("gpuprep_root")
			if root == "" {
				root = r.root
			}
			return []string{"--root=" + root, "check", "-o", "json", "--mode", "container"}, nil
		}}
}

func TestSSHPassingFleetAndCache(t *testing.T) {
	r := newRig(t)
	s1 := r.env.Start(t, "127.0.0.1")
	s2 := r.env.Start(t, "127.0.0.2")
	sshdtest.Trust(t, r.kh, false, s1)
	sshdtest.Trust(t, r.kh, true, s2) // hashed entry
	var uploads atomic.Int32
	run := r.runner(r.transport())
	run.Exec.Uploaded = func(*Host, string) { uploads.Add(1) }
	// Remove any cached copy from an earlier test, so this one uploads.
	require.NoError(t, os.RemoveAll(filepath.Join(r.env.Home[r.env.User], ".cache")))
	hosts := []*Host{r.host("a", s1, r.env.User), r.host("b", s2, r.env.User)}
	res := run.Run(context.Background(), hosts)
	for _, x := range res {
		require.Equal(t, StatusEvaluated, x.Status, "%s: %s", x.Host.Name, x.Err)
		assert.Equal(t, 0, x.Output.ExitCode, "%s", x.Output.Stderr)
		var rep struct{ Kind, Mode string }
		require.NoError(t, json.Unmarshal(x.Output.Stdout, &rep))
		assert.Equal(t, "ReadinessReport", rep.Kind)
		assert.Equal(t, "container", rep.Mode)
	}
	// Both hosts share one home: the binary was uploaded once or twice
	// (concurrently, atomically), never partially.
	assert.GreaterOrEqual(t, uploads.Load(), int32(1))
	dir := filepath.Join(r.env.Home[r.env.User], ".cache", "gpuprep", r.bin.SHA256)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	left, _ := filepath.Glob(filepath.Join(dir, ".gpuprep.tmp.*"))
	assert.Empty(t, left, "no temporary upload left behind")

	// Second run: cached and verified, no upload.
	uploads.Store(0)
	res = run.Run(context.Background(), hosts)
	for _, x := range res {
		require.Equal(t, StatusEvaluated, x.Status, x.Err)
	}
	assert.Equal(t, int32(0), uploads.Load())

	// A corrupted cached binary is detected by its hash and replaced.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gpuprep"), []byte("#!/bin/sh\necho pwned\n"), 0o700))
	var reason string
	run.Exec.Uploaded = func(_ *Host, why string) { uploads.Add(1); reason = why }
	run.Parallel = 1
	res = run.Run(context.Background(), hosts[:1])
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	assert.Equal(t, int32(1), uploads.Load())
	assert.Contains(t, reason, "does not match its SHA-256")
	assert.Contains(t, string(res[0].Output.Stdout), `"kind": "ReadinessReport"`)
}

func TestSSHHostKeys(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.3")
	h := r.host("k", s, r.env.User)
	ctx := context.Background()

	// Unknown: refused, with the fingerprint.
	_, err := r.transport().Dial(ctx, h)
	require.Error(t, err)
	assert.Equal(t, StatusHostKeyUnknown, StatusOf(err))
	assert.Contains(t, err.Error(), ssh.FingerprintSHA256(s.HostKey))
	assert.Contains(t, err.Error(), "--accept-new")
	_, statErr := os.Stat(r.kh)
	assert.True(t, os.IsNotExist(statErr), "nothing recorded without --accept-new")

	// --accept-new records first contact; a new transport then trusts it.
	tr := r.transport()
	tr.AcceptNew = true
	c, err := tr.Dial(ctx, h)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	b, err := os.ReadFile(r.kh)
	require.NoError(t, err)
	assert.Contains(t, string(b), "["+s.Host+"]:")
	c, err = r.transport().Dial(ctx, h)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	// Changed: another server on the same address with another key. Refused,
	// even with --accept-new.
	other := &sshdtest.Server{Addr: s.Addr, Host: s.Host, Port: s.Port, HostKey: mustKey(t)}
	kh2 := filepath.Join(t.TempDir(), "known_hosts")
	sshdtest.Trust(t, kh2, false, other)
	tr = &Transport{KnownHosts: []string{kh2}, Identities: []string{r.env.ClientKey}, AcceptNew: true, ConnectTimeout: 5 * time.Second}
	_, err = tr.Dial(ctx, h)
	require.Error(t, err)
	assert.Equal(t, StatusHostKeyChanged, StatusOf(err))
	assert.Contains(t, err.Error(), "HOST KEY CHANGED")
	assert.Contains(t, err.Error(), ssh.FingerprintSHA256(s.HostKey))
	assert.Contains(t, err.Error(), ssh.FingerprintSHA256(other.HostKey))
}

func TestSSHCertAuthority(t *testing.T) {
	r := newRig(t)
	_, caPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	ca, err := ssh.NewSignerFromKey(caPriv)
	require.NoError(t, err)
	s := r.env.StartWith(t, "127.0.0.4", func(hostKey ssh.PublicKey, keyFile string) []string {
		cert := &ssh.Certificate{Key: hostKey, CertType: ssh.HostCert, KeyId: "test", ValidPrincipals: []string{"127.0.0.4"},
			ValidAfter: 0, ValidBefore: ssh.CertTimeInfinity}
		require.NoError(t, cert.SignCert(rand.Reader, ca))
		require.NoError(t, os.WriteFile(keyFile+"-cert.pub", ssh.MarshalAuthorizedKey(cert), 0o644))
		return []string{"-o", "HostCertificate=" + keyFile + "-cert.pub"}
	})
	require.NoError(t, os.WriteFile(r.kh, []byte("@cert-authority "+knownhosts.Normalize(s.Addr)+" "+string(ssh.MarshalAuthorizedKey(ca.PublicKey()))), 0o600))
	c, err := r.transport().Dial(context.Background(), r.host("ca", s, r.env.User))
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

func mustKey(t *testing.T) ssh.PublicKey { return newSigner(t).PublicKey() }

func TestSSHAuthAndTimeouts(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.5")
	sshdtest.Trust(t, r.kh, false, s)
	ctx := context.Background()
	h := r.host("w", s, r.env.User)

	tr := r.transport()
	tr.Identities = []string{r.env.OtherKey}
	_, err := tr.Dial(ctx, h)
	require.Error(t, err)
	assert.Equal(t, StatusAuthFailed, StatusOf(err), err.Error())

	// An encrypted key: a clear error, unless the agent holds it.
	enc := filepath.Join(t.TempDir(), "enc_ed25519")
	pub := sshdtest.WriteKey(t, enc, "sekrit")
	f, err := os.OpenFile(filepath.Join(r.env.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(ssh.MarshalAuthorizedKey(pub))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	tr = r.transport()
	tr.Identities = []string{enc}
	_, err = tr.Dial(ctx, h)
	require.Error(t, err)
	assert.Equal(t, StatusAuthFailed, StatusOf(err))
	assert.Contains(t, err.Error(), "is encrypted")
	assert.Contains(t, err.Error(), "ssh-add "+enc)

	keyring := agent.NewKeyring()
	data, _ := os.ReadFile(enc)
	raw, err := ssh.ParseRawPrivateKeyWithPassphrase(data, []byte("sekrit"))
	require.NoError(t, err)
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: raw}))
	tr = r.transport()
	tr.Identities = []string{enc}
	tr.Agent = keyring.(agent.ExtendedAgent)
	c, err := tr.Dial(ctx, h)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	// A host that accepts TCP and never answers.
	silent := sshdtest.SilentServer(t, "127.0.0.6")
	host, port, _ := net.SplitHostPort(silent)
	tr = r.transport()
	tr.ConnectTimeout = 700 * time.Millisecond
	sh := &Host{Name: "silent", Address: host, User: "x"}
	sh.Port = atoi(port)
	start := time.Now()
	_, err = tr.Dial(ctx, sh)
	require.Error(t, err)
	assert.Equal(t, StatusTimeout, StatusOf(err), err.Error())
	assert.Less(t, time.Since(start), 3*time.Second)

	// Nothing listening: unreachable, retried a bounded number of times.
	closed := &Host{Name: "closed", Address: "127.0.0.7", Port: sshdtest.FreePort(t, "127.0.0.7"), User: "x"}
	run := r.runner(r.transport())
	run.Retries, run.Backoff = 2, 10*time.Millisecond
	res := run.Run(ctx, []*Host{closed})
	assert.Equal(t, StatusUnreachable, res[0].Status)
	assert.Equal(t, 3, res[0].Attempts)
	assert.Contains(t, res[0].Err, "connection refused")
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestSSHSudoNeedsPassword(t *testing.T) {
	r := newRig(t)
	if !sshdtest.HasSudo() {
		t.Skip("sudo is not installed (Debian package sudo)")
	}
	s := r.env.Start(t, "127.0.0.8")
	sshdtest.Trust(t, r.kh, false, s)
	res := r.runner(r.transport()).Run(context.Background(), []*Host{r.host("pw", s, r.env.NoSudoUser)})
	assert.Equal(t, StatusError, res[0].Status)
	assert.Contains(t, res[0].Err, "sudo -n (as "+r.env.NoSudoUser+"): a password is required")
	assert.Contains(t, res[0].Err, "NOPASSWD")
}

func TestSSHHostileValues(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.9")
	sshdtest.Trust(t, r.kh, false, s)
	canary := filepath.Join(r.env.Dir, "pwned")
	hostile := []string{
		"x'; touch " + canary + "; echo '",
		"$(touch " + canary + ")",
		"`touch " + canary + "`",
		"x\ntouch " + canary + "\n",
		`"; touch ` + canary + `; "`,
		"; rm -rf " + canary + "-dir",
	}
	var hosts []*Host
	for i, v := range hostile {
		h := r.host("h"+string(rune('a'+i)), s, r.env.User)
		h.Vars["gpuprep_root"] = v
		hosts = append(hosts, h)
	}
	cache := r.host("cachedir", s, r.env.User)
	literal := r.env.Home[r.env.User] + "/c '$(touch " + canary + ")`touch " + canary + "`"
	cache.Vars["gpuprep_cache_dir"] = literal
	hosts = append(hosts, cache)
	res := r.runner(r.transport()).Run(context.Background(), hosts)
	for i, x := range res[:len(hostile)] {
		// gpuprep got the value as one literal argument: --root rejects it.
		assert.Equal(t, StatusEvaluated, x.Status, x.Err)
		assert.Equal(t, 2, x.Output.ExitCode, "value %q: %s", hostile[i], x.Output.Stderr)
		assert.Contains(t, string(x.Output.Stderr), "--root", "value %q", hostile[i])
	}
	_, err := os.Stat(canary)
	assert.True(t, os.IsNotExist(err), "a hostile value ran a command")
	// The cache directory is used literally (sudo is allowed only for the
	// default cache directory, so running it there is refused).
	_, err = os.Stat(filepath.Join(literal, r.bin.SHA256, "gpuprep"))
	assert.NoError(t, err)
	assert.Contains(t, res[len(hostile)].Err, "sudo -n")
}

func TestSSHProxyJump(t *testing.T) {
	r := newRig(t)
	bastion := r.env.Start(t, "127.0.0.10")
	target := r.env.Start(t, "127.0.0.11")
	sshdtest.Trust(t, r.kh, false, bastion, target)
	h := r.host("behind", target, r.env.User)
	h.Jump = r.env.User + "@" + bastion.Addr
	res := r.runner(r.transport()).Run(context.Background(), []*Host{h})
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)

	// The bastion's key is verified too.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	sshdtest.Trust(t, kh, false, target)
	tr := r.transport()
	tr.KnownHosts = []string{kh}
	_, err := tr.Dial(context.Background(), h)
	require.Error(t, err)
	assert.Equal(t, StatusHostKeyUnknown, StatusOf(err))
	assert.Contains(t, err.Error(), "jump host "+bastion.Addr)
}

func TestSSHCancelMidRun(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.12")
	sshdtest.Trust(t, r.kh, false, s)
	silent := sshdtest.SilentServer(t, "127.0.0.13")
	sh, sp, _ := net.SplitHostPort(silent)
	hosts := []*Host{r.host("ok", s, r.env.User), {Name: "hung", Address: sh, Port: atoi(sp), User: "x"}}
	for i := 0; i < 5; i++ {
		hosts = append(hosts, r.host("later"+string(rune('0'+i)), s, r.env.User))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := r.transport()
	tr.ConnectTimeout = time.Minute
	run := r.runner(tr)
	run.Parallel = 2
	run.Done = func(x *Result, done, total int) {
		if x.Host.Name == "ok" {
			cancel()
		}
	}
	start := time.Now()
	res := run.Run(ctx, hosts)
	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	assert.Equal(t, StatusCancelled, res[1].Status, res[1].Err)
	cancelled := 0
	for _, x := range res[2:] {
		if x.Status == StatusCancelled {
			cancelled++
		}
	}
	assert.GreaterOrEqual(t, cancelled, 4, "no new work after the interrupt")
}

// A warm run takes one session (the stamp matches); any change to the
// cached binary, even one that keeps its size, sends it back through the
// full hash check and a re-upload.
func TestSSHStampedCache(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.14")
	sshdtest.Trust(t, r.kh, false, s)
	var uploads atomic.Int32
	var reason string
	run := r.runner(r.transport())
	run.Exec.Uploaded = func(_ *Host, why string) { uploads.Add(1); reason = why }
	h := []*Host{r.host("st", s, r.env.User)}
	res := run.Run(context.Background(), h) // uploads or verifies by hash, and stamps
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	dir := filepath.Join(r.env.Home[r.env.User], ".cache", "gpuprep", r.bin.SHA256)
	stamp, err := os.ReadFile(filepath.Join(dir, stampName))
	require.NoError(t, err)
	assert.Regexp(t, `^gpuprep-stamp/1 ino=`, string(stamp))
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*"))
	assert.Empty(t, left)

	stampInfo, err := os.Stat(filepath.Join(dir, stampName))
	require.NoError(t, err)
	uploads.Store(0)
	res = run.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	assert.Equal(t, 0, res[0].Output.ExitCode, "%s", res[0].Output.Stderr)
	assert.Equal(t, int32(0), uploads.Load())
	again, err := os.Stat(filepath.Join(dir, stampName))
	require.NoError(t, err)
	assert.True(t, os.SameFile(stampInfo, again), "the warm run took the one-session path (the full path stamps anew)")

	// A chmod changes only the binary's ctime: the shell lets it start, the
	// binary's own check refuses the stamp, the full path finds the hash
	// right (no upload) and stamps it again.
	bin := filepath.Join(dir, "gpuprep")
	require.NoError(t, os.Chmod(bin, 0o700))
	res = run.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	assert.Equal(t, int32(0), uploads.Load())
	assert.NotContains(t, string(res[0].Output.Stderr), "gpuprep-fleet:", "no marker or refusal left in the host's stderr")
	restamp, err := os.ReadFile(filepath.Join(dir, stampName))
	require.NoError(t, err)
	assert.NotEqual(t, string(stamp), string(restamp))

	// Same size, other bytes.
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(bin, data, 0o700))
	res = run.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	assert.Equal(t, int32(1), uploads.Load())
	assert.Contains(t, reason, "does not match its SHA-256")
	assert.Contains(t, string(res[0].Output.Stdout), `"kind": "ReadinessReport"`)
}

// Hosts sharing a home upload concurrently: an upload that finds an
// identical binary already in place keeps it (same inode: a sudo that has
// just matched it in sudoers on another host still runs it), while one that
// finds a different file replaces it.
func TestSSHUploadKeepsIdenticalBinary(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.15")
	sshdtest.Trust(t, r.kh, false, s)
	h := r.host("up", s, r.env.User)
	conn, err := r.transport().Dial(context.Background(), h)
	require.NoError(t, err)
	defer conn.Close()
	base := filepath.Join(r.env.Home[r.env.User], ".cache", "gpuprep")
	dir := filepath.Join(base, r.bin.SHA256)
	bin := filepath.Join(dir, "gpuprep")
	e := &Exec{Binary: r.bin}
	ino := func() uint64 {
		fi, err := os.Stat(bin)
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	require.NoError(t, e.upload(context.Background(), conn.Client, r.bin.Path, r.bin.SHA256, base, dir, bin, true))
	first := ino()
	require.NoError(t, e.upload(context.Background(), conn.Client, r.bin.Path, r.bin.SHA256, base, dir, bin, true))
	assert.Equal(t, first, ino(), "an identical binary is kept")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o700))
	require.NoError(t, e.upload(context.Background(), conn.Client, r.bin.Path, r.bin.SHA256, base, dir, bin, true))
	got, err := os.ReadFile(bin)
	require.NoError(t, err)
	assert.Equal(t, r.bin.SHA256, fmt.Sprintf("%x", sha256.Sum256(got)), "a different file is replaced")
	left, _ := filepath.Glob(filepath.Join(dir, ".gpuprep.tmp.*"))
	assert.Empty(t, left)
	stamp, err := os.ReadFile(filepath.Join(dir, stampName))
	require.NoError(t, err)
	assert.Contains(t, string(stamp), fmt.Sprintf(" ino=%d ", ino()), "stamped by the binary in place")
}

// A file a command needs (here a saved report for `report render`) is
// uploaded into the host's cache by its hash, named in the arguments by
// its Ref, reused while its hash matches and replaced when it does not.
func TestSSHFilesForCommands(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.16")
	sshdtest.Trust(t, r.kh, false, s)
	rep, err := exec.Command(r.bin.Path, "--root="+r.root, "check", "-o", "json", "--mode", "container").Output()
	if err != nil {
		require.IsType(t, &exec.ExitError{}, err) // not ready: exit 1, the report is on stdout
	}
	local := filepath.Join(t.TempDir(), "saved report.json")
	require.NoError(t, os.WriteFile(local, rep, 0o644))
	f, err := LoadFile(local)
	require.NoError(t, err)
	run := r.runner(r.transport())
	run.Exec.Files = []*File{f}
	run.Args = func(*Host) ([]string, error) { return []string{"report", "render", f.Ref(), "-o", "json"}, nil }
	h := []*Host{r.host("files", s, r.env.User)}

	res := run.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	require.Equal(t, 0, res[0].Output.ExitCode, "%s", res[0].Output.Stderr)
	var got, want map[string]any
	require.NoError(t, json.Unmarshal(res[0].Output.Stdout, &got))
	require.NoError(t, json.Unmarshal(rep, &want))
	assert.Equal(t, want, got, "the host rendered the uploaded report")
	remote := filepath.Join(r.env.Home[r.env.User], ".cache", "gpuprep", "files", f.SHA256, "saved_report.json")
	fi, err := os.Stat(remote)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	res = run.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	again, err := os.Stat(remote)
	require.NoError(t, err)
	assert.True(t, os.SameFile(fi, again), "a cached file with the right hash is reused")

	require.NoError(t, os.WriteFile(remote, []byte(`{"kind":"forged"}`), 0o600))
	res = run.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	require.Equal(t, 0, res[0].Output.ExitCode, "%s", res[0].Output.Stderr)
	got = nil
	require.NoError(t, json.Unmarshal(res[0].Output.Stdout, &got))
	assert.Equal(t, want, got, "a file whose size changed is uploaded again")

	// Within a run a file verified on a host is then only compared with its
	// identity (inode, size, times in seconds); a new run hashes it again:
	// a same-size forgery is replaced.
	forged := bytes.Repeat([]byte(" "), len(rep))
	require.NoError(t, os.WriteFile(remote, forged, 0o600))
	run2 := r.runner(r.transport())
	run2.Exec.Files = []*File{f}
	run2.Args = run.Args
	res = run2.Run(context.Background(), h)
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	require.Equal(t, 0, res[0].Output.ExitCode, "%s", res[0].Output.Stderr)
	got = nil
	require.NoError(t, json.Unmarshal(res[0].Output.Stdout, &got))
	assert.Equal(t, want, got, "a new run hashes the file again")
}

// serveAgent serves keyring as an ssh-agent on a unix socket, points
// SSH_AUTH_SOCK at it and returns the client AgentFromEnv makes, as
// `gpuprep fleet` does.
func serveAgent(t *testing.T, keyring agent.Agent) agent.ExtendedAgent {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() }) // ends the Accept loop below; nothing was sent on it
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = agent.ServeAgent(keyring, c) // returns when the client hangs up (io.EOF)
			}()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	ag, closer := AgentFromEnv()
	require.NotNil(t, ag)
	t.Cleanup(func() { assert.NoError(t, closer.Close()) })
	return ag
}

// addUnrelatedKeys adds n keys no server accepts to keyring.
func addUnrelatedKeys(t *testing.T, keyring agent.Agent, n int) {
	for i := 0; i < n; i++ {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: priv, Comment: fmt.Sprintf("unrelated %d", i)}))
	}
}

// authorize appends pub to the test servers' authorized_keys.
func (r *rig) authorize(t *testing.T, pub ssh.PublicKey) {
	f, err := os.OpenFile(filepath.Join(r.env.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(ssh.MarshalAuthorizedKey(pub))
	require.NoError(t, err)
}

// An agent holding more keys than sshd's MaxAuthTries (6) does not keep
// the host's own key from being tried: key files go first, through the
// agent's signer when it holds them; an agent holding only wrong keys ends
// as auth-failed, saying what to do.
func TestSSHAgentWithManyKeys(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.17")
	sshdtest.Trust(t, r.kh, false, s)
	ctx := context.Background()
	h := r.host("agent", s, r.env.User)
	keyring := agent.NewKeyring()
	addUnrelatedKeys(t, keyring, 7)
	ag := serveAgent(t, keyring)

	tr := r.transport()
	tr.Agent = ag
	c, err := tr.Dial(ctx, h)
	require.NoError(t, err, "an unencrypted --identity file")
	require.NoError(t, c.Close())

	enc := filepath.Join(t.TempDir(), "enc_ed25519")
	r.authorize(t, sshdtest.WriteKey(t, enc, "sekrit"))
	data, err := os.ReadFile(enc)
	require.NoError(t, err)
	raw, err := ssh.ParseRawPrivateKeyWithPassphrase(data, []byte("sekrit"))
	require.NoError(t, err)
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: raw})) // the agent's 8th key
	tr = r.transport()
	tr.Identities = []string{enc}
	tr.Agent = ag
	c, err = tr.Dial(ctx, h)
	require.NoError(t, err, "an encrypted --identity file the agent holds behind 7 others")
	require.NoError(t, c.Close())

	wrong := agent.NewKeyring()
	addUnrelatedKeys(t, wrong, 7)
	tr = r.transport()
	tr.Identities = nil
	tr.Agent = serveAgent(t, wrong)
	_, err = tr.Dial(ctx, h)
	require.Error(t, err)
	t.Log(err)
	assert.Equal(t, StatusAuthFailed, StatusOf(err), err.Error())
	assert.Contains(t, err.Error(), "too many rejected keys")
	assert.Contains(t, err.Error(), "--identity")
	assert.Contains(t, err.Error(), "fewer keys in ssh-agent")
}

// With no key named anywhere, ~/.ssh/id_ed25519 logs in although an
// agent with other keys is running (ssh offers its default files after the
// agent's keys); IdentityFile none keeps it away.
func TestSSHDefaultKeyBesideAgent(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.24")
	sshdtest.Trust(t, r.kh, false, s)
	home := t.TempDir()
	t.Setenv("HOME", home)
	require.NoError(t, os.Mkdir(filepath.Join(home, ".ssh"), 0o700))
	r.authorize(t, sshdtest.WriteKey(t, filepath.Join(home, ".ssh", "id_ed25519"), ""))
	keyring := agent.NewKeyring()
	addUnrelatedKeys(t, keyring, 2)
	h := r.host("defaults", s, r.env.User)

	tr := r.transport()
	tr.Identities = nil
	tr.Agent = serveAgent(t, keyring)
	c, err := tr.Dial(context.Background(), h)
	require.NoError(t, err, "~/.ssh/id_ed25519 after the agent's two keys")
	require.NoError(t, c.Close())

	h.IdentityFiles = []string{NoIdentityFile}
	_, err = tr.Dial(context.Background(), h)
	require.Error(t, err, "IdentityFile none: the agent's keys only")
	assert.Equal(t, StatusAuthFailed, StatusOf(err), err.Error())
}

// writeRSAHostKey writes an RSA private key (OpenSSH format) to file and
// returns its public key.
func writeRSAHostKey(t *testing.T, file string) ssh.PublicKey {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	blk, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(blk), 0o600))
	pub, err := ssh.NewPublicKey(&priv.PublicKey)
	require.NoError(t, err)
	return pub
}

// known_hosts holding a key of another type than the server's is a
// changed key (not a failed negotiation), even with --accept-new; a
// server with both types whose recorded type alone is known is fine.
func TestSSHHostKeyOfOtherType(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	s := r.env.Start(t, "127.0.0.18") // ed25519 only
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	known, err := ssh.NewPublicKey(&rsaPriv.PublicKey)
	require.NoError(t, err)
	line := knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, known) + "\n"
	require.NoError(t, os.WriteFile(r.kh, []byte(line), 0o600))
	tr := r.transport()
	tr.AcceptNew = true
	_, err = tr.Dial(ctx, r.host("rsa-known", s, r.env.User))
	require.Error(t, err)
	t.Log(err)
	assert.Equal(t, StatusHostKeyChanged, StatusOf(err), err.Error())
	assert.Contains(t, err.Error(), "ssh-rsa "+ssh.FingerprintSHA256(known))
	assert.Contains(t, err.Error(), "ssh-ed25519 "+ssh.FingerprintSHA256(s.HostKey))
	b, err := os.ReadFile(r.kh)
	require.NoError(t, err)
	assert.Equal(t, line, string(b), "nothing recorded")

	// Both an ed25519 and an RSA key, each alone recorded (by default
	// x/crypto prefers RSA over ed25519).
	var rsaKey ssh.PublicKey
	both := r.env.StartWith(t, "127.0.0.19", func(_ ssh.PublicKey, keyFile string) []string {
		rsaKey = writeRSAHostKey(t, keyFile+"-rsa")
		return []string{"-o", "HostKey=" + keyFile + "-rsa"}
	})
	for _, recorded := range []ssh.PublicKey{both.HostKey, rsaKey} {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(kh, []byte(knownhosts.Line([]string{knownhosts.Normalize(both.Addr)}, recorded)+"\n"), 0o600))
		tr = r.transport()
		tr.KnownHosts = []string{kh}
		c, err := tr.Dial(ctx, r.host("both", both, r.env.User))
		require.NoError(t, err, recorded.Type())
		assert.NoError(t, c.Close())
	}
}

// certServer starts an sshd whose host key has a certificate from ca.
func certServer(t *testing.T, r *rig, ip string, ca ssh.Signer) *sshdtest.Server {
	return r.env.StartWith(t, ip, func(hostKey ssh.PublicKey, keyFile string) []string {
		cert := &ssh.Certificate{Key: hostKey, CertType: ssh.HostCert, KeyId: "test", ValidPrincipals: []string{ip},
			ValidAfter: 0, ValidBefore: ssh.CertTimeInfinity}
		require.NoError(t, cert.SignCert(rand.Reader, ca))
		require.NoError(t, os.WriteFile(keyFile+"-cert.pub", ssh.MarshalAuthorizedKey(cert), 0o644))
		return []string{"-o", "HostCertificate=" + keyFile + "-cert.pub"}
	})
}

// newSigner is a new ed25519 key (a certificate authority, a host key).
func newSigner(t *testing.T) ssh.Signer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	ca, err := ssh.NewSignerFromKey(priv)
	require.NoError(t, err)
	return ca
}

// Certificates are checked like OpenSSH does: a host an authority covers
// but that serves a plain key is unknown (and --accept-new records it); a
// certificate from an unknown authority is checked as its plain key; a
// revoked key or authority is refused as changed.
func TestSSHCertificateFallbacks(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ca, other := newSigner(t), newSigner(t)
	write := func(lines ...string) string {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(kh, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		return kh
	}
	authority := func(s *sshdtest.Server, ca ssh.Signer) string {
		return "@cert-authority " + knownhosts.Normalize(s.Addr) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.PublicKey())))
	}
	dial := func(s *sshdtest.Server, kh string, acceptNew bool) error {
		tr := r.transport()
		tr.KnownHosts, tr.AcceptNew = []string{kh}, acceptNew
		c, err := tr.Dial(ctx, r.host("cert", s, r.env.User))
		if err == nil {
			assert.NoError(t, c.Close())
		}
		return err
	}

	// An authority covers the host, which serves a plain key only.
	plain := r.env.Start(t, "127.0.0.20")
	kh := write(authority(plain, ca))
	err := dial(plain, kh, false)
	require.Error(t, err)
	assert.Equal(t, StatusHostKeyUnknown, StatusOf(err), err.Error())
	assert.Contains(t, err.Error(), ssh.FingerprintSHA256(plain.HostKey))
	require.NoError(t, dial(plain, kh, true), "--accept-new records it")
	require.NoError(t, dial(plain, kh, false), "and it is known from then on")

	s := certServer(t, r, "127.0.0.21", ca)
	require.NoError(t, dial(s, write(authority(s, ca)), false), "the authority vouches for the certificate")

	// An unknown authority: the certificate's key is checked as a plain key.
	require.NoError(t, dial(s, write(authority(s, other), s.KnownHostsLine(true)), false))
	err = dial(s, write(authority(s, other), knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, mustKey(t))), true)
	require.Error(t, err)
	assert.Equal(t, StatusHostKeyChanged, StatusOf(err), err.Error())
	assert.Contains(t, err.Error(), ssh.FingerprintSHA256(s.HostKey))
	kh = write()
	err = dial(s, kh, false)
	assert.Equal(t, StatusHostKeyUnknown, StatusOf(err), err)
	require.NoError(t, dial(s, kh, true), "--accept-new records the plain key")
	b, err := os.ReadFile(kh)
	require.NoError(t, err)
	assert.Contains(t, string(b), s.KnownHostsLine(false))
	require.NoError(t, dial(s, kh, false))

	// Revoked: the certificate's key, or its authority.
	for what, revoked := range map[string]ssh.PublicKey{"host key": s.HostKey, "certificate authority": ca.PublicKey()} {
		line := "@revoked * " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(revoked)))
		err := dial(s, write(authority(s, ca), line), true)
		require.Error(t, err, what)
		assert.Equal(t, StatusHostKeyChanged, StatusOf(err), err.Error())
		assert.Contains(t, err.Error(), what+" ssh-ed25519 "+ssh.FingerprintSHA256(revoked))
		assert.Contains(t, err.Error(), "@revoked")
	}
}
