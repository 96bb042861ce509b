// Package effect holds Effector, the one thing every change to a host goes
// through: the root its files are read and written under (and its journal
// kept in), the sysfs attribute writer, the command runner, the clock and
// where progress goes. vfio, vgpu and provision take an Effector; the CLI
// builds it from its deps, tests from the fixture kernel simulator.
//
// As go-nvlib's packages do, each part is a small interface or a function
// with a default, so that a test replaces only the part it watches.
package effect

import (
	"fmt"
	"io"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// AttrWriter writes one sysfs attribute (host.Root on a live host; the
// fixture's kernel simulator in tests).
type AttrWriter interface {
	WriteAttr(p, value string) error
}

// Effector is what a change to a host is made through.
type Effector struct {
	// Root is where every file is read and written, and where the
	// journal is (journal.Path under it).
	Root *host.Root
	// Sysfs writes sysfs attributes (bind, unbind, driver_override,
	// sriov_numvfs, vGPU create/remove); nil: Root, the live host's sysfs.
	Sysfs AttrWriter
	// Runner runs commands (argv) on the host.
	Runner host.Runner
	// Query runs the read-only queries of a file on the machine that holds
	// it (dpkg-deb -f/-c, rpm -qp/-qlp of a vGPU manager package), also for
	// a --dry-run against another root; nil: Runner.
	Query host.Runner
	// Clock is the time changes and journal entries are stamped with; nil:
	// time.Now.
	Clock func() time.Time
	// Pause waits between retries (sriov-manage); nil: time.Sleep.
	Pause func(time.Duration)
	// Out receives progress, one line per action; nil: none.
	Out io.Writer
}

// Now is the effector's clock.
func (e Effector) Now() time.Time {
	if e.Clock != nil {
		return e.Clock()
	}
	return time.Now()
}

// At is e with its clock stopped at t: a step whose writes share one
// timestamp (their backups' names, their journal entries).
func (e Effector) At(t time.Time) Effector {
	e.Clock = func() time.Time { return t }
	return e
}

// Sleep waits d through Pause.
func (e Effector) Sleep(d time.Duration) {
	if e.Pause != nil {
		e.Pause(d)
		return
	}
	time.Sleep(d)
}

// Attrs is the sysfs attribute writer.
func (e Effector) Attrs() AttrWriter {
	if e.Sysfs != nil {
		return e.Sysfs
	}
	return e.Root
}

// Queries is the runner of read-only queries.
func (e Effector) Queries() host.Runner {
	if e.Query != nil {
		return e.Query
	}
	return e.Runner
}

// Logf writes one line of progress to Out.
func (e Effector) Logf(format string, a ...any) {
	if e.Out != nil {
		fmt.Fprintf(e.Out, format+"\n", a...)
	}
}

// Record appends en to the root's journal, stamped now (UTC) when it has
// no time of its own.
func (e Effector) Record(en journal.Entry) error {
	if en.Time.IsZero() {
		en.Time = e.Now().UTC()
	}
	return journal.Append(e.Root, en)
}
