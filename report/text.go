package report

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/mattn/go-isatty"
	"github.com/muesli/termenv"

	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
)

// Renderer returns a lipgloss renderer for w: colour only on a terminal and
// when NO_COLOR is unset.
func Renderer(w io.Writer) *lipgloss.Renderer {
	r := lipgloss.NewRenderer(w)
	f, ok := w.(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		r.SetColorProfile(termenv.Ascii)
	}
	return r
}

var symbols = map[preflight.Status]string{
	preflight.Pass: "✓", preflight.Warn: "⚠", preflight.Fail: "✗", preflight.Skip: "-", preflight.Error: "?",
}

// Text writes the terminal report. Every string of the report is shown
// through sanitize.Terminal: a report may come from another host (report
// render), and none of its strings may act on the terminal.
func Text(w io.Writer, r *Report) error {
	re := Renderer(w)
	bold := re.NewStyle().Bold(true)
	faint := re.NewStyle().Faint(true)
	colour := map[preflight.Status]lipgloss.Style{
		preflight.Pass:  re.NewStyle().Foreground(lipgloss.Color("2")),
		preflight.Warn:  re.NewStyle().Foreground(lipgloss.Color("3")),
		preflight.Fail:  re.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		preflight.Skip:  faint,
		preflight.Error: re.NewStyle().Foreground(lipgloss.Color("5")).Bold(true),
	}
	var b strings.Builder
	name := sanitize.Terminal(r.Host.Name)
	if name == "" {
		name = "(unnamed host)"
	}
	fmt.Fprintf(&b, "%s %s  %s, kernel %s\n", bold.Render("gpuprep check"), bold.Render(name), sanitize.Terminal(orDash(r.Host.OS)), sanitize.Terminal(orDash(r.Host.Kernel)))
	fmt.Fprintf(&b, "%s\n\n", faint.Render(sanitize.Terminal(gpuLine(r))))

	width := 0
	for _, f := range r.Findings {
		width = max(width, len(sanitize.Terminal(f.Check)))
	}
	for _, f := range r.Findings {
		sym := colour[f.Status].Render(cmp.Or(symbols[f.Status], "?"))
		modes := ""
		if r.Mode == "" && len(f.Modes) < len(preflight.Modes) {
			ms := make([]string, len(f.Modes))
			for i, m := range f.Modes {
				ms[i] = string(m)
			}
			modes = " " + faint.Render("["+sanitize.Terminal(strings.Join(ms, ","))+"]")
		}
		fmt.Fprintf(&b, " %s %-*s  %s: %s%s\n", sym, width, sanitize.Terminal(f.Check), sanitize.Terminal(f.Subject), sanitize.Terminal(f.Message), modes)
		if f.Remedy != "" && (f.Status == preflight.Fail || f.Status == preflight.Error || f.Status == preflight.Warn) {
			fmt.Fprintf(&b, "   %*s  %s\n", width, "", colour[f.Status].Render("→ fix: ")+sanitize.Terminal(f.Remedy))
		}
	}
	b.WriteString("\n" + bold.Render("Readiness") + "\n")
	for _, m := range preflight.Modes {
		mr, ok := r.Modes[m]
		if !ok {
			continue
		}
		state := colour[preflight.Pass].Render("READY")
		detail := ""
		var parts []string
		if len(mr.Blockers) > 0 {
			parts = append(parts, "blockers: "+strings.Join(mr.Blockers, ", "))
		}
		if len(mr.Unknown) > 0 {
			parts = append(parts, "not evaluated: "+strings.Join(mr.Unknown, ", "))
		}
		if len(mr.Skipped) > 0 {
			parts = append(parts, "skipped (--skip): "+strings.Join(mr.Skipped, ", "))
		}
		detail = sanitize.Terminal(strings.Join(parts, "; "))
		switch {
		case !mr.Ready && len(mr.Blockers) > 0:
			state = colour[preflight.Fail].Render("NOT READY")
		case !mr.Ready && len(mr.Unknown) > 0:
			state = colour[preflight.Error].Render("UNKNOWN")
		case !mr.Ready:
			// skipped checks: readiness not established
			state = colour[preflight.Error].Render("NOT EVALUATED")
		}
		fmt.Fprintf(&b, "  %-15s %s  %s\n", m, state, detail)
	}
	s := r.Summary
	fmt.Fprintf(&b, "\n%d pass, %d warn, %d fail, %d skip, %d error\n", s.Pass, s.Warn, s.Fail, s.Skip, s.Error)
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func gpuLine(r *Report) string {
	if len(r.GPUs) == 0 {
		return "No GPU selected (" + r.Selection + ")"
	}
	count := map[string]int{}
	var order []string
	for _, g := range r.GPUs {
		n := g.Name
		if n == "" {
			n = g.VendorID + ":" + g.DeviceID
		}
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	parts := make([]string, len(order))
	for i, n := range order {
		parts[i] = fmt.Sprintf("%d × %s", count[n], n)
	}
	s := "GPUs: " + strings.Join(parts, ", ")
	if len(r.NVSwitches) > 0 {
		s += fmt.Sprintf("; %d NVSwitch(es)", len(r.NVSwitches))
	}
	return s
}
