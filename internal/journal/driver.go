package journal

import "time"

// The kinds of driver entries: an intent before a device's driver is
// changed, and the change after it (DriverRecord, the same fields, as it
// came out). Rollback puts the device back on the Before of its oldest
// entry.
const (
	KindDriver       = "driver"
	KindDriverIntent = "driver-intent"
)

// DriverRecord is a KindDriverIntent or KindDriver entry: the PCI function
// Device (Device) from driver Before (Before, "" unbound) to After (After,
// the driver it is to end on; on a KindDriver entry, the one it ended on).
type DriverRecord struct {
	Device, Before, After string
}

// Driver is en's driver payload.
func (en Entry) Driver() DriverRecord {
	return DriverRecord{Device: en.Device, Before: en.Before, After: en.After}
}

// Intent is r as the KindDriverIntent entry command appends before it
// moves the device.
func (r DriverRecord) Intent(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindDriverIntent, Device: r.Device, Before: r.Before, After: r.After}
}

// Done is r as the KindDriver entry command appends once the device went
// from Before to After.
func (r DriverRecord) Done(command string, now time.Time) Entry {
	return Entry{Time: now.UTC(), Command: command, Kind: KindDriver, Device: r.Device, Before: r.Before, After: r.After}
}
