// Package sshdtest starts real OpenSSH sshd servers on loopback addresses
// for gpuprep's fleet tests. It needs root (to create the test users and
// run sshd with privilege separation) and /usr/sbin/sshd; without them the
// tests that use it are skipped with the reason.
package sshdtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpuprep/gpuprep/internal/testrun"
)

// SSHD is the OpenSSH server binary.
const SSHD = "/usr/sbin/sshd"

// Skip skips t unless real sshd tests can run here.
func Skip(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("real-sshd fleet tests need root (test users, sshd privilege separation); run as root, e.g. in CI")
	}
	if _, err := os.Stat(SSHD); err != nil {
		t.Skipf("real-sshd fleet tests need OpenSSH's sshd (%s: %v); install the Debian package openssh-server", SSHD, err)
	}
	if testing.Short() {
		t.Skip("real-sshd fleet tests skipped with -short")
	}
}

// Env is a directory with client keys, sshd's configuration and the test
// users' homes, shared by the tests of one test binary.
type Env struct {
	Dir       string // world-traversable; removed by Cleanup
	ClientKey string // private key file (ed25519, unencrypted) in authorized_keys
	OtherKey  string // a key that is not authorized
	// User has passwordless sudo for gpuprep's cached binaries only;
	// NoSudoUser has no sudo rights (sudo wants a password).
	User, NoSudoUser string
	Home             map[string]string
	others           []string // users made by OtherUser
	authKeys         string
	config           string
	sudoers          string
}

var (
	sharedMu     sync.Mutex
	shared       *Env
	sharedErr    error
	registerOnce sync.Once
)

// Shared returns the test binary's Env, making it on first use: keys, the
// users gpuprep-TAG-ID and gpuprep-TAG-ID-nosudo (ID: this process's PID
// in base 36, so that concurrent test processes never share a user; their
// GECOS field names the owner, see testrun; their homes in Dir) and a
// passwordless-sudo rule for the first, limited to gpuprep's cache
// directory. Skips when sshd tests cannot run. The test binary's TestMain
// must call testrun.Main, which calls Cleanup at exit (and its reaper
// removes the users on any other exit).
func Shared(t testing.TB, tag string) *Env {
	t.Helper()
	Skip(t)
	if testrun.Owner() == "" {
		t.Fatal("sshdtest: the test binary's TestMain must call testrun.Main")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = newEnv(tag)
		if sharedErr == nil {
			registerOnce.Do(func() { testrun.OnExit(Cleanup) })
		}
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Cleanup removes the shared Env, its users (even one a session sshd has
// not ended yet still runs a process of: userdel -f) and sudoers file, and
// the built gpuprep. It may be called more than once. It runs at the test
// binary's exit (or in a test's cleanup), where no test can fail any more:
// what it could not remove it names on stderr, for the next run's sweep
// (testrun) and for whoever reads the log.
func Cleanup() {
	if err := cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "sshdtest: cleanup:", err)
	}
}

// cleanup is Cleanup's work, returning all it could not remove.
func cleanup() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	var errs []error
	if shared != nil {
		errs = append(errs, os.RemoveAll(shared.Dir))
		if shared.sudoers != "" {
			errs = append(errs, removeIfThere(shared.sudoers))
		}
		for _, u := range append([]string{shared.User, shared.NoSudoUser}, shared.others...) {
			errs = append(errs, testrun.DeleteUser(u))
		}
		shared, sharedErr = nil, nil
	}
	if buildBin != "" {
		errs = append(errs, os.RemoveAll(filepath.Dir(buildBin)))
	}
	return errors.Join(errs...)
}

