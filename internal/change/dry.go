package change

import (
	"fmt"
	"io"
	"strings"
)

// Dry renders what a change would do without doing it, for gpuprep plan and
// every --dry-run: the command and the step hand it what they would run,
// write to sysfs or change in a file, and Dry writes it (k0sctl's DryMsg:
// the step says what it would do, one renderer shows it). Each line starts
// with Indent; a command with Run ("run: ", "would run: ", "$ ").
type Dry struct {
	W      io.Writer
	Indent string
	Run    string
	// Wrap, when set, writes text after lead, its further lines indented
	// by indent columns (plan: report.Hanging at the terminal's width);
	// nil: each on one line. Diffs and contents are never wrapped: they are
	// the file's own lines.
	Wrap func(w io.Writer, lead, text string, indent int)
}

// hanging writes s after Indent and label; wrapped lines hang under the
// label's end, or hang columns in for an unlabelled line.
func (d Dry) hanging(label, s string, hang int) {
	if d.Wrap == nil {
		fmt.Fprintln(d.W, d.Indent+label+s)
		return
	}
	d.Wrap(d.W, d.Indent+label, s, len(d.Indent)+len(label)+hang)
}

// Line writes s as one line (wrapped: its further lines two columns in).
func (d Dry) Line(s string) { d.hanging("", s, 2) }

// Labelled writes s after label ("error: ", "note: "), wrapped under it.
func (d Dry) Labelled(label, s string) { d.hanging(label, s, 0) }

// Command writes the command cmd (as a shell would show it: see
// host.ShellQuote) after Run.
func (d Dry) Command(cmd string) { d.hanging(d.Run, cmd, 0) }

// Sysfs writes the sysfs write of value to path (SysfsWrite).
func (d Dry) Sysfs(path, value string) { d.Line(SysfsWrite(path, value)) }

// Diff writes f's unified diff, each of its lines after Indent; nothing for
// a file that does not change.
func (d Dry) Diff(f File) {
	if f.Diff == "" {
		return
	}
	for _, l := range strings.SplitAfter(strings.TrimSuffix(f.Diff, "\n"), "\n") {
		fmt.Fprint(d.W, d.Indent+l)
	}
	fmt.Fprintln(d.W)
}

// Content writes data, a file's content, each of its lines after Indent.
func (d Dry) Content(data []byte) {
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		d.Line(l)
	}
}

// SysfsWrite is how a plan shows a write of value to the sysfs attribute
// path: `write "VALUE" > PATH` (a newline shows as "\n", as echo > PATH
// writes it).
func SysfsWrite(path, value string) string { return fmt.Sprintf("write %q > %s", value, path) }
