package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

// hostileFleet is a fleet whose every host string ends in x.
func hostileFleet(x string) *FleetReport {
	r := &Report{APIVersion: APIVersion, Kind: Kind, Mode: "vm-passthrough", Selection: "nvidia" + x,
		Host:  preflight.HostInfo{Name: "gpu-1" + x, OS: "Ubuntu" + x, Kernel: "6.8" + x},
		GPUs:  []GPU{{Name: "H200" + x, VendorID: "10de", DeviceID: "2335"}},
		Modes: map[preflight.Mode]*preflight.ModeResult{"vm-passthrough": {Blockers: []string{"vfio.binding" + x}, Unknown: []string{"iommu.groups" + x}}},
		Findings: []preflight.Finding{
			{Check: "vfio.binding" + x, Status: preflight.Fail, Subject: "0000:13:00.0" + x, Message: "on nvidia" + x, Remedy: "gpuprep apply" + x},
			{Check: "iommu.groups" + x, Status: preflight.Error, Subject: "group 5" + x, Message: "unreadable" + x, Remedy: "run as root" + x},
		},
	}
	f := &FleetReport{Hosts: []FleetHost{
		{Name: "gpu-1" + x, Address: "10.0.0.1" + x, Status: "evaluated", Report: r},
		{Name: "gpu-2" + x, Address: "10.0.0.2" + x, Status: "unreachable", Error: "no route" + x},
	}}
	f.Finish()
	f.Hosts[1].Status += x // as a saved report may say
	return f
}

// The terminal and Markdown reports show every host string as it is: no
// control reaches the output, and no string adds a line or raw HTML.
func TestHostStringsCannotActOnTerminalOrMarkdown(t *testing.T) {
	x := "\x1b]0;ALL HOSTS READY\x07\r\x1b[2K\nALL HOSTS READY\u009b2J\u202e<img src=x onerror=alert(1)>\n\n# READY"
	type render func(*FleetReport) string
	for name, r := range map[string]render{
		"check text": func(f *FleetReport) string {
			var b bytes.Buffer
			// wide enough that no line wraps: a line more is then one a
			// string added
			require.NoError(t, TextWith(&b, f.Hosts[0].Report, TextOptions{Width: 1 << 20, Verbose: true}))
			return b.String()
		},
		"fleet text": func(f *FleetReport) string {
			var b bytes.Buffer
			require.NoError(t, FleetTextWith(&b, f, TextOptions{Width: 1 << 20}))
			return b.String()
		},
		"markdown": func(f *FleetReport) string {
			var b bytes.Buffer
			require.NoError(t, FleetMarkdown(&b, f))
			return b.String()
		},
	} {
		benign, hostile := r(hostileFleet("")), r(hostileFleet(x))
		require.Equal(t, strings.Count(benign, "\n"), strings.Count(hostile, "\n"), "%s:\n%s", name, hostile)
		if name == "markdown" {
			require.Equal(t, strings.Count(outsideCode(benign), "<"), strings.Count(outsideCode(hostile), "<"), "raw HTML:\n%s", hostile)
		}
		for _, bad := range []string{"\x1b", "\r", "\u009b", "\u202e", "\x07"} {
			require.NotContains(t, hostile, bad, name)
		}
		require.Contains(t, hostile, `\x1b]0;ALL HOSTS READY\x07`, name)
	}
}

// outsideCode is a Markdown document without its code spans, whose text is
// literal (x holds no backtick: every one in the document delimits a span).
func outsideCode(doc string) string {
	var b strings.Builder
	for i, part := range strings.Split(doc, "`") {
		if i%2 == 0 {
			b.WriteString(part)
		}
	}
	return b.String()
}