// removeIfThere removes the file name; one already gone is no error.
func removeIfThere(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// userName is gpuprep-TAG-ID: ID, this process's PID in base 36 (at most
// 5 characters), is unique among running test processes; the longest
// names, gpuprep-TAG-ID-nosudo and OtherUser's, stay under Linux's 32.
func userName(tag string) string {
	return "gpuprep-" + tag + "-" + strconv.FormatInt(int64(os.Getpid()), 36)
}

// addUser makes user (or takes over one of an earlier process with this
// PID) with home and the owner in its GECOS field.
func addUser(t testing.TB, user, home string, extra ...string) {
	t.Helper()
	comment := testrun.Comment + testrun.Owner()
	if _, err := lookupUser(user); err != nil {
		run(t, append(append([]string{"useradd", "-M", "-c", comment, "-d", home, "-s", "/bin/sh"}, extra...), user)...)
	} else {
		run(t, "usermod", "-c", comment, "-d", home, user)
	}
}

type fatal struct{ error }

func newEnv(tag string) (e *Env, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = f.error
		}
	}()
	t := panicT{}
	dir, err := SafeTempDir("sshd-" + tag + "-")
	must(t, err)
	must(t, os.Chmod(dir, 0o755))
	e = &Env{Dir: dir, Home: map[string]string{}, User: userName(tag), NoSudoUser: userName(tag) + "-nosudo",
		authKeys: filepath.Join(dir, "authorized_keys"), config: filepath.Join(dir, "sshd_config")}
	e.ClientKey = filepath.Join(dir, "client_ed25519")
	pub := WriteKey(t, e.ClientKey, "")
	e.OtherKey = filepath.Join(dir, "other_ed25519")
	WriteKey(t, e.OtherKey, "")
	must(t, os.WriteFile(e.authKeys, ssh.MarshalAuthorizedKey(pub), 0o644))
	must(t, os.MkdirAll("/run/sshd", 0o755))

	for _, u := range []string{e.User, e.NoSudoUser} {
		home := filepath.Join(dir, "home-"+u)
		addUser(t, u, home)
		// '*' (not '!'): no password, yet not locked, so sshd without PAM lets keys in.
		run(t, "usermod", "-p", "*", u)
		must(t, os.MkdirAll(home, 0o755))
		run(t, "chown", u+":", home)
		e.Home[u] = home
	}
	if _, err := exec.LookPath("sudo"); err == nil {
		rule := fmt.Sprintf("%s ALL=(root) NOPASSWD: %s/.cache/gpuprep/*/gpuprep\n", e.User, e.Home[e.User])
		e.sudoers = testrun.Sudoers + e.User
		must(t, os.WriteFile(e.sudoers, []byte(rule), 0o440))
	}
	cfg := strings.Join([]string{
		"AuthorizedKeysFile " + e.authKeys,
		"PidFile none", "UsePAM no", "StrictModes no",
		"PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password", "MaxStartups 1000:30:2000", "MaxSessions 100",
		"LogLevel ERROR", "AllowTcpForwarding yes", "PermitTTY no", "X11Forwarding no",
		"AcceptEnv none", "",
	}, "\n")
	must(t, os.WriteFile(e.config, []byte(cfg), 0o644))
	return e, nil
}

// SafeTempDir makes a new directory, mode 0755, in a place gpuprep trusts
// for its cache: it and every directory above it owned by root or the
// user, writable by no one else (/tmp, writable by all, is not): this test
// run's directory under /var/lib/gpuprep-test as root, else under
// ~/.cache/gpuprep-test (testrun.VarTempDir). The caller may remove it;
// testrun removes it, and the base when empty, at exit.
func SafeTempDir(prefix string) (string, error) {
	return testrun.VarTempDir(prefix)
}

// OtherUser makes (or takes over) the local user gpuprep-TAG-ID-NAME: no
// login, no sudo, a home of its own; a second user of the hosts, e.g. one
// who can write a shared cache directory. It returns its uid and gid.
// Cleanup removes it.
func (e *Env) OtherUser(t testing.TB, name string) (user string, uid, gid int) {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	user = e.User + "-" + name
	home := filepath.Join(e.Dir, "home-"+user)
	addUser(t, user, home, "-U")
	if !slices.Contains(e.others, user) {
		e.others = append(e.others, user)
	}
	u, err := lookupUser(user)
	must(t, err)
	uid, err = strconv.Atoi(u.Uid)
	must(t, err)
	gid, err = strconv.Atoi(u.Gid)
	must(t, err)
	return user, uid, gid
}

var lookupUser = user.Lookup

// AsUser runs a shell script as uid:gid (no supplementary groups), with
// setpriv, and returns its combined output.
func AsUser(uid, gid int, script string) ([]byte, error) {
	return exec.Command("setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--", "/bin/sh", "-c", script).CombinedOutput()
}

// panicT turns setup failures outside a test into errors.
type panicT struct{ testing.TB }

func (panicT) Helper()                     {}
func (panicT) Fatal(a ...any)              { panic(fatal{fmt.Errorf("%s", fmt.Sprint(a...))}) }
func (p panicT) Fatalf(f string, a ...any) { panic(fatal{fmt.Errorf(f, a...)}) }

// HasSudo reports whether sudo is installed (the sudo tests need it).
func HasSudo() bool {
	_, err := exec.LookPath("sudo")
	return err == nil
}

// WriteKey writes a new ed25519 private key (encrypted when passphrase is
// set) in OpenSSH format and returns its public key.
func WriteKey(t testing.TB, file, passphrase string) ssh.PublicKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	var blk *pem.Block
	if passphrase == "" {
		blk, err = ssh.MarshalPrivateKey(priv, "gpuprep test")
	} else {
		blk, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "gpuprep test", []byte(passphrase))
	}
	must(t, err)
	must(t, os.WriteFile(file, pem.EncodeToMemory(blk), 0o600))
	s, err := ssh.NewSignerFromKey(priv)
	must(t, err)
	must(t, os.WriteFile(file+".pub", ssh.MarshalAuthorizedKey(s.PublicKey()), 0o644))
	return s.PublicKey()
}

// Server is a running sshd.
type Server struct {
	Addr    string // host:port
	Host    string
	Port    int
	HostKey ssh.PublicKey
	keyFile string
}

// FreePort returns a TCP port free on ip now.
func FreePort(t testing.TB, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start starts an sshd on ip (a 127.x.y.z address) and a free port, with a
// fresh host key, and waits until it accepts connections.
func (e *Env) Start(t testing.TB, ip string) *Server {
	t.Helper()
	return e.StartWith(t, ip, nil)
}

// StartWith is Start with extra sshd arguments from opts (given the host
// key and its file), e.g. a host certificate.
func (e *Env) StartWith(t testing.TB, ip string, opts func(hostKey ssh.PublicKey, keyFile string) []string) *Server {
	t.Helper()
	port := FreePort(t, ip)
	s := &Server{Host: ip, Port: port, Addr: net.JoinHostPort(ip, fmt.Sprint(port))}
	s.keyFile = filepath.Join(e.Dir, fmt.Sprintf("hostkey-%s-%d", ip, port))
	s.HostKey = WriteKey(t, s.keyFile, "")
	args := []string{"-D", "-e", "-f", e.config, "-o", "HostKey=" + s.keyFile, "-o", "ListenAddress=" + s.Addr}
	if opts != nil {
		args = append(args, opts(s.HostKey, s.keyFile)...)
	}
	cmd := exec.Command(SSHD, args...)
	logf, err := os.Create(s.keyFile + ".log")
	must(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	t.Cleanup(func() {
		stopSSHD(t, cmd)
		if err := logf.Close(); err != nil {
			t.Logf("sshd %s log: %v", s.Addr, err)
		}
		if t.Failed() {
			if b, _ := os.ReadFile(logf.Name()); len(b) > 0 {
				t.Logf("sshd %s log:\n%s", s.Addr, b)
			}
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			_ = c.Close() // a probe: nothing was sent on it, nothing can be lost
			return s
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("sshd on %s did not start: %v\n%s", s.Addr, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopSSHD kills the test's sshd and reaps it. Kill fails only when it has
// exited already (then Wait reports how); Wait's error is the kill itself
// ("signal: killed") unless sshd exited before, which t's log shows.
func stopSSHD(t testing.TB, cmd *exec.Cmd) {
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Logf("sshd pid %d: kill: %v", cmd.Process.Pid, err)
	}
	if err := cmd.Wait(); err != nil && !killed(err) {
		t.Logf("sshd pid %d: %v", cmd.Process.Pid, err)
	}
}

// killed says whether err is a process's exit by SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// KnownHostsLine is the known_hosts line of s (hashed when hashed is set).
func (s *Server) KnownHostsLine(hashed bool) string {
	name := knownhosts.Normalize(s.Addr)
	if hashed {
		name = knownhosts.HashHostname(name)
	}
	return knownhosts.Line([]string{name}, s.HostKey)
}

// Trust appends the servers' keys to the known_hosts file.
func Trust(t testing.TB, knownHosts string, hashed bool, servers ...*Server) {
	t.Helper()
	f, err := os.OpenFile(knownHosts, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	must(t, err)
	for _, s := range servers {
		if _, err := fmt.Fprintln(f, s.KnownHostsLine(hashed)); err != nil {
			_ = f.Close() // the write's error is the one to report
			t.Fatal(err)
		}
	}
	must(t, f.Close())
}

// SilentServer accepts TCP connections and never says anything (a hung
// host). It returns its address.
func SilentServer(t testing.TB, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	must(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		// The test is over and nothing was ever sent on these: a failed
		// close loses nothing (the process's exit closes them anyway).
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Gpuprep builds gpuprep (static, like `make build`) once per test binary
// and returns its path.
func Gpuprep(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %v", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := testrun.TempDir("bin-")
		if err != nil {
			buildErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil { // sshd's users run it
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "gpuprep")
		cmd := exec.Command("go", "build", "-trimpath", "-o", buildBin, "./cmd/gpuprep")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, b)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

func run(t testing.TB, argv ...string) {
	t.Helper()
	if b, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
