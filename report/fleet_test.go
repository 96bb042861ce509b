package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

func hostReport(mode string, findings ...preflight.Finding) *Report {
	r := &Report{APIVersion: APIVersion, Kind: Kind, Mode: mode, Ready: true, Modes: map[preflight.Mode]*preflight.ModeResult{}, Findings: findings}
	mr := &preflight.ModeResult{Ready: true, Blockers: []string{}}
	for _, f := range findings {
		switch f.Status {
		case preflight.Fail:
			r.Summary.Fail++
			mr.Blockers = append(mr.Blockers, f.Check)
			mr.Ready, r.Ready = false, false
		case preflight.Error:
			r.Summary.Error++
		default:
			r.Summary.Pass++
		}
	}
	r.Modes[preflight.Mode(mode)] = mr
	return r
}

func sample() *FleetReport {
	kfail := preflight.Finding{Check: "iommu.kernel", Status: preflight.Fail, Subject: "<x|y>", Message: "no IOMMU *groups*", Remedy: "gpuprep grub ensure"}
	pass := preflight.Finding{Check: "gpu.present", Status: preflight.Pass}
	f := &FleetReport{Mode: "vm-passthrough", Hosts: []FleetHost{
		{Name: "a", Address: "10.0.0.1:22", Status: "evaluated", Report: hostReport("vm-passthrough", pass, kfail)},
		{Name: "b", Address: "10.0.0.2:22", Status: "evaluated", Report: hostReport("vm-passthrough", pass,
			preflight.Finding{Check: "iommu.kernel", Status: preflight.Pass})},
		{Name: "c\x1b[31m|evil", Address: "10.0.0.3:22", Status: "unreachable", Error: "connect: connection refused"},
		{Name: "d", Address: "10.0.0.4:22", Status: "evaluated", Report: hostReport("vm-passthrough", pass, kfail,
			preflight.Finding{Check: "vfio.binding", Status: preflight.Fail, Modes: []preflight.Mode{"container"}})},
	}}
	f.Finish()
	return f
}

func TestFleetSummaryAndExit(t *testing.T) {
	f := sample()
	assert.Equal(t, 1, f.Summary.Ready)
	assert.Equal(t, 2, f.Summary.NotReady)
	assert.Equal(t, map[string]int{"evaluated": 3, "unreachable": 1}, f.Summary.Statuses)
	require.Len(t, f.Summary.Checks, 1, "a fail that counts for another mode is not in the fleet-wide view")
	assert.Equal(t, "iommu.kernel fails on 2 of 3 hosts: a, d", f.Summary.Checks[0].Sentence(5))
	assert.Equal(t, "iommu.kernel fails on 2 of 3 hosts: a, … (+1 more)", f.Summary.Checks[0].Sentence(1))
	assert.Equal(t, 1, f.ExitCode())

	f.Hosts = f.Hosts[1:3]
	f.Finish()
	assert.Equal(t, 3, f.ExitCode(), "a ready host and an unreachable one")
	f.Hosts = f.Hosts[:1]
	f.Finish()
	assert.Equal(t, 0, f.ExitCode())
}

// "fails on N of M hosts": M counts the hosts that judged the check for
// their mode, not every host evaluated (a container host does not judge
// the vGPU manager).
func TestFleetSpreadCountsHostsThatJudgedTheCheck(t *testing.T) {
	vg := func(st preflight.Status) preflight.Finding {
		return preflight.Finding{Check: "vgpu.manager", Status: st, Modes: []preflight.Mode{preflight.VMVGPU}}
	}
	f := &FleetReport{Hosts: []FleetHost{
		{Name: "v1", Status: "evaluated", Report: hostReport("vm-vgpu", vg(preflight.Fail))},
		{Name: "v2", Status: "evaluated", Report: hostReport("vm-vgpu", vg(preflight.Pass))},
		{Name: "c", Status: "evaluated", Report: hostReport("container", vg(preflight.Fail), preflight.Finding{Check: "gpu.present", Status: preflight.Pass})},
		{Name: "s", Status: "evaluated", Report: hostReport("vm-vgpu", vg(preflight.Skip))}, // skipped: judged nothing
	}}
	f.Finish()
	require.Len(t, f.Summary.Checks, 1)
	assert.Equal(t, "vgpu.manager fails on 1 of 2 hosts: v1", f.Summary.Checks[0].Sentence(5))
}

