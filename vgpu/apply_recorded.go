package vgpu

import (
	"fmt"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// ApplyRecorded is the change gpuprep vgpu apply makes, journalled in
// root's journal under command: the names of the types p writes to VFs
// first (TypeNames, a journalled file: an intent, the write with its
// backup, a file entry, so that rollback restores it with the vGPUs), then
// every vGPU write as ApplyJournalled records it. It returns the writes
// made, as ApplyJournalled.
func ApplyRecorded(root *host.Root, w AttrWriter, p *Plan, now time.Time, command string) ([]Action, error) {
	if names, ok := TypeNamesFile(root, p); ok {
		if _, err := journal.WriteFile(root, TypeNames, names, 0o644, command, now.UTC()); err != nil {
			return nil, fmt.Errorf("recording the names of vGPU types: write %s: %w", TypeNames, err)
		}
	}
	return ApplyJournalled(root, w, p, now, command, func(en journal.Entry) error { return journal.Append(root, en) })
}
