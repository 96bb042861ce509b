package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
)

// While another process holds the host's gpuprep lock, a command that would change the host changes nothing and
// names the holder (exit 3); read-only commands and dry runs go on; once it is released the command runs.
func TestHostChangingCommandsWaitForNoOne(t *testing.T) {
	root := fixtureRoot(t, "reboot-pending")
	grub := filepath.Join(root, "etc/default/grub")
	before, err := os.ReadFile(grub)
	require.NoError(t, err)
	lock := filepath.Join(root, lockFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(lock), 0o700))
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	// Another open file description, as another process has: flock(2) locks conflict between them.
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	_, err = f.WriteString("pid 4242: gpuprep apply, since 03:04:05\n")
	require.NoError(t, err)

	for _, args := range [][]string{
		{"grub", "ensure", "pci=realloc", "--no-regenerate"},
		{"grub", "remove", "iommu"},
		{"label", "--mode", "container", "--before-join"},
		{"rollback"},
	} {
		out, errs, code := gpuprep(t, append([]string{"--root", root}, args...)...)
		require.Equal(t, exitUnknown, code, "%v: %s%s", args, out, errs)
		require.Contains(t, errs, "another gpuprep is changing this host (pid 4242: gpuprep apply, since 03:04:05, holding /var/lib/gpuprep/lock): nothing was done", args)
	}
	after, err := os.ReadFile(grub)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))
	_, err = os.Stat(filepath.Join(root, "etc/default/kubelet"))
	require.ErrorIs(t, err, os.ErrNotExist)

	for _, args := range [][]string{{"check", "--mode", "container"}, {"grub", "show"}, {"grub", "ensure", "pci=realloc", "--no-regenerate", "--dry-run"}, {"plan", "--mode", "container"}} {
		_, errs, code := gpuprep(t, append([]string{"--root", root}, args...)...)
		require.NotEqual(t, exitUnknown, code, "%v: %s", args, errs)
		require.NotContains(t, errs, "another gpuprep", args)
	}

	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_UN))
	out, errs, code := gpuprep(t, "--root", root, "grub", "ensure", "pci=realloc", "--no-regenerate")
	require.Equal(t, exitNeedReboot, code, out+errs)
	after, err = os.ReadFile(grub)
	require.NoError(t, err)
	require.Contains(t, string(after), "pci=realloc")
}

// Every command that changes the host takes the lock (by its path in changesHost), and every command with a dry
// run either does or acts elsewhere (on other hosts, on the cluster).
func TestEveryHostChangingCommandIsLocked(t *testing.T) {
	elsewhere := map[string]bool{"fleet": true, "fleet check": true, "fleet run": true, "fleet apply": true, "kubevirt config": true}
	found := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := strings.TrimPrefix(c.CommandPath(), "gpuprep ")
		found[name] = true
		if c.Flags().Lookup("dry-run") != nil && !elsewhere[name] {
			require.True(t, changesHost[name], "%s has --dry-run but does not take the host's lock", name)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmdWith(nil, nil, &globals{}))
	for name := range changesHost {
		require.True(t, found[name], "changesHost names %q, which is no command", name)
	}
}

// Real processes at once on one root: each either makes its change (and it stays) or changes nothing and says
// another gpuprep is at work. Without the lock, one run's read-modify-write of /etc/default/grub lost the other's
// argument every time.
func TestConcurrentRunsLoseNoChange(t *testing.T) {
	bin := sshdtest.Gpuprep(t)
	for round := range 5 {
		root := fixtureRoot(t, "reboot-pending")
		const n = 6
		type result struct {
			code int
			out  string
		}
		res := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(bin, "--root", root, "--system-disk", "grub", "ensure", fmt.Sprintf("gpuprep_test_%d=1", i), "--no-regenerate")
				out, _ := cmd.CombinedOutput()
				res[i] = result{cmd.ProcessState.ExitCode(), string(out)}
			}()
		}
		wg.Wait()
		b, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
		require.NoError(t, err)
		made := 0
		for i, r := range res {
			arg := fmt.Sprintf("gpuprep_test_%d=1", i)
			switch r.code {
			case exitNeedReboot:
				made++
				require.Contains(t, string(b), arg, "round %d: run %d said it wrote %s:\n%s", round, i, arg, r.out)
			case exitUnknown:
				require.Contains(t, r.out, "another gpuprep is changing this host", "round %d run %d", round, i)
				require.NotContains(t, string(b), arg, "round %d run %d", round, i)
			default:
				t.Fatalf("round %d run %d: exit %d:\n%s", round, i, r.code, r.out)
			}
		}
		require.Positive(t, made, "round %d", round)
		ents, err := os.ReadDir(filepath.Join(root, "etc/default"))
		require.NoError(t, err)
		for _, e := range ents {
			require.NotContains(t, e.Name(), ".gpuprep-tmp-", "round %d", round)
		}
	}
}