// fleet apply: each host counts by its outcome (a failed apply has no
// report and still counts), and a rolled-back host's report, of the node
// before its rollback, is not in the fleet-wide view.
func TestFleetApplySummaryAddsUp(t *testing.T) {
	kfail := preflight.Finding{Check: "iommu.kernel", Status: preflight.Fail}
	f := &FleetReport{Rollout: &Rollout{}, Hosts: []FleetHost{
		{Name: "ok", Status: "evaluated", Outcome: OutcomeReady, Report: hostReport("container", preflight.Finding{Check: "gpu.present", Status: preflight.Pass})},
		{Name: "failed", Status: "evaluated", Outcome: OutcomeFailed, Error: "apply failed"},
		{Name: "back", Status: "evaluated", Outcome: OutcomeRolledBack, Report: hostReport("container", kfail), Rollback: &HostRollback{Status: "evaluated"}},
		{Name: "reboot", Status: "evaluated", Outcome: OutcomeRebootNeeded},
		{Name: "later", Status: OutcomeSkipped, Outcome: OutcomeSkipped},
	}}
	f.Finish()
	s := f.Summary
	assert.Equal(t, 1, s.Ready)
	assert.Equal(t, 3, s.NotReady)
	assert.Equal(t, 0, s.Unknown)
	assert.Equal(t, 5, s.Hosts)
	assert.Equal(t, s.Hosts, s.Ready+s.NotReady+s.Unknown+s.Hosts-s.Statuses["evaluated"], "every host is counted once")
	assert.Empty(t, s.Checks, "the rolled-back host's failures describe the node before its rollback")
}

func TestFleetFormats(t *testing.T) {
	f := sample()
	var b bytes.Buffer
	require.NoError(t, FleetTextWith(&b, f, TextOptions{Width: 200}))
	assert.Contains(t, b.String(), "4 hosts, 1 ready, 2 not ready, not evaluated: 1 unreachable")
	assert.Contains(t, b.String(), `c\x1b[31m|evil`, "control characters are escaped on the terminal")
	assert.NotContains(t, b.String(), "\x1b[31m")

	b.Reset()
	require.NoError(t, FleetJUnit(&b, f))
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal(b.Bytes(), &doc), b.String())
	assert.Len(t, doc.Suites, 4)
	assert.Equal(t, 2, doc.Failures)
	assert.Equal(t, 1, doc.Errors)
	assert.Equal(t, 8, doc.Tests)

	b.Reset()
	require.NoError(t, FleetMarkdown(&b, f))
	md := b.String()
	assert.Contains(t, md, "- iommu.kernel fails on 2 of 3 hosts: a, d")
	assert.Contains(t, md, `| c\\x1b\[31m\|evil | 10.0.0.3:22 | unreachable |`)
	assert.Contains(t, md, "`iommu.kernel` &lt;x\\|y&gt;: no IOMMU \\*groups\\* — fix: gpuprep grub ensure")
}

// FleetJSON writes host by host what json.Encoder with SetIndent("", "  ")
// writes for the whole report, byte for byte: no hosts, one, many, a
// command, a rollout, and strings that look like the hosts field.
func TestFleetJSONIsTheEncoders(t *testing.T) {
	trap := "\n  \"hosts\": []\n  ],"
	one := 0
	cases := map[string]*FleetReport{
		"sample": sample(),
		"empty":  {Mode: "container"},
		"none":   {Hosts: []FleetHost{}},
		"one":    {Hosts: []FleetHost{{Name: trap, Status: "error", Error: trap}}},
		"run": {Command: []string{"grub", "show", trap}, Interrupted: true, Rollout: &Rollout{},
			Hosts: []FleetHost{{Name: "a", ExitCode: &one, Output: []byte(`{"a": [1, {}], "<b>": "c"}`)}, {Name: "b", Stdout: trap, Stderr: "\x00<&>"}}},
	}
	var noHosts FleetReport // Hosts nil, not finished: "hosts": null
	require.Nil(t, noHosts.Hosts)
	cases["nil"] = &noHosts
	many := &FleetReport{Command: []string{"vfio", "status"}} // encoded on every CPU, written in order
	for i := range 101 {
		many.Hosts = append(many.Hosts, FleetHost{Name: fmt.Sprintf("h%03d", i), ExitCode: &one,
			Output: []byte(fmt.Sprintf(`{"n": %d, "s": [%q]}`, i, strings.Repeat("x", i)))})
	}
	cases["many"] = many
	for name, f := range cases {
		if name != "nil" {
			f.Finish()
		}
		var want, got bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		require.NoError(t, enc.Encode(f), name)
		require.NoError(t, FleetJSON(&got, f), name)
		require.Equal(t, want.String(), got.String(), name)
	}
}

// A host entry that cannot be encoded: the error of the first such host,
// as the encoder's, and nothing written.
func TestFleetJSONError(t *testing.T) {
	one := 0
	f := &FleetReport{Command: []string{"x"}}
	for i := range 64 {
		out := []byte(`{"ok": true}`)
		switch i {
		case 21:
			out = []byte(`{"a": ]}`)
		case 50:
			out = []byte(`{"b" 1}`)
		}
		f.Hosts = append(f.Hosts, FleetHost{Name: fmt.Sprint(i), ExitCode: &one, Output: out})
	}
	f.Finish()
	enc := json.NewEncoder(io.Discard)
	enc.SetIndent("", "  ")
	want := enc.Encode(f)
	require.Error(t, want)
	var got bytes.Buffer
	err := FleetJSON(&got, f)
	require.Error(t, err)
	assert.Equal(t, want.Error(), err.Error())
	assert.Zero(t, got.Len())
}

