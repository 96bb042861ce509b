package report

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/preflight"
)

// JUnit XML (the de-facto schema CI systems read: testsuites > testsuite >
// testcase with failure/error/skipped): a testsuite per host, a testcase
// per finding. fail findings are failures, error findings errors, skip
// findings skipped; a host that could not be evaluated is one testcase
// with an error naming its status. A finding made for some modes only
// (one per mode, say, as vfio.binding is without --mode) has its modes in
// its name ("vfio.binding 0000:13:00.0 [vm-passthrough]"), so each
// (check, subject, modes) is one testcase, named the same in reports made
// with and without --mode; any name still repeated gets " (2)", " (3)", ….
//
// fleet apply adds a "gpuprep apply" testcase per host before its findings:
// ready passes; failed, rolled-back and rollback-failed are failures (type
// the outcome); cancelled is an error; a host never started (skipped) and a
// host that needs a reboot are skipped, with a message: a reboot-needed
// host is not a failure (apply stopped at its reboot step, as it should;
// fleet apply exits 4 for it), and its readiness is not known until it
// has rebooted and apply ran again. fleet run has a testcase per host for
// the command, judged by gpuprep's exit code there (RunOutcome): 0 passes,
// 4 (reboot-needed) is skipped, 3 and 130 are errors, others failures.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// FleetJUnit writes the fleet report as JUnit XML, host by host: a first
// pass over the hosts counts the totals the root element carries, a second
// writes each host's testsuite.
func FleetJUnit(w io.Writer, f *FleetReport) error {
	root := junitSuites{Name: f.title()}
	if err := f.eachHost(func(_ int, h *FleetHost) error {
		s := hostSuite(f, h)
		root.Tests += s.Tests
		root.Failures += s.Failures
		root.Errors += s.Errors
		root.Skipped += s.Skipped
		return nil
	}); err != nil {
		return err
	}
	b := bufio.NewWriterSize(w, 64<<10)
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(b)
	enc.Indent("", "  ")
	start := xml.StartElement{Name: xml.Name{Local: "testsuites"}, Attr: []xml.Attr{
		{Name: xml.Name{Local: "name"}, Value: root.Name},
		{Name: xml.Name{Local: "tests"}, Value: strconv.Itoa(root.Tests)},
		{Name: xml.Name{Local: "failures"}, Value: strconv.Itoa(root.Failures)},
		{Name: xml.Name{Local: "errors"}, Value: strconv.Itoa(root.Errors)},
		{Name: xml.Name{Local: "skipped"}, Value: strconv.Itoa(root.Skipped)},
	}}
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	suite := xml.StartElement{Name: xml.Name{Local: "testsuite"}}
	if err := f.eachHost(func(_ int, h *FleetHost) error { return enc.EncodeElement(hostSuite(f, h), suite) }); err != nil {
		return err
	}
	if err := enc.EncodeToken(start.End()); err != nil {
		return err
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	return b.Flush()
}

// hostSuite is a host's testsuite: its properties, then a testcase for
// what fleet apply or fleet run did there (or why gpuprep did not run),
// then one per finding.
func hostSuite(f *FleetReport, hp *FleetHost) junitSuite {
	h := *hp
	s := junitSuite{Name: h.Name, Hostname: h.Address, Time: seconds(h.DurationMs), Properties: hostProperties(&h)}
	class := "gpuprep." + h.Name
	names := map[string]int{}
	if c, ok := hostRunCase(f, &h, class); ok {
		s.add(names, c)
	}
	if h.Report != nil {
		for _, fd := range h.Report.Findings {
			s.add(names, findingCase(h.Report, fd, class))
		}
	}
	s.Tests = len(s.Cases)
	return s
}

// hostProperties are a host's status, then those of its verdict, skipped
// checks, mode, phase, outcome, reboot and rollback that it has.
func hostProperties(h *FleetHost) []junitProperty {
	skipped := ""
	if h.Report != nil {
		skipped = strings.Join(Skipped(h.Report), ",")
	}
	ps := []junitProperty{{"status", h.Status}}
	for _, p := range []junitProperty{{"verdict", h.Verdict}, {"skipped", skipped}, {"mode", h.Mode}, {"phase", h.Phase},
		{"outcome", h.Outcome}, {"reboot", h.RebootNote()}, {"rollback", h.RollbackNote()}} {
		if p.Value != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// hostRunCase is the testcase for what fleet apply or fleet run did on h,
// or for why gpuprep did not run there; false when there is none (a fleet
// check's host that was evaluated).
func hostRunCase(f *FleetReport, h *FleetHost, class string) (junitCase, bool) {
	switch {
	case f.Rollout != nil:
		return applyCase(*h, class), true
	case len(f.Command) > 0 && h.Status == "evaluated":
		return runCase(f, *h, class), true
	case h.Report == nil:
		return junitCase{Name: "connect and run gpuprep", Classname: class, Time: seconds(h.DurationMs),
			Error: &junitProblem{Message: h.Error, Type: h.Status, Text: h.Error}}, true
	}
	return junitCase{}, false
}

// add adds testcase c, counted by its result; a name the suite has already
// is numbered ("NAME (2)"), names counting each name so far.
func (s *junitSuite) add(names map[string]int, c junitCase) {
	names[c.Name]++
	if n := names[c.Name]; n > 1 {
		c.Name = fmt.Sprintf("%s (%d)", c.Name, n)
	}
	switch {
	case c.Failure != nil:
		s.Failures++
	case c.Error != nil:
		s.Errors++
	case c.Skipped != nil:
		s.Skipped++
	}
	s.Cases = append(s.Cases, c)
}

// findingCase is a finding's testcase: named check, subject and, when
// the finding is for some modes only, those modes.
func findingCase(r *Report, fd preflight.Finding, class string) junitCase {
	c := junitCase{Name: fd.Check, Classname: class, Time: "0", SystemOut: fd.Message}
	if fd.Subject != "" {
		c.Name += " " + fd.Subject
	}
	if len(fd.Modes) > 0 && len(fd.Modes) < len(preflight.Modes) {
		ms := make([]string, len(fd.Modes))
		for i, m := range fd.Modes {
			ms[i] = string(m)
		}
		c.Name += " [" + strings.Join(ms, ",") + "]"
	}
	text := fd.Message
	if fd.Remedy != "" {
		text += "\nremedy: " + fd.Remedy
	}
	counts := Counts(r, fd)
	switch {
	case fd.Status == preflight.Fail && counts:
		c.Failure = &junitProblem{Message: fd.Message, Type: "fail", Text: text}
	case fd.Status == preflight.Error && counts:
		c.Error = &junitProblem{Message: fd.Message, Type: "error", Text: text}
	case fd.Status == preflight.Skip:
		c.Skipped = &junitProblem{Message: fd.Message}
	}
	return c
}

// applyCase is fleet apply's testcase for a host, by its outcome.
func applyCase(h FleetHost, class string) junitCase {
	c := junitCase{Name: "gpuprep apply", Classname: class, Time: seconds(h.DurationMs), SystemOut: h.Stdout}
	msg := h.Error
	if h.Status != "evaluated" && h.Status != OutcomeSkipped && msg != "" {
		msg = h.Status + ": " + msg
	}
	text := joinNotes(joinNotes(msg, h.RebootNote()), h.RollbackNote())
	if h.Stderr != "" {
		text = joinNotes(text, "stderr: "+h.Stderr)
	}
	switch h.Outcome {
	case OutcomeReady:
	case OutcomeRebootNeeded:
		m := "reboot needed: apply stopped at its reboot step; reboot the host and run fleet apply again"
		if msg != "" {
			m += " (" + firstLine(msg, 200) + ")"
		}
		c.Skipped = &junitProblem{Message: m}
	case OutcomeSkipped:
		m := msg
		if m == "" {
			m = "not started: the rollout stopped first"
		}
		c.Skipped = &junitProblem{Message: m}
	case OutcomeCancelled:
		if msg == "" {
			msg = "interrupted"
		}
		c.Error = &junitProblem{Message: firstLine(msg, 200), Type: OutcomeCancelled, Text: text}
	default: // failed, rolled-back, rollback-failed
		if msg == "" {
			msg = h.Outcome
		}
		c.Failure = &junitProblem{Message: firstLine(msg, 200), Type: h.Outcome, Text: text}
	}
	return c
}

// runCase is fleet run's testcase for a host where the command ran, by
// gpuprep's exit code there.
func runCase(f *FleetReport, h FleetHost, class string) junitCase {
	c := junitCase{Name: strings.Join(f.Command, " "), Classname: class, Time: seconds(h.DurationMs), SystemOut: h.Stdout + string(h.Output)}
	if h.ExitCode == nil {
		return c
	}
	code := *h.ExitCode
	msg := fmt.Sprintf("exit %d (%s)", code, RunOutcome(code))
	if first := firstLine(h.Stderr, 200); first != "" {
		msg += ": " + first
	}
	switch RunOutcome(code) {
	case OutcomeOK:
	case OutcomeRebootNeeded:
		c.Skipped = &junitProblem{Message: msg}
	case OutcomeUnknown, OutcomeInterrupted:
		c.Error = &junitProblem{Message: msg, Type: RunOutcome(code), Text: h.Stderr}
	default:
		c.Failure = &junitProblem{Message: msg, Type: RunOutcome(code), Text: h.Stderr}
	}
	return c
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }
