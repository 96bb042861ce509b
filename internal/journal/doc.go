// Package journal records every change gpuprep makes to a host, so that it
// can be shown, undone (gpuprep vfio unbind, grub undo, rollback) and resumed.
// Entries are JSON lines appended to /var/lib/gpuprep/journal.jsonl inside the
// host root, each with one write(2) and an fsync, so a crash leaves at most
// one torn last line, which Read skips and reports.
//
// # Records
//
// Each line is one record: its version ("v", Version; none in journals of
// a gpuprep from before records had one, which read the same) and one
// Entry. kinds.go names every kind and, where Device, Path, Before and
// After mean something else than their names say, a payload type
// (FileRecord, DirRecord, StepRecord, LabelRecord, DriverRecord,
// BootArgsRecord, UndoneRecord, VGPURecord, VGPUModeRecord,
// VGPUManagerRecord, CommandRecord) to write and read them by. How each kind is undone is registered by
// provision's Rollback (its undoKinds).
//
// # Order of record
//
// Every change to a host is made in this order, by every writer:
//
//  1. the intent: an entry that says what is about to change and what to
//     restore (a file-intent with the backup about to be made and the hash
//     of what it saves; a dir before a mkdir; a driver-intent with the
//     device's driver now and the one it goes to; a vgpu-intent naming the
//     mdev's UUID or the VF; a label entry with the labels the node has; a
//     bootargs-intent per argument a bootloader's tool changes; a
//     vgpu-mode before a GPU's mode is turned on; a command-intent before
//     a command whose change rollback leaves in place, such as the vGPU
//     manager's installer; a vgpu-manager-intent before a version change
//     of the vGPU manager, naming its upgrade record and the kept
//     installer of the version before), appended with Append, which
//     returns only once it is fsync'd;
//  2. the change (a file written, a sysfs attribute, a command, a PATCH);
//  3. the done entry (file, driver, vgpu, vgpu-manager), appended once the
//     change is made, where there is one.
//
// A process killed at any instant then leaves either nothing of the change
// or an intent for it. Rollback treats an intent without its done entry as
// a change that may or may not have happened and restores from the state it
// finds, so that both cases end right: it restores a device to the driver
// the oldest entry names only when the device is not on it already (a
// driver never changed is a no-op), removes a vGPU an intent names only
// when it exists, restores a file only from a backup whose hash is the one
// its intent announced (a torn or missing backup of a change that did not
// happen is passed over: the file still holds that content) and leaves a
// file as it is when it already holds its content from before gpuprep.
// What rollback itself changes it records only after ("undone" entries):
// its changes go back to what the journal already names, so a rollback
// killed half-way is finished by running it again.
package journal
