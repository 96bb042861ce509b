package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

type jProblem struct {
	Message *string `xml:"message,attr"`
	Type    string  `xml:"type,attr"`
}

type jCase struct {
	Name      string    `xml:"name,attr"`
	Classname string    `xml:"classname,attr"`
	Failure   *jProblem `xml:"failure"`
	Error     *jProblem `xml:"error"`
	Skipped   *jProblem `xml:"skipped"`
}

type jSuite struct {
	Name     string  `xml:"name,attr"`
	Tests    int     `xml:"tests,attr"`
	Failures int     `xml:"failures,attr"`
	Errors   int     `xml:"errors,attr"`
	Skipped  int     `xml:"skipped,attr"`
	Cases    []jCase `xml:"testcase"`
}

type jDoc struct {
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []jSuite `xml:"testsuite"`
}

// junitOf renders f as JUnit and checks what a JUnit consumer relies on:
// well-formed XML, one testcase per name in a suite, at most one of
// failure, error and skipped per case, each with a message, and counts
// (per suite and in all) that are those of the elements.
func junitOf(t *testing.T, f *FleetReport) jDoc {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, FleetJUnit(&b, f))
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "well-formed:\n%s", b.String())
	}
	var doc jDoc
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc), b.String())
	var tests, fails, errs, skips int
	for _, s := range doc.Suites {
		seen := map[string]bool{}
		var sf, se, ss int
		for _, c := range s.Cases {
			require.False(t, seen[c.Classname+"/"+c.Name], "suite %s: testcase %q twice:\n%s", s.Name, c.Name, b.String())
			seen[c.Classname+"/"+c.Name] = true
			n := 0
			for _, p := range []*jProblem{c.Failure, c.Error, c.Skipped} {
				if p != nil {
					n++
					require.NotNil(t, p.Message, "%s %s: a message", s.Name, c.Name)
					require.NotEmpty(t, *p.Message, "%s %s: a message", s.Name, c.Name)
				}
			}
			require.LessOrEqual(t, n, 1, "%s %s", s.Name, c.Name)
			if c.Failure != nil {
				sf++
			}
			if c.Error != nil {
				se++
			}
			if c.Skipped != nil {
				ss++
			}
		}
		assert.Equal(t, []int{len(s.Cases), sf, se, ss}, []int{s.Tests, s.Failures, s.Errors, s.Skipped}, "suite %s: tests, failures, errors, skipped", s.Name)
		tests, fails, errs, skips = tests+len(s.Cases), fails+sf, errs+se, skips+ss
	}
	assert.Equal(t, []int{tests, fails, errs, skips}, []int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped}, "testsuites: tests, failures, errors, skipped")
	return doc
}

func caseNames(s jSuite) []string {
	var out []string
	for _, c := range s.Cases {
		out = append(out, c.Name)
	}
	return out
}

// Without a mode a check reports a finding per mode for the same subject
// (vfio.binding: on vfio-pci for passthrough, on nvidia for containers):
// each is its own testcase, named with its mode, the same name a report
// for that mode gives it.
func TestJUnitOneCasePerCheckSubjectMode(t *testing.T) {
	vb := func(m preflight.Mode, st preflight.Status) preflight.Finding {
		return preflight.Finding{Check: "vfio.binding", Subject: "0000:13:00.0", Status: st, Message: "on driver nvidia", Modes: []preflight.Mode{m}}
	}
	all := hostReport("", preflight.Finding{Check: "gpu.present", Subject: "0000:13:00.0", Status: preflight.Pass, Modes: preflight.Modes},
		vb(preflight.VMVGPU, preflight.Pass), vb(preflight.VMPassthrough, preflight.Fail), vb(preflight.Container, preflight.Pass),
		preflight.Finding{Check: "iommu.groups", Status: preflight.Pass, Modes: []preflight.Mode{preflight.VMPassthrough}},
		preflight.Finding{Check: "iommu.groups", Status: preflight.Pass, Modes: []preflight.Mode{preflight.VMPassthrough}})
	all.Host.Name = "hgx"
	doc := junitOf(t, AsFleet(all))
	require.Len(t, doc.Suites, 1)
	assert.Equal(t, []string{"gpu.present 0000:13:00.0", "vfio.binding 0000:13:00.0 [vm-vgpu]", "vfio.binding 0000:13:00.0 [vm-passthrough]",
		"vfio.binding 0000:13:00.0 [container]", "iommu.groups [vm-passthrough]", "iommu.groups [vm-passthrough] (2)"}, caseNames(doc.Suites[0]))
	assert.Equal(t, 1, doc.Failures)

	pt := hostReport("vm-passthrough", vb(preflight.VMPassthrough, preflight.Fail))
	pt.Host.Name = "hgx"
	doc = junitOf(t, AsFleet(pt))
	assert.Equal(t, []string{"vfio.binding 0000:13:00.0 [vm-passthrough]"}, caseNames(doc.Suites[0]), "the same name with --mode")
}

