package provision_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/provision"
)

// untouched is a tree without what gpuprep keeps after a rollback: its
// journal's directory and the backups.
func untouched(tree []string, skip ...string) []string {
	skip = append(skip, "/var/", "/sys/", "/dev/", ".gpuprep-") // the kernel's state: TestStepUndo
	return slices.DeleteFunc(slices.Clone(tree), func(l string) bool {
		return slices.ContainsFunc(skip, func(s string) bool { return strings.HasPrefix(l, s) || s[0] == '.' && strings.Contains(l, s) })
	})
}

func (n *node) rollback(t *testing.T, o provision.RollbackOptions) *provision.RollbackResult {
	t.Helper()
	res, err := provision.Rollback(context.Background(), n.env, o)
	require.NoError(t, err)
	return res
}

func stepIDs(oc *provision.Outcome) []string {
	var ids []string
	for _, s := range oc.Steps {
		ids = append(ids, s.ID+" "+s.Status)
	}
	return ids
}

func (n *node) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, p))
	require.NoError(t, err)
	return string(b)
}

// Plan, apply, rollback on a fixture root: every step's change is undone,
// the tree is as before apply (but the journal and the backups), and a
// second rollback finds nothing to undo.
func TestPlanApplyRollback(t *testing.T) {
	for _, c := range []struct {
		scenario string
		mode     preflight.Mode
		steps    []string
		skip     []string // what rollback leaves as it is, beyond the kernel's state
	}{
		{"vfio-bound", preflight.Container, []string{"vfio-unbind done", "label done"}, nil},
		{"iommu-off-kernel", preflight.VMPassthrough, []string{"kernel-args done", "reboot stopped"}, nil},
		{"vgpu-fresh-mdev", preflight.Container, []string{"nouveau done", "reboot skipped", "label done"},
			// nouveau is not loaded again (TestStepUndo/nouveau)
			[]string{"/sys/"}},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			n := newNode(t, c.scenario)
			before := n.tree(t)
			oc := n.apply(t, c.mode)
			require.Equal(t, c.steps, stepIDs(oc))
			require.NotEqual(t, untouched(before, c.skip...), untouched(n.tree(t), c.skip...), "apply changed nothing")
			res := n.rollback(t, provision.RollbackOptions{})
			require.NotEmpty(t, res.Undone)
			require.Equal(t, untouched(before, c.skip...), untouched(n.tree(t), c.skip...))
			again := n.rollback(t, provision.RollbackOptions{})
			require.Empty(t, again.Undone)
		})
	}
}

// Each step's own undo, on what it changed.
func TestStepUndo(t *testing.T) {
	t.Run("vfio-unbind", func(t *testing.T) {
		n := newNode(t, "vfio-bound")
		n.apply(t, preflight.Container)
		require.NotEqual(t, "vfio-pci", n.k.Driver("0000:11:00.0"))
		n.rollback(t, provision.RollbackOptions{})
		for _, a := range []string{"0000:11:00.0", "0000:21:00.0", "0000:31:00.0", "0000:41:00.0"} {
			require.Equal(t, "vfio-pci", n.k.Driver(a), a)
		}
	})
	t.Run("label", func(t *testing.T) {
		n := newNode(t, "vfio-bound")
		was := n.read(t, "/etc/default/kubelet")
		n.apply(t, preflight.Container)
		require.Contains(t, n.read(t, "/etc/default/kubelet"), "nvidia.com/gpu.workload.config=container")
		// only the label step: rollback --to the step before it
		res := n.rollback(t, provision.RollbackOptions{To: provision.StepVFIOUnbind})
		require.Equal(t, was, n.read(t, "/etc/default/kubelet"))
		require.Len(t, res.Undone, 1)
		require.NotEqual(t, "vfio-pci", n.k.Driver("0000:11:00.0"), "the step before --to stays")
	})
	t.Run("kernel-args", func(t *testing.T) {
		n := newNode(t, "iommu-off-kernel")
		was := n.read(t, "/etc/default/grub")
		n.apply(t, preflight.VMPassthrough)
		require.NotEqual(t, was, n.read(t, "/etc/default/grub"))
		res := n.rollback(t, provision.RollbackOptions{})
		require.Equal(t, was, n.read(t, "/etc/default/grub"))
		// this root has no update-grub to regenerate the menu with
		require.Contains(t, res.Notes, "regenerate the boot menu yourself (no update-grub or grub-mkconfig under the root)")
		require.False(t, res.Reboot, "the running kernel's arguments are those of the restored file")
	})
	t.Run("nouveau", func(t *testing.T) {
		n := newNode(t, "vgpu-fresh-mdev")
		n.apply(t, preflight.Container)
		_, err := os.Stat(filepath.Join(n.dir, "/etc/modprobe.d"))
		require.NoError(t, err)
		res := n.rollback(t, provision.RollbackOptions{})
		var kinds []string
		for _, u := range res.Undone {
			kinds = append(kinds, u.Kind)
		}
		require.Contains(t, kinds, "file")
		require.Contains(t, kinds, "command", "the initramfs regenerated without the blacklist")
		// nouveau is not loaded again: the device it drove is left unbound
		// until the next boot loads it
		require.NotEmpty(t, res.Left)
		require.Equal(t, provision.LeftUntilReboot, res.Left[0].Until)
	})
}

// Every entry rollback undid is recorded undone, with the index of the
// entry, as a versioned record.
func TestRollbackRecordsUndone(t *testing.T) {
	n := newNode(t, "vfio-bound")
	n.apply(t, preflight.Container)
	before, err := journal.Read(n.k.Root)
	require.NoError(t, err)
	n.rollback(t, provision.RollbackOptions{})
	all, err := journal.Read(n.k.Root)
	require.NoError(t, err)
	undone := map[int]bool{}
	for _, en := range all[len(before):] {
		require.Equal(t, journal.KindUndone, en.Kind)
		u, ok := en.Undone()
		require.True(t, ok)
		require.Equal(t, before[u.Index].Kind, u.Kind)
		undone[u.Index] = true
	}
	require.Len(t, undone, len(before))
	// each line a versioned record
	for _, l := range strings.Split(strings.TrimSpace(n.read(t, journal.Path)), "\n") {
		require.True(t, strings.HasPrefix(l, `{"v":1,"time":`), l)
	}
}
