package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// While another process holds the host's gpuprep lock, a command that would change the host changes nothing and
// names the holder (exit 3); read-only commands and dry runs go on; once it is released the command runs.
func TestHostChangingCommandsWaitForNoOne(t *testing.T) {
	root := fixtureRoot(t, "reboot-pending")
	grub := filepath.Join(root, "etc/default/grub")
	before, err := os.ReadFile(grub)
	require.NoError(t, err)
	lock := filepath.Join(root, lockFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(lock), 0o755))
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
		require.Contains(t, errs, "another gpuprep is changing this host (pid 4242: gpuprep apply, since 03:04:05, holding /run/lock/gpuprep.lock): nothing was done", args)
	}
	after, err := os.ReadFile(grub)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after))
	_, err = os.Stat(filepath.Join(root, "etc/default/kubelet"))
	require.ErrorIs(t, err, os.ErrNotExist)

	for _, args := range [][]string{{"check"}, {"grub", "show"}, {"grub", "ensure", "pci=realloc", "--no-regenerate", "--dry-run"}, {"plan", "--mode", "container"}} {
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
				cmd := exec.Command(bin, "--root", root, "grub", "ensure", fmt.Sprintf("gpuprep_test_%d=1", i), "--no-regenerate")
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
