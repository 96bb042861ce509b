package vfio

import (
	"slices"

	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// DriverBefore returns the driver the journal recorded for addr before the
// bind that put it on VFIO; known is false when no bind is recorded, or one
// was undone since (an unbind, or a bind rolled back, recorded done). A
// bind's intent counts as the bind (killed after it, the device may be on
// VFIO, or unbound on the way there); an unbind's intent, whose change may
// not have happened, leaves what was known. Of binds one after another
// (the first killed half-way, the next finishing it from an unbound
// device) the first says what the device had.
func DriverBefore(entries []journal.Entry, addr string) (before string, known bool) {
	for _, en := range entries {
		d := en.Driver()
		if !isDriverEntry(en) || d.Device != addr {
			continue
		}
		switch {
		case pci.DriverIsVFIO(d.After):
			if !known {
				before, known = d.Before, true
			}
		case en.Kind == journal.KindDriver:
			before, known = d.Before, false
		}
	}
	return before, known
}

// unbindPending reports whether the journal's last driver record of addr
// is an unbind's intent (off VFIO) that no record of it done followed: a
// process killed in between may have left the device unbound with its
// driver_override cleared, which only the journal still tells apart.
func unbindPending(entries []journal.Entry, addr string) bool {
	pending := false
	for _, en := range entries {
		d := en.Driver()
		if !isDriverEntry(en) || d.Device != addr {
			continue
		}
		pending = en.Kind == journal.KindDriverIntent && pci.DriverIsVFIO(d.Before) && !pci.DriverIsVFIO(d.After)
	}
	return pending
}

// isDriverEntry reports whether en records a driver change (DriverRecord).
func isDriverEntry(en journal.Entry) bool {
	return en.Kind == journal.KindDriver || en.Kind == journal.KindDriverIntent
}

// restoreTo is the driver Unbind means to give a device back: the one it
// had before bind, when the journal knows it and it is wanted back.
func restoreTo(before string, known bool, noRestore []string) string {
	if !known || slices.Contains(noRestore, before) {
		return ""
	}
	return before
}
