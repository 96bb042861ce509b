package vgpu

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/journal"
)

// killedAfterWrite makes each write and then dies, as a process killed
// between a sysfs write and its journal entry after: what it saw in the
// journal on disk at the write is kept.
type killedAfterWrite struct {
	s       *sim
	atWrite []journal.Entry
}

var errKilled = errors.New("killed")

func (k *killedAfterWrite) WriteAttr(p, v string) error {
	k.atWrite, _ = journal.Read(k.s.root)
	if err := k.s.WriteAttr(p, v); err != nil {
		return err
	}
	return errKilled
}

// gpuprep vgpu apply's change journals in the host's journal itself: the
// type names file (intent and done) and the VF's intent are on disk before
// the VF is written, so a process killed right after that write leaves
// rollback the VF, with the value it had, and the file to restore.
func TestApplyRecordedJournalsBeforeEachWrite(t *testing.T) {
	s := newSim(t, "sriov-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:41:00.0", "H200X-70C", 1}})
	require.NoError(t, err)
	k := &killedAfterWrite{s: s}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	_, err = ApplyRecorded(s.root, k, p, now, "vgpu apply")
	require.ErrorIs(t, err, errKilled)
	vf := "/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type"
	cur, _ := s.root.ReadString(vf)
	require.Equal(t, "1429", cur, "the write was made")
	var kinds []string
	for _, en := range k.atWrite {
		kinds = append(kinds, en.Kind+" "+en.Path)
	}
	require.Equal(t, []string{"file-intent " + TypeNames, "file " + TypeNames, "vgpu-intent " + vf}, kinds)
	require.Equal(t, journal.VGPURecord{Attr: vf, GPU: "0000:41:00.0", Value: "1429", Before: "0"}, k.atWrite[2].VGPU())
	on, err := journal.Read(s.root)
	require.NoError(t, err)
	require.Equal(t, k.atWrite, on, "nothing after the killed write")
}