// interruptingSysfs sends this process a real SIGHUP when a sysfs write to path is made (the kernel simulator
// makes it, and the rest of the step goes on), as a Ctrl-C in the middle of a step would.
type interruptingSysfs struct {
	*fixture.Kernel
	at   string
	sent int
}

func (s *interruptingSysfs) WriteAttr(p, v string) error {
	if p == s.at && s.sent == 0 {
		s.sent++
		noted := make(chan struct{})
		f := func() { close(noted) }
		interruptNoted.Store(&f)
		defer interruptNoted.Store(nil)
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			return err
		}
		select { // noted before the step goes on (no fixed sleep: a loaded machine may take longer)
		case <-noted:
		case <-time.After(10 * time.Second):
		}
	}
	return s.Kernel.WriteAttr(p, v)
}

// An interrupt in the middle of apply's first step: the step finishes (every GPU leaves VFIO, none is left half
// moved), the next step does not start, and apply ends with 130 saying how to go on; running it again finishes.
func TestApplyFinishesTheStepItWasInterruptedIn(t *testing.T) {
	exits := make(chan int, 1)
	d := realDeps()
	d.exitOnSignal = func(code int) { exits <- code }
	var sysfs *interruptingSysfs
	d.provisionKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		sysfs = &interruptingSysfs{Kernel: k, at: "/sys/bus/pci/devices/0000:21:00.0/driver/unbind"}
		return sysfs, k, err
	}
	root := fixtureRoot(t, "vfio-bound")
	gpus := []string{"0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:41:00.0"}

	out, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, 1, sysfs.sent)
	require.Equal(t, 130, code, out+errs)
	require.Contains(t, errs, "gpuprep: hangup: finishing the step in progress, then stopping")
	require.Contains(t, errs, "before step label: interrupted: stopped between steps, every change so far complete (run gpuprep apply again to continue")
	for _, g := range gpus {
		require.Equal(t, "", driverOf(t, root, g), "%s: the step finished", g)
	}
	kubelet, err := os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.NotContains(t, string(kubelet), "workload.config=container", "the label step did not start")
	select {
	case c := <-exits:
		t.Fatalf("one interrupt ended the process (%d)", c)
	default:
	}

	out, errs, code = gpuprepWith(t, d, "apply", "--root", root, "--mode", "container", "--yes")
	require.Equal(t, 0, code, out+errs)
	kubelet, err = os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.Contains(t, string(kubelet), "workload.config=container")
}

// The lock file is never followed through a symlink (it is truncated): one put in its place is refused, and what
// it points at is left as it was.
func TestHostLockRefusesASymlink(t *testing.T) {
	root := fixtureRoot(t, "reboot-pending")
	// a link that resolves to a file that exists, inside the root (as a fixture root resolves links) and outside
	victim := filepath.Join(root, "etc/shadow")
	require.NoError(t, os.WriteFile(victim, []byte("root:x:0\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/lib/gpuprep"), 0o700))
	require.NoError(t, os.Symlink("../../../etc/shadow", filepath.Join(root, lockFile)))
	_, errs, code := gpuprep(t, "--root", root, "grub", "ensure", "pci=realloc", "--no-regenerate")
	require.Equal(t, exitUnknown, code, errs)
	require.Contains(t, errs, "lock /var/lib/gpuprep/lock: ")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "root:x:0\n", string(b))
	require.NotContains(t, read(t, root, "/etc/default/grub"), "pci=realloc")
}

// An interrupt while apply waits for its confirmation ends it at once (nothing was changed), as before apply
// deferred interrupts; deferring starts once the steps do.
func TestApplyInterruptedAtItsQuestion(t *testing.T) {
	exits := make(chan int, 1)
	d := realDeps()
	d.exitOnSignal = func(code int) { exits <- code }
	simulatedKernel(t, d)
	r, w := io.Pipe()
	asked := make(chan struct{})
	d.confirmInput, d.stdinTTY = &firstRead{r: r, at: asked}, func() bool { return true }
	root := fixtureRoot(t, "vfio-bound")
	type result struct {
		errs string
		code int
	}
	done := make(chan result, 1)
	go func() {
		_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "container")
		done <- result{errs, code}
	}()
	select {
	case <-asked: // apply reads the answer: it is at the question, its lock and interrupt handling in place
	case <-time.After(30 * time.Second):
		t.Fatal("apply never asked")
	}
	require.Equal(t, 129, hangUp(t, exits), "the interrupt at the question ends apply")
	require.NoError(t, w.Close()) // the stand-in for the process's end: the question gets no answer
	res := <-done
	require.Contains(t, res.errs, "gpuprep: hangup: nothing was changed")
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:11:00.0"))
}

// firstRead closes at when it is first read.
type firstRead struct {
	r    io.Reader
	at   chan struct{}
	once sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { close(f.at) })
	return f.r.Read(p)
}
