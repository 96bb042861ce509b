package testrun

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	os.Exit(Main(m))
}

func TestOwner(t *testing.T) {
	o := Owner()
	require.True(t, isOwner(o), o)
	assert.True(t, Alive(o))
	pid, _, _ := strings.Cut(o, "-")
	assert.Equal(t, strconv.Itoa(os.Getpid()), pid)
	assert.False(t, Alive(pid+"-1"), "the same PID with another start time is another process")
	assert.False(t, Alive("4194305-1"))
	assert.False(t, Alive("garbage"))
	assert.False(t, isOwner("cache-x"))
}

// helperEnv is set in the environment of this test binary run again as a
// test run of its own (a new owner), by the tests below.
const helperEnv = "GPUPREP_TESTRUN_HELPER"

// TestHelperRun is not a test: run by the tests below in a new test run,
// it makes what a harness makes (a directory, a process, as root a user)
// and prints them, then ends as helperEnv says.
func TestHelperRun(t *testing.T) {
	how := os.Getenv(helperEnv)
	if how == "" {
		t.Skip("a helper of TestCleanupOn")
	}
	dir, err := VarTempDir("helper-")
	require.NoError(t, err)
	tmp, err := TempDir("helper-")
	require.NoError(t, err)
	sleep := exec.Command("sleep", "300")
	require.NoError(t, sleep.Start())
	name := ""
	if os.Geteuid() == 0 {
		name = "gpuprep-trun-" + strconv.FormatInt(int64(os.Getpid()), 36)
		out, err := exec.Command("useradd", "-M", "-c", Comment+Owner(), "-d", dir, "-s", "/bin/sh", name).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.NoError(t, os.WriteFile(Sudoers+name, []byte("# test\n"), 0o440))
	}
	fmt.Printf("MADE %s %s %d %s\n", dir, tmp, sleep.Process.Pid, name)
	switch how {
	case "panic": // as `go test -timeout` ends a test binary
		panic("helper: simulated timeout")
	case "wait": // until SIGINT
		time.Sleep(time.Minute)
	case "exit":
	}
}

type made struct {
	dirs []string
	pid  int
	user string
}

// runHelper runs TestHelperRun in a new test run; signal, when set, is
// sent once it printed what it made. It returns what it made and its exit
// code.
func runHelper(t *testing.T, how string, signal os.Signal) (made, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRun$", "-test.count=1")
	cmd.Env = append(withoutOwner(os.Environ()), helperEnv+"="+how)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("helper's stderr:\n%s", stderr.String())
		}
	})
	require.NoError(t, cmd.Start())
	var m made
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 4 && f[0] == "MADE" {
			m.dirs = f[1:3]
			m.pid, _ = strconv.Atoi(f[3])
			if len(f) > 4 {
				m.user = f[4]
			}
			if signal != nil {
				require.NoError(t, cmd.Process.Signal(signal))
			}
		}
	}
	_ = cmd.Wait() // the exit code is read below
	require.NotEmpty(t, m.dirs, "the helper made nothing")
	return m, cmd.ProcessState.ExitCode()
}

// gone waits up to 10 s for everything in m to be gone and says what is
// left.
func gone(m made) []string {
	var left []string
	for i := 0; i < 100; i++ {
		left = nil
		for _, d := range m.dirs {
			if _, err := os.Stat(d); err == nil {
				left = append(left, d)
			}
		}
		if _, st, err := procStat(m.pid); err == nil && st != "Z" {
			left = append(left, fmt.Sprintf("process %d", m.pid))
		}
		if m.user != "" {
			if _, err := user.Lookup(m.user); err == nil {
				left = append(left, "user "+m.user)
			}
			if _, err := os.Stat(Sudoers + m.user); err == nil {
				left = append(left, Sudoers+m.user)
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return left
}

func TestCleanupOnExit(t *testing.T) {
	m, code := runHelper(t, "exit", nil)
	assert.Equal(t, 0, code)
	assert.Empty(t, gone(m))
}

// A panic (what `go test -timeout` does) skips TestMain's cleanup: the
// reaper cleans up.
func TestCleanupOnPanic(t *testing.T) {
	m, code := runHelper(t, "panic", nil)
	assert.NotEqual(t, 0, code)
	assert.Empty(t, gone(m))
}

func TestCleanupOnSIGINT(t *testing.T) {
	m, code := runHelper(t, "wait", syscall.SIGINT)
	assert.Equal(t, 130, code)
	assert.Empty(t, gone(m))
}

func TestCleanupOnSIGKILL(t *testing.T) {
	m, code := runHelper(t, "wait", syscall.SIGKILL)
	assert.Equal(t, -1, code)
	assert.Empty(t, gone(m), "the reaper cleans up after a SIGKILL too")
}

// What a dead run left is swept by the next run's start (here: Sweep with
// the same predicate); a live run's things are not.
func TestSweepDeadOwnersOnly(t *testing.T) {
	dead := "4194305-1" // above Linux's PID limit: never alive
	d := filepath.Join(os.TempDir(), TmpPrefix+dead)
	require.NoError(t, os.MkdirAll(filepath.Join(d, "cache-x"), 0o755))
	mine, err := TempDir("live-")
	require.NoError(t, err)
	sleep := exec.Command("sleep", "300")
	sleep.Env = append(withoutOwner(os.Environ()), EnvOwner+"="+dead)
	require.NoError(t, sleep.Start())
	Sweep(func(o string) bool { return !Alive(o) })
	_, err = os.Stat(d)
	assert.True(t, os.IsNotExist(err), "the dead run's directory is removed")
	assert.DirExists(t, mine, "this run's directory is kept")
	_ = sleep.Wait()
	assert.Equal(t, "signal: killed", sleep.ProcessState.String(), "the dead run's process is killed")
}

// The go commands tests run keep the user's build cache: GOCACHE is not
// the run's own (empty) cache directory, which XDG_CACHE_HOME now names.
func TestGoBuildCacheIsNotTheRunsCache(t *testing.T) {
	gocache := os.Getenv("GOCACHE")
	require.NotEmpty(t, gocache, "GOCACHE unset: go would put its cache under the run's XDG_CACHE_HOME")
	require.False(t, strings.HasPrefix(gocache, os.Getenv("XDG_CACHE_HOME")+"/"), "GOCACHE %s is in the run's cache %s", gocache, os.Getenv("XDG_CACHE_HOME"))
}
