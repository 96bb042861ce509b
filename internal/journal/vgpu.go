package journal

import "time"

// VGPURecord is a KindVGPUIntent or KindVGPU entry: a write of Value
// (After) to the sysfs attribute Attr (Path) of GPU (Device) that creates
// a vGPU (…/mdev_supported_types/TYPE/create with the new mdev's UUID, a
// VF's …/nvidia/current_vgpu_type with a type id) or removes one
// (…/UUID/remove, or 0 to a VF's current_vgpu_type). Before, on an intent
// only: a VF's current_vgpu_type just before the write, or the type of
// the vGPU a removal takes away.
type VGPURecord struct {
	Attr, GPU, Value, Before string
}

// VGPU is en's vGPU payload.
func (en Entry) VGPU() VGPURecord {
	return VGPURecord{Attr: en.Path, GPU: en.Device, Value: en.After, Before: en.Before}
}

// Intent is r as the KindVGPUIntent entry command appends before the write.
func (r VGPURecord) Intent(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindVGPUIntent, Path: r.Attr, Device: r.GPU, Before: r.Before, After: r.Value}
}

// Done is r as the KindVGPU entry command appends once the write is made
// (Before is not recorded there).
func (r VGPURecord) Done(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindVGPU, Path: r.Attr, Device: r.GPU, After: r.Value}
}

// VGPUModeRecord is a KindVGPUMode entry: GPU (Device), whose
// heterogeneous vGPU mode read Mode (Before) just before it is turned on
// (After, always "Enabled").
type VGPUModeRecord struct {
	GPU, Mode string
}

// VGPUMode is en's vGPU mode payload.
func (en Entry) VGPUMode() VGPUModeRecord {
	return VGPUModeRecord{GPU: en.Device, Mode: en.Before}
}

// Entry is r as the entry command appends before it turns the mode on.
func (r VGPUModeRecord) Entry(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindVGPUMode, Device: r.GPU, Before: r.Mode, After: "Enabled"}
}

// VGPUManagerRecord is a KindVGPUManagerIntent or KindVGPUManager entry: a
// change of the vGPU manager from version From (Before) to To (After),
// its upgrade record (the previous installer kept, the vGPUs to make
// again) at Record (Path).
type VGPUManagerRecord struct {
	From, To, Record string
}

// VGPUManager is en's vGPU manager payload.
func (en Entry) VGPUManager() VGPUManagerRecord {
	return VGPUManagerRecord{From: en.Before, To: en.After, Record: en.Path}
}

// Intent is r as the KindVGPUManagerIntent entry command appends before
// the first change.
func (r VGPUManagerRecord) Intent(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindVGPUManagerIntent, Before: r.From, After: r.To, Path: r.Record}
}

// Done is r as the KindVGPUManager entry command appends once the change
// is verified.
func (r VGPUManagerRecord) Done(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindVGPUManager, Before: r.From, After: r.To, Path: r.Record}
}