// fleet apply: each rollout outcome is its JUnit element, with a message,
// and the counts are the elements'.
func TestFleetApplyJUnitOutcomes(t *testing.T) {
	ready := hostReport("container", preflight.Finding{Check: "gpu.present", Status: preflight.Pass})
	f := &FleetReport{Mode: "container", Rollout: &Rollout{Canary: 1, Batch: 2, Failures: 1, Stopped: "canary gpu-2 needs a reboot"},
		Hosts: []FleetHost{
			{Name: "gpu-1", Status: "evaluated", Phase: "canary", Outcome: OutcomeReady, Report: ready},
			{Name: "gpu-2", Status: "evaluated", Phase: "canary", Outcome: OutcomeRebootNeeded},
			{Name: "gpu-3", Status: "evaluated", Phase: "batch 1", Outcome: OutcomeRolledBack, Error: "vfio-bind: no such device",
				Rollback: &HostRollback{}},
			{Name: "gpu-4", Status: "unreachable", Phase: "batch 1", Outcome: OutcomeFailed, Error: "connect: connection refused"},
			{Name: "gpu-5", Status: "cancelled", Phase: "batch 1", Outcome: OutcomeCancelled},
			{Name: "gpu-6", Status: OutcomeSkipped, Phase: OutcomeSkipped, Outcome: OutcomeSkipped, Error: "not started: canary gpu-2 needs a reboot"},
		}}
	f.Finish()
	doc := junitOf(t, f)
	require.Len(t, doc.Suites, 6)
	assert.Equal(t, []int{7, 2, 1, 2}, []int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped})
	apply := func(i int) jCase {
		c := doc.Suites[i].Cases[0]
		require.Equal(t, "gpuprep apply", c.Name)
		return c
	}
	assert.Nil(t, apply(0).Failure)
	assert.Nil(t, apply(0).Skipped)
	require.NotNil(t, apply(1).Skipped)
	assert.Contains(t, *apply(1).Skipped.Message, "reboot needed")
	require.NotNil(t, apply(2).Failure)
	assert.Equal(t, OutcomeRolledBack, apply(2).Failure.Type)
	assert.Equal(t, "vfio-bind: no such device", *apply(2).Failure.Message)
	require.NotNil(t, apply(3).Failure)
	assert.Equal(t, "unreachable: connect: connection refused", *apply(3).Failure.Message)
	require.NotNil(t, apply(4).Error)
	assert.Equal(t, OutcomeCancelled, apply(4).Error.Type)
	require.NotNil(t, apply(5).Skipped)
	assert.Equal(t, "not started: canary gpu-2 needs a reboot", *apply(5).Skipped.Message)
}

