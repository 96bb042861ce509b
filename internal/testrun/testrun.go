// Package testrun keeps gpuprep's test binaries from leaving anything
// behind: local users, directories and processes (sshd, etcd,
// kube-apiserver, the QEMU guest) are tagged with the test process that
// made them, its owner, and removed when that process exits by any path:
// normally, on a test failure or panic, on SIGINT/SIGTERM, and on
// `go test -timeout` (which panics the binary), by a reaper process that
// waits for the owner's death. A run also sweeps what earlier runs whose
// owner is gone left, e.g. after a SIGKILL. Call Main from TestMain.
package testrun

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const (
	// EnvOwner is set in the test binary's environment, and so inherited
	// by every process it starts; its value is the owner.
	EnvOwner  = "GPUPREP_TEST_OWNER"
	envReaper = "GPUPREP_TEST_REAPER"
	// Comment is the start of the GECOS field of the users tests make.
	Comment = "gpuprep-test owner="
	// VarDir holds the tests' directories gpuprep trusts as a cache (not
	// under a world-writable /tmp); one per owner.
	VarDir = "/var/lib/gpuprep-test"
	// TmpPrefix starts the name of each owner's directory under /tmp.
	TmpPrefix = "gpuprep-test-"
)

var (
	mu       sync.Mutex
	cleanups []func()
)

// OnExit registers f to run (last registered first) when the test binary
// exits normally or on SIGINT/SIGTERM.
func OnExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanups = append(cleanups, f)
}

func runCleanups() {
	mu.Lock()
	fs := cleanups
	cleanups = nil
	mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// Main runs the tests of m and returns the exit code for os.Exit. In the
// top test process it sweeps earlier dead runs, starts the reaper, points
// XDG_CACHE_HOME into a directory of its own, and cleans up on exit and on
// SIGINT/SIGTERM (the reaper also after a SIGHUP). A test binary the tests run again (a crash-test helper)
// shares its parent's owner, directories and cache, and leaves the
// cleaning to it.
func Main(m *testing.M) int { return MainFunc(m.Run) }

// MainFunc is Main with run (which calls m.Run) in place of m.Run, for a
// TestMain with set-up whose processes must be the run's as well.
func MainFunc(run func() int) int {
	if o := os.Getenv(envReaper); o != "" {
		reap(o)
		os.Exit(0)
	}
	if os.Getenv(EnvOwner) != "" {
		return run()
	}
	owner, err := self()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	if err := os.Setenv(EnvOwner, owner); err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	Sweep(func(o string) bool { return !Alive(o) })
	if err := startReaper(owner); err != nil {
		fmt.Fprintln(os.Stderr, "testrun: no reaper:", err)
	}
	if err := keepGoBuildCache(); err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	cache, err := TempDir("cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	if err := os.Setenv("XDG_CACHE_HOME", cache); err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 1
	}
	handleSignals(owner)
	code := run()
	cleanUp(owner)
	return code
}

// keepGoBuildCache pins GOCACHE, when unset, to the directory go uses now
// (cmd/go: os.UserCacheDir()/go-build), before XDG_CACHE_HOME moves: the
// go commands tests run (sshdtest's build of gpuprep, make
// ansible-collection) then keep the user's build cache instead of
// compiling every package again into the run's empty one (141 s for
// sshdtest's build on 2 cores, 486 s for make ansible-collection).
func keepGoBuildCache() error {
	if os.Getenv("GOCACHE") != "" {
		return nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil // go itself has no default cache then either
	}
	return os.Setenv("GOCACHE", filepath.Join(dir, "go-build"))
}

func cleanUp(owner string) {
	runCleanups()
	Sweep(func(o string) bool { return o == owner })
}

func handleSignals(owner string) {
	c := make(chan os.Signal, 1)
	// not SIGHUP: gpuprep's own interrupt tests send it to their process
	// (cmd/gpuprep lock_test, snapshot_test); a real hang-up still ends the
	// process, and the reaper cleans up after it
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-c
		fmt.Fprintf(os.Stderr, "testrun: %v: cleaning up\n", s)
		cleanUp(owner)
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
}

// Owner is this test run's owner: "PID-STARTTIME" of its top process.
func Owner() string { return os.Getenv(EnvOwner) }

func self() (string, error) {
	st, err := startTime(os.Getpid())
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d-%d", os.Getpid(), st), nil
}

// startTime is field 22 of /proc/PID/stat (clock ticks after boot); it
// tells a reused PID from the owner's.
func startTime(pid int) (uint64, error) {
	st, _, err := procStat(pid)
	return st, err
}

func procStat(pid int) (start uint64, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if i < 0 || len(f) < 20 {
		return 0, "", fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0], err
}

// Alive reports whether owner's process still runs (a zombie does not).
func Alive(owner string) bool {
	p, s, ok := strings.Cut(owner, "-")
	pid, err1 := strconv.Atoi(p)
	want, err2 := strconv.ParseUint(s, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return false
	}
	st, state, err := procStat(pid)
	return err == nil && st == want && state != "Z"
}

// TempDir makes a new directory, mode 0755, in this run's directory under
// /tmp (made on first use, removed at exit).
func TempDir(prefix string) (string, error) {
	base := filepath.Join(os.TempDir(), TmpPrefix+Owner())
	return mkTemp(base, prefix)
}

// VarTempDir is TempDir in this run's directory under VarDir (as root)
// or ~/.cache/gpuprep-test: it and every directory above it owned by root
// or the user, writable by no one else, a place gpuprep trusts for its
// cache.
func VarTempDir(prefix string) (string, error) {
	bases := varBases()
	base := bases[len(bases)-1]
	if os.Geteuid() != 0 && base == VarDir {
		return "", fmt.Errorf("testrun: no home directory for the test directories")
	}
	if err := mkdir755(base); err != nil {
		return "", err
	}
	return mkTemp(filepath.Join(base, Owner()), prefix)
}

func mkTemp(base, prefix string) (string, error) {
	if Owner() == "" {
		return "", fmt.Errorf("testrun: no owner: call testrun.Main from TestMain")
	}
	if err := mkdir755(base); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

func mkdir755(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// startReaper starts this binary again as the reaper: it reads its stdin,
// a pipe whose other end only this process holds, until EOF (this process
// is gone, however it ended), waits for the owner to be dead and sweeps
// what is the owner's. Its own process group: a ^C to the terminal's
// group does not reach it.
func startReaper(owner string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(withoutOwner(os.Environ()), envReaper+"="+owner)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close() // the error is the start's
		return err
	}
	go func() { _ = cmd.Wait() }() // a zombie until then; the reaper outlives this process
	reaperPipe = w
	return nil
}

var reaperPipe *os.File //nolint:unused // never read: referenced so the pipe stays open (not finalized) until exit

func withoutOwner(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, EnvOwner+"=") {
			out = append(out, e)
		}
	}
	return out
}

func reap(owner string) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			break
		}
	}
	waitDead(owner)
	Sweep(func(o string) bool { return o == owner })
}