// CompactJSON is JSON's document on one line.
func TestCompactJSON(t *testing.T) {
	r := hostReport("vm-passthrough", preflight.Finding{Check: "iommu.kernel", Status: preflight.Fail, Subject: "<x>", Message: "a\nb"})
	var ind, com bytes.Buffer
	require.NoError(t, JSON(&ind, r))
	require.NoError(t, CompactJSON(&com, r))
	require.Equal(t, 1, bytes.Count(com.Bytes(), []byte("\n")), "one line")
	var want bytes.Buffer
	require.NoError(t, json.Compact(&want, ind.Bytes()))
	require.Equal(t, want.String()+"\n", com.String())
	require.Less(t, com.Len(), ind.Len())
}

// One host's check report in a fleet format is titled as gpuprep check,
// and without a mode says each mode's readiness (check's own "ready" is for
// every mode at once); a fleet keeps its title and counts.
func TestSingleHostFormats(t *testing.T) {
	r := hostReport("", preflight.Finding{Check: "vfio.binding", Status: preflight.Fail, Subject: "0000:13:00.0", Modes: []preflight.Mode{preflight.VMPassthrough}})
	r.Host.Name = "gpu-7"
	r.Modes = map[preflight.Mode]*preflight.ModeResult{
		preflight.Container:     {Ready: true, Blockers: []string{}},
		preflight.VMPassthrough: {Ready: false, Blockers: []string{"vfio.binding"}},
	}
	var md, ju, tx bytes.Buffer
	require.NoError(t, Render(&md, &Document{Host: r}, "markdown"))
	require.Contains(t, md.String(), "## gpuprep check gpu-7\n\n**container ready; vm-passthrough not ready (vfio.binding)**")
	require.NoError(t, Render(&ju, &Document{Host: r}, "junit"))
	require.Contains(t, ju.String(), `<testsuites name="gpuprep check gpu-7"`)
	require.NoError(t, FleetText(&tx, AsFleet(r)))
	require.Contains(t, tx.String(), "gpuprep check gpu-7  container ready; vm-passthrough not ready (vfio.binding)")

	md.Reset()
	require.NoError(t, FleetMarkdown(&md, sample()))
	require.Contains(t, md.String(), "## gpuprep fleet check\n\n**4 hosts")
}

// A host whose mode had checks skipped (--skip) is not ready: its verdict
// is unknown (as check's exit 3), the skipped checks are named where the
// blockers are, and the fleet does not pass.
func TestSkippedChecksAreNotReadyInTheFleet(t *testing.T) {
	pass := preflight.Finding{Check: "gpu.present", Status: preflight.Pass}
	skip := preflight.Finding{Check: "iommu.groups", Status: preflight.Skip, Subject: "--skip iommu.groups", Message: "not run (--skip)"}
	r := hostReport("vm-passthrough", pass, skip)
	mr := r.Modes["vm-passthrough"]
	mr.Ready, r.Ready, mr.Skipped = false, false, []string{"iommu.groups"}
	r.Summary.Skip = 1
	f := &FleetReport{Mode: "vm-passthrough", Hosts: []FleetHost{{Name: "a", Address: "10.0.0.1:22", Status: "evaluated", Report: r}}}
	f.Finish()
	assert.Equal(t, VerdictUnknown, f.Hosts[0].Verdict)
	assert.Equal(t, 0, f.Summary.Ready)
	assert.Equal(t, 1, f.Summary.Unknown)
	assert.NotEqual(t, 0, f.ExitCode())
	assert.Equal(t, []string{"iommu.groups (skipped)"}, blockers(r))
	var md, ju bytes.Buffer
	require.NoError(t, FleetMarkdown(&md, f))
	assert.Contains(t, md.String(), "| iommu.groups (skipped) |")
	assert.Contains(t, md.String(), "- **skip** `iommu.groups`")
	require.NoError(t, FleetJUnit(&ju, f))
	assert.Contains(t, ju.String(), `<property name="skipped" value="iommu.groups"></property>`)
	assert.Contains(t, ju.String(), `<property name="verdict" value="unknown"></property>`)

	// one host, every mode: each mode's state said
	r.Mode = ""
	f = &FleetReport{Hosts: []FleetHost{{Name: "a", Status: "evaluated", Report: r}}, single: true}
	f.Finish()
	line, err := summaryLine(f)
	require.NoError(t, err)
	assert.Equal(t, "vm-passthrough not evaluated (skipped: iommu.groups)", line)
}
