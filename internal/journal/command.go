package journal

import "time"

// KindCommandIntent is the entry written before a command whose change
// rollback does not undo (gpuprep vgpu install's installer, sriov-manage,
// systemctl): After says what it does. A kill while it runs still leaves a
// record that it may have run: rollback says what it leaves in place (the
// vGPU manager stays installed) instead of finding nothing to say.
const KindCommandIntent = "command-intent"

// CommandRecord is a KindCommandIntent entry: What (After) is about to
// run. Once it ran, a KindStep entry with What as its State (After, no
// step ID) says so, as gpuprep vgpu install has always written it.
type CommandRecord struct {
	What string
}

// Ran is en's command payload.
func (en Entry) Ran() CommandRecord { return CommandRecord{What: en.After} }

// Intent is r as the KindCommandIntent entry command appends before it runs.
func (r CommandRecord) Intent(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindCommandIntent, After: r.What}
}

// Ran is the KindStep entry command appends once r ran.
func (r CommandRecord) Ran(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindStep, After: r.What}
}
