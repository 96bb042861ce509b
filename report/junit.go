package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/gpuprep/gpuprep/preflight"
)

// JUnit XML (the de-facto schema CI systems read: testsuites > testsuite >
// testcase with failure/error/skipped): a testsuite per host, a testcase
// per finding. fail findings are failures, error findings errors, skip
// findings skipped; a host that could not be evaluated is one testcase
// with an error naming its status.

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

// FleetJUnit writes the fleet report as JUnit XML.
func FleetJUnit(w io.Writer, f *FleetReport) error {
	root := junitSuites{Name: f.title()}
	for _, h := range f.Hosts {
		s := junitSuite{Name: h.Name, Hostname: h.Address, Time: seconds(h.DurationMs),
			Properties: []junitProperty{{"status", h.Status}}}
		if h.Verdict != "" {
			s.Properties = append(s.Properties, junitProperty{"verdict", h.Verdict})
		}
		if h.Report != nil {
			if sk := Skipped(h.Report); len(sk) > 0 {
				s.Properties = append(s.Properties, junitProperty{"skipped", strings.Join(sk, ",")})
			}
		}
		if h.Mode != "" {
			s.Properties = append(s.Properties, junitProperty{"mode", h.Mode})
		}
		if h.Phase != "" {
			s.Properties = append(s.Properties, junitProperty{"phase", h.Phase}, junitProperty{"outcome", h.Outcome})
		}
		if n := h.RebootNote(); n != "" {
			s.Properties = append(s.Properties, junitProperty{"reboot", n})
		}
		if n := h.RollbackNote(); n != "" {
			s.Properties = append(s.Properties, junitProperty{"rollback", n})
		}
		class := "gpuprep." + h.Name
		switch {
		case h.Report != nil:
			for _, fd := range h.Report.Findings {
				c := junitCase{Name: fd.Check, Classname: class, Time: "0", SystemOut: fd.Message}
				if fd.Subject != "" {
					c.Name += " " + fd.Subject
				}
				text := fd.Message
				if fd.Remedy != "" {
					text += "\nremedy: " + fd.Remedy
				}
				counts := Counts(h.Report, fd)
				switch {
				case fd.Status == preflight.Fail && counts:
					c.Failure = &junitProblem{Message: fd.Message, Type: "fail", Text: text}
					s.Failures++
				case fd.Status == preflight.Error && counts:
					c.Error = &junitProblem{Message: fd.Message, Type: "error", Text: text}
					s.Errors++
				case fd.Status == preflight.Skip:
					c.Skipped = &junitProblem{Message: fd.Message}
					s.Skipped++
				}
				s.Cases = append(s.Cases, c)
			}
		case len(f.Command) > 0 && h.Status == "evaluated":
			c := junitCase{Name: strings.Join(f.Command, " "), Classname: class, Time: seconds(h.DurationMs), SystemOut: h.Stdout + string(h.Output)}
			if h.ExitCode != nil && *h.ExitCode != 0 {
				c.Failure = &junitProblem{Message: fmt.Sprintf("exit %d", *h.ExitCode), Type: "exit", Text: h.Stderr}
				s.Failures++
			}
			s.Cases = append(s.Cases, c)
		default:
			s.Cases = append(s.Cases, junitCase{Name: "connect and run gpuprep", Classname: class, Time: seconds(h.DurationMs),
				Error: &junitProblem{Message: h.Error, Type: h.Status, Text: h.Error}})
			s.Errors++
		}
		s.Tests = len(s.Cases)
		root.Tests += s.Tests
		root.Failures += s.Failures
		root.Errors += s.Errors
		root.Skipped += s.Skipped
		root.Suites = append(root.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }
