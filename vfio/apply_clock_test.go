package vfio

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// A failed persist's restore stamps the backup of what it undoes with the
// effector's clock, not the machine's: stopped at the apply's time (as
// every step's effector is, effect.Effector.At), moved on by the backup
// name's nanosecond so that it does not take the name of the backup it
// restores.
func TestPersistRestoreBackupByEffectorClock(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction", func(b *fixture.Builder) {
		b.File("/usr/sbin/update-initramfs", "")
		b.File(ModprobeConf, "# an older file\n")
	})
	k.Fail["update-initramfs -u"] = syscall.EIO
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o)
	_, err := Bind(context.Background(), env(k), inv, p, o)
	require.ErrorContains(t, err, "regenerate the initramfs")
	require.NotContains(t, err.Error(), "not restored")
	m, _ := filepath.Glob(filepath.Join(k.Root.Dir(), ModprobeConf) + ".gpuprep-*.bak")
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	base := filepath.Base(ModprobeConf)
	require.ElementsMatch(t, []string{
		filepath.Base(host.BackupName(base, t0)),                      // the apply's
		filepath.Base(host.BackupName(base, t0.Add(time.Nanosecond))), // the restore's, of what it undid
	}, m)
	require.Equal(t, "# an older file\n", read(t, k, ModprobeConf))
}

// waitGroups looks for a group's /dev/vfio node a bounded number of times,
// pausing through the effector: with its clock stopped (At) it still ends,
// and it never sleeps on its own. The live root is only read (a group no
// machine has).
func TestWaitGroupsPausesThroughEffector(t *testing.T) {
	t.Parallel()
	live, err := host.NewRoot("/")
	require.NoError(t, err)
	require.True(t, live.IsLive())
	var paused []time.Duration
	e := env(sim(t, "turing-multifunction"))
	e.Root = live
	e.Pause = func(d time.Duration) { paused = append(paused, d) }
	res := &Result{Groups: map[string]bool{}}
	none := "gpuprep-test-no-such-group"
	start := time.Now()
	waitGroups(e, []*Target{{Dev: &pci.Device{IOMMUGroup: none}}, {Dev: &pci.Device{IOMMUGroup: none + "-2"}}}, res)
	require.Less(t, time.Since(start), 2*time.Second, "slept on its own")
	require.Len(t, paused, 100, "100 looks for all the groups together")
	require.Equal(t, 50*time.Millisecond, paused[0])
	require.Equal(t, map[string]bool{none: false, none + "-2": false}, res.Groups)
	require.False(t, live.Exists("/dev/vfio/"+none))
}
