package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// goldenFleets are fleet reports of every kind (check, run, apply,
// interrupted), with names and messages whose widths differ in bytes and in
// characters (the text table's columns).
func goldenFleets() map[string]func() *FleetReport {
	code := func(n int) *int { return &n }
	return map[string]func() *FleetReport{
		"check": func() *FleetReport {
			f := sample()
			f.Hosts = append(f.Hosts,
				FleetHost{Name: "gpu-ümlaut-東京", Address: "[fe80::1%eth0]:2222", Status: "evaluated", Mode: "vm-passthrough", DurationMs: 1234,
					Report: hostReport("vm-passthrough", preflight.Finding{Check: "iommu.groups", Status: preflight.Error, Message: "read: <denied>"})},
				FleetHost{Name: "e", Status: "timeout", Error: "no answer in 30s\nsecond line", DurationMs: 30000})
			f.Finish()
			return f
		},
		"interrupted": func() *FleetReport {
			f := sample()
			f.Hosts[1] = FleetHost{Name: "b", Address: "10.0.0.2:22", Status: "cancelled", Error: "interrupted"}
			f.Interrupted = true
			f.Finish()
			return f
		},
		"run": func() *FleetReport {
			f := &FleetReport{Command: []string{"apply", "--mode", "container", "--yes"}}
			for i, c := range []int{0, 4, 1, 2, 3, 130, -1} {
				h := FleetHost{Name: string(rune('a'+i)) + "-ß", Address: "10.0.0.9:22", Status: "evaluated", ExitCode: code(c), Stdout: "done\nmore", Stderr: "gpuprep: reboot now\n"}
				switch c {
				case -1:
					h = FleetHost{Name: h.Name, Status: "unreachable", Error: "connect: connection refused"}
				case 1:
					// as a report file holds it (the JSON re-indented in
					// the host's entry), which is what a stream reads back
					h.Output, h.Stdout = []byte("{\n        \"ok\": false\n      }"), ""
				}
				f.Hosts = append(f.Hosts, h)
			}
			f.Finish()
			return f
		},
		"apply": func() *FleetReport {
			f := &FleetReport{Mode: "vm-passthrough", Rollout: &Rollout{Canary: 1, Batch: 2, Reboot: true, MaxReboots: 3, RollbackOnFailure: true, Failures: 2, Stopped: "too many failures"},
				Hosts: []FleetHost{
					{Name: "gpu-1", Status: "evaluated", Phase: "canary", Outcome: OutcomeReady, Reboot: &HostReboot{Completed: true, WaitedMs: 41600, Reboots: 2, Reasons: []string{"kernel-args", ""}},
						Report: hostReport("vm-passthrough", preflight.Finding{Check: "gpu.present", Status: preflight.Pass})},
					{Name: "gpu-2", Status: "evaluated", Phase: "batch 1", Outcome: OutcomeRolledBack, Error: "apply failed", ExitCode: code(1),
						Rollback: &HostRollback{RebootRequired: true}},
					{Name: "gpu-3", Status: "evaluated", Phase: "batch 1", Outcome: OutcomeRollbackFailed, Error: "apply failed",
						Rollback: &HostRollback{Error: "grub.cfg: permission denied\nsecond line"}},
					{Name: "gpu-4", Status: "skipped", Phase: "skipped", Outcome: OutcomeSkipped},
				}}
			f.Finish()
			return f
		},
	}
}

// streamed writes f's hosts to a FleetStream, last host first (the order
// hosts finish in is not the inventory's).
func streamed(t *testing.T, f *FleetReport) *FleetStream {
	t.Helper()
	st, err := NewFleetStream(filepath.Join(t.TempDir(), "fleet.json"), &FleetReport{Mode: f.Mode, Command: f.Command, Rollout: f.Rollout}, len(f.Hosts))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close(f.Interrupted)) })
	for i := len(f.Hosts) - 1; i >= 0; i-- {
		h := f.Hosts[i]
		require.NoError(t, st.Add(i, &h))
	}
	return st
}

// Every fleet format is byte for byte what it was when the whole report
// was held in memory (testdata/fleet-*.golden, written by that renderer),
// rendered from the report in memory and from a stream of it alike; the
// text at 80 columns ($COLUMNS, as where gpuprep's output is no terminal)
// and at 40, where the table's columns do not fit (text-40), and 120.
func TestFleetFormatsGolden(t *testing.T) {
	for name, mk := range goldenFleets() {
		for _, format := range []string{"text", "text-40", "text-120", "junit", "markdown", "html"} {
			file := filepath.Join("testdata", "fleet-"+name+"."+format+".golden")
			t.Setenv("COLUMNS", "80")
			if w, ok := strings.CutPrefix(format, "text-"); ok {
				format = "text"
				t.Setenv("COLUMNS", w)
			}
			var mem bytes.Buffer
			require.NoError(t, Render(&mem, &Document{Fleet: mk()}, format), file)
			if *update {
				require.NoError(t, os.WriteFile(file, mem.Bytes(), 0o644))
			}
			want, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.Equal(t, string(want), mem.String(), "%s from memory", file)

			f := mk()
			var out bytes.Buffer
			require.NoError(t, streamed(t, f).Render(&out, format, f.Interrupted), file)
			assert.Equal(t, string(want), out.String(), "%s from the stream", file)
		}
	}
}