// fleet run: each host's outcome is what gpuprep's exit code says; the
// summary counts them, the exit code follows them, JUnit maps them.
func TestFleetRunOutcomes(t *testing.T) {
	code := func(n int) *int { return &n }
	mk := func(codes ...int) *FleetReport {
		f := &FleetReport{Command: []string{"apply", "--mode", "container", "--yes"}}
		for i, c := range codes {
			h := FleetHost{Name: string(rune('a' + i)), Status: "evaluated", ExitCode: code(c), Stderr: "gpuprep: reboot now\n"}
			if c < 0 {
				h = FleetHost{Name: h.Name, Status: "unreachable", Error: "connect: connection refused"}
			}
			f.Hosts = append(f.Hosts, h)
		}
		f.Finish()
		return f
	}
	for _, tc := range []struct {
		codes []int
		want  int
	}{
		{[]int{0}, 0}, {[]int{4}, 4}, {[]int{0, 4}, 4}, {[]int{4, -1}, 3}, {[]int{4, 3}, 3}, {[]int{4, 130}, 3},
		{[]int{4, 1, -1}, 1}, {[]int{0, 137}, 1}, {[]int{1, 2}, 2},
	} {
		assert.Equal(t, tc.want, mk(tc.codes...).RunExitCode(), "%v", tc.codes)
	}
	f := mk(4)
	assert.Equal(t, OutcomeRebootNeeded, f.Hosts[0].Outcome)
	assert.Equal(t, map[string]int{OutcomeRebootNeeded: 1}, f.Summary.Outcomes)
	var b bytes.Buffer
	require.NoError(t, FleetText(&b, f))
	assert.Contains(t, b.String(), "1 host, 0 ok, 1 reboot-needed")
	assert.Regexp(t, `a +evaluated +4 +reboot-needed`, b.String())

	f = mk(0, 4, 1, 2, 3, 130, -1)
	assert.Equal(t, map[string]int{OutcomeOK: 1, OutcomeRebootNeeded: 1, OutcomeFailed: 1, OutcomeUsageError: 1, OutcomeUnknown: 1, OutcomeInterrupted: 1}, f.Summary.Outcomes)
	doc := junitOf(t, f)
	assert.Equal(t, []int{7, 2, 3, 1}, []int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped})
	assert.True(t, strings.HasPrefix(*doc.Suites[1].Cases[0].Skipped.Message, "exit 4 (reboot-needed): gpuprep: reboot now"))
	b.Reset()
	require.NoError(t, FleetMarkdown(&b, f))
	assert.Contains(t, b.String(), "**7 hosts, 1 ok, 1 reboot-needed, 1 failed, 1 usage-error, 1 unknown, 1 interrupted, not evaluated: 1 unreachable**")
}

// Truncated text stays valid UTF-8 (cut between characters, never inside
// one) and says it was cut, in every format that shortens a line.
func TestTruncationKeepsUTF8(t *testing.T) {
	long := strings.Repeat("é", 150)
	assert.Equal(t, strings.Repeat("é", 100)+" …", firstLine(long, 100))
	assert.Equal(t, "abc …", firstLine("abc\ndef", 100))
	assert.Equal(t, "ab …", firstLine("abc\ndef", 2))
	assert.Equal(t, "abc", firstLine("abc", 3))
	assert.Equal(t, "日本 …", firstLine("日本語", 2))

	code := 1
	f := &FleetReport{Command: []string{"checks"}, Hosts: []FleetHost{
		{Name: "a", Status: "evaluated", ExitCode: &code, Stderr: strings.Repeat("ü", 101)},
		{Name: "b", Status: "error", Error: strings.Repeat("€", 300)},
	}}
	f.Finish()
	ro := &FleetReport{Rollout: &Rollout{}, Hosts: []FleetHost{{Name: "c", Status: "evaluated", Outcome: OutcomeRollbackFailed,
		Error: strings.Repeat("ß", 130), Rollback: &HostRollback{Error: strings.Repeat("ø", 90)}}}}
	ro.Finish()
	for _, fr := range []*FleetReport{f, ro} {
		for _, format := range []string{"text", "markdown", "junit", "html"} {
			var b bytes.Buffer
			require.NoError(t, Render(&b, &Document{Fleet: fr}, format))
			assert.True(t, utf8.Valid(b.Bytes()), "%s:\n%s", format, b.String())
		}
	}
}
