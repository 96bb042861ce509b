package journal

import (
	"strconv"
	"time"
)

// Version is the version of the records Append writes ("v" on each line).
// Records without one were written by a gpuprep from before records had a
// version: their fields mean what they mean in version 1, so both read the
// same (provision/testdata/main-journal-*.jsonl holds such journals, and a
// test rolls them back).
const Version = 1

// The kinds of entry, each with the payload type that says what its
// fields hold (the record keeps one flat set of fields, as every version
// did: a journal from an older gpuprep reads the same).
const (
	// KindStep: a workflow step started or done (StepRecord).
	KindStep = "step"
	// KindLabel: the labels of a Node before a change (LabelRecord).
	KindLabel = "label"
	// KindUndone: rollback undid an entry (UndoneRecord).
	KindUndone = "undone"
	// KindBootArgs: one argument a bootloader's own tool is about to add
	// or remove (BootArgsRecord).
	KindBootArgs = "bootargs-intent"
	// KindVGPU and KindVGPUIntent: a vGPU created (an mdev's UUID in
	// Path's directory, or a VF's current_vgpu_type): vgpu.Apply's entries.
	KindVGPU       = "vgpu"
	KindVGPUIntent = "vgpu-intent"
	// KindVGPUMode: a GPU's heterogeneous vGPU mode about to be turned on.
	KindVGPUMode = "vgpu-mode"
	// KindVGPUManagerIntent and KindVGPUManager: a version change of the
	// vGPU manager (Path, its upgrade record).
	KindVGPUManagerIntent = "vgpu-manager-intent"
	KindVGPUManager       = "vgpu-manager"
)

// Kinds lists every kind this version writes.
var Kinds = []string{KindStep, KindFileIntent, KindFile, KindDir, KindDriverIntent, KindDriver, KindLabel, KindUndone,
	KindBootArgs, KindCommandIntent, KindVGPUIntent, KindVGPU, KindVGPUMode, KindVGPUManagerIntent, KindVGPUManager}

// StepRecord is a KindStep entry: step ID (Before) started or done
// (After); for the reboot step, BootID (Device), the boot that asked, and
// Reason (Path), why.
type StepRecord struct {
	ID, State, BootID, Reason string
}

// Step states.
const (
	StepStarted = "started"
	StepDone    = "done"
)

// Step is en's step payload.
func (en Entry) Step() StepRecord {
	return StepRecord{ID: en.Before, State: en.After, BootID: en.Device, Reason: en.Path}
}

// Entry is r as a journal entry of command at now (zero: Append's caller
// stamps it).
func (r StepRecord) Entry(command string, now time.Time) Entry {
	return Entry{Time: now, Command: command, Kind: KindStep, Before: r.ID, After: r.State, Device: r.BootID, Path: r.Reason}
}

// LabelRecord is a KindLabel entry: Node (Device), the kubeconfig its
// labels were changed through (Path, "" for the kubelet's file), its
// labels before ("k=v,…", Before) and the keys changed ("k,…", After).
type LabelRecord struct {
	Node, Kubeconfig, Before, Keys string
}

// Label is en's label payload.
func (en Entry) Label() LabelRecord {
	return LabelRecord{Node: en.Device, Kubeconfig: en.Path, Before: en.Before, Keys: en.After}
}

// Entry is r as a journal entry of command at now.
func (r LabelRecord) Entry(command string, now time.Time) Entry {
	return Entry{Time: now, Command: command, Kind: KindLabel, Device: r.Node, Path: r.Kubeconfig, Before: r.Before, After: r.Keys}
}

// BootArgsRecord is a KindBootArgs entry: Loader (Device, a grub.Kind*)
// is about to get argument Add (After) or lose Remove (Before); Kept
// (Path), the boot entries already as the change leaves them for that
// argument, space-separated.
type BootArgsRecord struct {
	Loader, Add, Remove, Kept string
}

// BootArgs is en's bootargs payload.
func (en Entry) BootArgs() BootArgsRecord {
	return BootArgsRecord{Loader: en.Device, Add: en.After, Remove: en.Before, Kept: en.Path}
}

// Entry is r as a journal entry of command at now.
func (r BootArgsRecord) Entry(command string, now time.Time) Entry {
	return Entry{Time: now, Command: command, Kind: KindBootArgs, Device: r.Loader, After: r.Add, Before: r.Remove, Path: r.Kept}
}

// UndoneRecord is a KindUndone entry: rollback undid entry Index (in Read
// order, Before), of kind Kind (After) on Path or Device; Saved (Backup),
// where it saved what a file it overwrote or removed held.
type UndoneRecord struct {
	Index              int
	Kind, Path, Device string
	Saved              string
}

// Undone is en's undone payload; ok is false when its index is unreadable.
func (en Entry) Undone() (r UndoneRecord, ok bool) {
	i, err := strconv.Atoi(en.Before)
	return UndoneRecord{Index: i, Kind: en.After, Path: en.Path, Device: en.Device, Saved: en.Backup}, err == nil
}

// UndoneOf is the record that rollback undid en, entry i in Read order:
// its kind and what it was on, read through en's own payload type (Saved
// is the caller's to set). A kind this version does not know keeps its
// Path and Device as they are.
func UndoneOf(i int, en Entry) UndoneRecord {
	u := UndoneRecord{Index: i, Kind: en.Kind}
	switch en.Kind {
	case KindFile, KindFileIntent:
		u.Path = en.File().Path
	case KindDir:
		u.Path = en.Dir().Path
	case KindDriver, KindDriverIntent:
		u.Device = en.Driver().Device
	case KindLabel:
		l := en.Label()
		u.Path, u.Device = l.Kubeconfig, l.Node
	case KindBootArgs:
		b := en.BootArgs()
		u.Path, u.Device = b.Kept, b.Loader
	case KindVGPU, KindVGPUIntent:
		v := en.VGPU()
		u.Path, u.Device = v.Attr, v.GPU
	case KindVGPUMode:
		u.Device = en.VGPUMode().GPU
	case KindVGPUManager, KindVGPUManagerIntent:
		u.Path = en.VGPUManager().Record
	case KindStep:
		st := en.Step()
		u.Path, u.Device = st.Reason, st.BootID
	default: // KindCommandIntent (its record holds neither), or a kind unknown here

		u.Path, u.Device = en.Path, en.Device
	}
	return u
}

// Entry is r as a journal entry of command at now.
func (r UndoneRecord) Entry(command string, now time.Time) Entry {
	return Entry{Time: now, Command: command, Kind: KindUndone, Before: strconv.Itoa(r.Index), After: r.Kind, Path: r.Path, Device: r.Device, Backup: r.Saved}
}
