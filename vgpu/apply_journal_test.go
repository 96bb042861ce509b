package vgpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/journal"
)

// recorder keeps what ApplyJournalled records, each entry with what the
// vGPU it names looked like at that moment.
type recorder struct {
	s       *sim
	entries []journal.Entry
	seen    []string
	fail    string // a kind whose recording fails
}

func (r *recorder) record(e journal.Entry) error {
	if e.Kind == r.fail {
		return errors.New("journal: no space left on device")
	}
	r.entries = append(r.entries, e)
	state := ""
	if strings.HasSuffix(e.Path, "/create") {
		state = fmt.Sprint("mdev exists: ", r.s.root.Exists("/sys/bus/mdev/devices/"+e.After))
	} else {
		cur, _ := r.s.root.ReadString(e.Path)
		state = "VF at " + cur
	}
	r.seen = append(r.seen, e.Kind+" "+e.After+": "+state)
	return nil
}

func TestApplyJournalledRecordsEachMdevBeforeCreatingIt(t *testing.T) {
	s := newSim(t, "mdev-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:21:00.0", "T4-4Q", 2}})
	require.NoError(t, err)
	r := &recorder{s: s}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	done, err := ApplyJournalled(s.root, s, p, now, "vgpu apply", r.record)
	require.NoError(t, err)
	require.Len(t, done, 2)
	u1, u2 := done[0].Value, done[1].Value
	require.NotEqual(t, u1, u2)
	require.Equal(t, []string{
		"vgpu-intent " + u1 + ": mdev exists: false",
		"vgpu " + u1 + ": mdev exists: true",
		"vgpu-intent " + u2 + ": mdev exists: false",
		"vgpu " + u2 + ": mdev exists: true",
	}, r.seen, "each UUID recorded before its write, and the write after")
	create := "/sys/bus/pci/devices/0000:21:00.0/mdev_supported_types/nvidia-224/create"
	require.Equal(t, journal.Entry{Time: now, Command: "vgpu apply", Kind: KindIntent, Path: create, Device: "0000:21:00.0", After: u1}, r.entries[0])
	require.Equal(t, journal.Entry{Time: now, Command: "vgpu apply", Kind: KindWrite, Path: create, Device: "0000:21:00.0", After: u1}, r.entries[1])
	require.Equal(t, []string{create + "=" + u1, create + "=" + u2}, s.writes)
}

// A VF's intent holds what it had just before the write: after --prune's
// removal of its old type in the same run, 0.
func TestApplyJournalledRecordsAVFsValueBeforeTheWrite(t *testing.T) {
	s := newSim(t, "sriov-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:41:00.0", "H200X-70C", 1}})
	require.NoError(t, err)
	_, err = Apply(s.root, s, p)
	require.NoError(t, err)
	vf := "/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type"
	cur, _ := s.root.ReadString(vf)
	require.Equal(t, "1429", cur)

	p, err = MakePlanWith(s.root, []Want{{"0000:41:00.0", "H200X-35C", 2}}, PlanOptions{Prune: true})
	require.NoError(t, err)
	require.Len(t, p.Removals, 1)
	r := &recorder{s: s}
	_, err = ApplyJournalled(s.root, s, p, time.Now(), "vgpu apply", r.record)
	require.NoError(t, err)
	require.Equal(t, []string{
		"vgpu-intent 0: VF at 1429", // the removal's intent, before it
		"vgpu 0: VF at 0",           // and once made
		"vgpu-intent 1430: VF at 0",
		"vgpu 1430: VF at 1430",
		"vgpu-intent 1430: VF at 0",
		"vgpu 1430: VF at 1430",
	}, r.seen)
	require.Equal(t, journal.Entry{Time: r.entries[0].Time, Command: "vgpu apply", Kind: KindIntent, Path: vf, Device: "0000:41:00.0", Before: "NVIDIA H200X-70C", After: "0"}, r.entries[0])
	require.Equal(t, vf, r.entries[2].Path)
	require.Equal(t, "0", r.entries[2].Before, "the VF's value when it was written, not the pruned type")
	require.Equal(t, "/sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type", r.entries[4].Path)
	require.Equal(t, "0", r.entries[4].Before)
	require.Empty(t, r.entries[3].Before, "the write's entry is as before")
}

// Without its intent in the journal, nothing is created.
func TestApplyJournalledWritesNothingItCannotRecord(t *testing.T) {
	s := newSim(t, "mdev-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:21:00.0", "T4-4Q", 1}})
	require.NoError(t, err)
	r := &recorder{s: s, fail: KindIntent}
	done, err := ApplyJournalled(s.root, s, p, time.Now(), "vgpu apply", r.record)
	require.ErrorContains(t, err, "no space left on device")
	require.Empty(t, done)
	require.Empty(t, s.writes)
	require.Empty(t, Existing(s.root, "0000:21:00.0"))

	// a write whose record fails stops the run there
	p, err = MakePlan(s.root, []Want{{"0000:21:00.0", "T4-4Q", 2}})
	require.NoError(t, err)
	r = &recorder{s: s, fail: KindWrite}
	done, err = ApplyJournalled(s.root, s, p, time.Now(), "vgpu apply", r.record)
	require.ErrorContains(t, err, "no space left on device")
	require.Len(t, done, 1)
	require.Len(t, s.writes, 1)
	require.Len(t, r.entries, 1)
	require.Equal(t, KindIntent, r.entries[0].Kind)
	require.Equal(t, done[0].Value, r.entries[0].After)
}
