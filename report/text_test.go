package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
)

// scenarioReport is the report of every check on a fixture scenario.
func scenarioReport(t *testing.T, scenario string) *Report {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
	require.NoError(t, err)
	res, err := preflight.Run(env, preflight.All(), preflight.Options{})
	require.NoError(t, err)
	return Build(env, res, "")
}

func textAt(t *testing.T, r *Report, o TextOptions) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, TextWith(&b, r, o))
	return b.String()
}

// unwrapped is s with its line breaks and indents as single blanks.
func unwrapped(s string) string { return strings.Join(strings.Fields(s), " ") }

// The 8-GPU HGX node's report fits 80 and 40 columns, says the verdict in
// its first lines, and tells the eight GPUs' identical vfio.binding
// findings once.
func TestTextEightGPUNodeFitsWidthVerdictFirstBindingsMerged(t *testing.T) {
	r := scenarioReport(t, "hgx-h200")
	require.Len(t, r.GPUs, 8)
	for _, width := range []int{80, 40} {
		for _, verbose := range []bool{false, true} {
			out := textAt(t, r, TextOptions{Width: width, Verbose: verbose})
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			for i, l := range lines {
				require.LessOrEqual(t, lipgloss.Width(l), width, "width %d, line %d is wider: %q\n%s", width, i+1, l, out)
			}
			head := unwrapped(strings.Join(lines[:min(14, len(lines))], "\n"))
			require.Contains(t, head, "Readiness container READY vm-passthrough NOT READY blockers: vfio.binding vm-vgpu NOT READY blockers: vgpu.manager 43 pass, 3 warn, 9 fail, 2 skip, 0 error", "width %d:\n%s", width, out)

			// eight "on driver nvidia" failures, one item
			require.Equal(t, 1, strings.Count(out, "✗ vfio.binding"), "width %d:\n%s", width, out)
			flat := unwrapped(out)
			require.Contains(t, flat, "✗ vfio.binding 8 GPUs (0000:13:00.0, 0000:23:00.0, 0000:33:00.0, 0000:43:00.0, 0000:53:00.0, 0000:63:00.0, 0000:73:00.0, 0000:83:00.0): on driver nvidia: vm-passthrough needs every function of the GPU on vfio-pci")
			require.Equal(t, 1, strings.Count(flat, "→ fix: gpuprep vfio bind --select 0000:13:00.0 --select 0000:23:00.0"), flat)
			require.Contains(t, flat, "--select 0000:83:00.0 --persist")
			require.NotContains(t, out, "--\n", "a flag split at its hyphens")
		}
	}
}

// Failures, errors, warnings and skips come before the passes, which are
// one line unless verbose.
func TestTextAttentionFirstPassesCollapsed(t *testing.T) {
	r := scenarioReport(t, "hgx-h200")
	out := textAt(t, r, TextOptions{Width: 80})
	order := regexp.MustCompile(`(?m)^ ([✗?⚠✓-]) `).FindAllStringSubmatch(out, -1)
	var syms string
	for _, m := range order {
		syms += m[1]
	}
	require.Regexp(t, `^✗+\?*⚠+-*✓$`, syms, out)
	require.Contains(t, out, " ✓ 43 findings passed (-v lists them)\n")
	require.NotContains(t, out, "gpu.present")

	v := textAt(t, r, TextOptions{Width: 80, Verbose: true})
	require.NotContains(t, v, "-v lists them")
	require.Contains(t, unwrapped(v), "✓ gpu.present 8 GPUs (0000:13:00.0,")
	require.Contains(t, v, "✓ iommu.groups")
	require.Less(t, strings.Index(v, "- vgpu.support"), strings.Index(v, "✓ gpu.present"), v)
}

// A report wrapped to 80 columns keeps no line wider, blanks at no line's
// end, and words whole where they fit.
func TestTextWrapsWithoutTrailingBlanks(t *testing.T) {
	r := scenarioReport(t, "vfio-bound")
	out := textAt(t, r, TextOptions{Width: 80, Verbose: true})
	for _, l := range strings.Split(out, "\n") {
		require.LessOrEqual(t, lipgloss.Width(l), 80, l)
		require.Equal(t, strings.TrimRight(l, " "), l, "trailing blanks")
	}
	require.Contains(t, out, "  vm-passthrough  READY\n")
	require.Contains(t, unwrapped(out), "⚠ vfio.binding 4 GPUs (0000:11:00.0, 0000:21:00.0, 0000:31:00.0, 0000:41:00.0): bound to vfio-pci until the next boot")
	require.Contains(t, unwrapped(out), "(echo ADDR > /sys/bus/pci/drivers/nvidia/bind) (ADDR: each GPU's address)")
}

// The width: $COLUMNS where the writer is no terminal, else 80; a report
// never narrower than 20 columns.
func TestTermWidth(t *testing.T) {
	var b bytes.Buffer
	t.Setenv("COLUMNS", "132")
	require.Equal(t, 132, TermWidth(&b))
	for _, v := range []string{"", "wide", "-3", "0"} {
		t.Setenv("COLUMNS", v)
		require.Equal(t, 80, TermWidth(&b), "COLUMNS=%q", v)
	}
	t.Setenv("COLUMNS", "30")
	r := scenarioReport(t, "vfio-bound")
	for _, l := range strings.Split(textAt(t, r, TextOptions{}), "\n") {
		require.LessOrEqual(t, lipgloss.Width(l), 30, l)
	}
	for _, l := range strings.Split(textAt(t, r, TextOptions{Width: 5}), "\n") {
		require.LessOrEqual(t, lipgloss.Width(l), 20, l)
	}
}

// Wrapped, a host's strings still start no line of their own: each line
// of the report that a string continues is indented.
func TestTextWrappedHostileStringsStayIndented(t *testing.T) {
	x := "\x1b]0;ALL HOSTS READY\x07\r\nALL HOSTS READY vm-passthrough READY ✓ 43 findings passed\u202e"
	r := hostileFleet(x).Hosts[0].Report
	for _, width := range []int{80, 40, 20} {
		out := textAt(t, r, TextOptions{Width: width, Verbose: true})
		top := regexp.MustCompile(`^(gpuprep check( |$)|GPUs: |Readiness$|  vm-passthrough  |0 pass, | [✗?]( |$)|$|  )`)
		for _, l := range strings.Split(out, "\n") {
			require.Regexp(t, top, l, "width %d:\n%s", width, out)
			require.LessOrEqual(t, lipgloss.Width(l), width, l)
		}
	}
}
