package journal

import "time"

// The kinds of driver entries: an intent before a device's driver is
// changed (Device; Before, its driver now, "" unbound; After, the driver it
// is to end on), and the change after it (the same fields, as it came
// out). Rollback puts the device back on the Before of its oldest entry.
const (
	KindDriver       = "driver"
	KindDriverIntent = "driver-intent"
)

// DriverIntent is the entry command appends before it moves device from
// driver before to after.
func DriverIntent(command, device, before, after string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindDriverIntent, Device: device, Before: before, After: after}
}

// DriverDone is the entry command appends once device went from before to
// after.
func DriverDone(command, device, before, after string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindDriver, Device: device, Before: before, After: after}
}
