package report

import (
	"cmp"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/plural"
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

// TextOptions say how the terminal report is laid out.
type TextOptions struct {
	// Verbose lists every finding; by default passes are one line that
	// counts them.
	Verbose bool
	// Width is the width in columns the report is wrapped to; 0: TermWidth
	// of the writer (at least 20 either way).
	Width int
}

// Text writes the terminal report as TextWith does by default.
func Text(w io.Writer, r *Report) error { return TextWith(w, r, TextOptions{}) }

// TextWith writes the terminal report: the host, the verdict (each mode's
// readiness and blockers, and the counts), then what needs attention
// (failures, errors, warnings, skips), then the passes, collapsed to one
// line unless o.Verbose. Per-device findings that say the same thing are
// one line (Items), and every line is wrapped to the width, never wider.
// Every string of the report is shown through sanitize.Terminal: a report
// may come from another host (report render), and none of its strings may
// act on the terminal.
func TextWith(w io.Writer, r *Report, o TextOptions) error {
	re := Renderer(w)
	width := o.Width
	if width <= 0 {
		width = TermWidth(w)
	}
	width = max(width, minWidth)
	st := textStyles(re)
	var b strings.Builder
	name := sanitize.Terminal(r.Host.Name)
	if name == "" {
		name = "(unnamed host)"
	}
	para(&b, st.bold.Render("gpuprep check")+" "+st.bold.Render(name)+"  "+sanitize.Terminal(orDash(r.Host.OS))+", kernel "+sanitize.Terminal(orDash(r.Host.Kernel)), 2, width)
	para(&b, st.faint.Render(sanitize.Terminal(gpuLine(r))), 2, width)
	b.WriteString("\n")
	readiness(&b, r, st, width)
	s := r.Summary
	para(&b, fmt.Sprintf("%d pass, %d warn, %d fail, %d skip, %d error", s.Pass, s.Warn, s.Fail, s.Skip, s.Error), 2, width)
	findings(&b, r, st, o.Verbose, width)
	_, err := io.WriteString(w, b.String())
	return err
}

type styles struct {
	bold, faint lipgloss.Style
	status      map[preflight.Status]lipgloss.Style
}

func textStyles(re *lipgloss.Renderer) styles {
	faint := re.NewStyle().Faint(true)
	return styles{bold: re.NewStyle().Bold(true), faint: faint, status: map[preflight.Status]lipgloss.Style{
		preflight.Pass:  re.NewStyle().Foreground(lipgloss.Color("2")),
		preflight.Warn:  re.NewStyle().Foreground(lipgloss.Color("3")),
		preflight.Fail:  re.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		preflight.Skip:  faint,
		preflight.Error: re.NewStyle().Foreground(lipgloss.Color("5")).Bold(true),
	}}
}

// readiness writes each mode's verdict, with its blockers, the checks it
// could not evaluate and those skipped.
func readiness(b *strings.Builder, r *Report, st styles, width int) {
	b.WriteString(st.bold.Render("Readiness") + "\n")
	for _, m := range preflight.Modes {
		mr, ok := r.Modes[m]
		if !ok || mr == nil {
			continue
		}
		state := st.status[preflight.Pass].Render("READY")
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
		switch {
		case !mr.Ready && len(mr.Blockers) > 0:
			state = st.status[preflight.Fail].Render("NOT READY")
		case !mr.Ready && len(mr.Unknown) > 0:
			state = st.status[preflight.Error].Render("UNKNOWN")
		case !mr.Ready:
			// skipped checks: readiness not established
			state = st.status[preflight.Error].Render("NOT EVALUATED")
		}
		lead := fmt.Sprintf("  %-15s %s  ", m, state)
		indent := lipgloss.Width(lead)
		if width-indent < 30 {
			indent = 4
		}
		hang(b, lead, sanitize.Terminal(strings.Join(parts, "; ")), indent, width)
	}
}

// findings writes the report's findings as Items: what needs attention
// first, then the passes (one line unless verbose).
func findings(b *strings.Builder, r *Report, st styles, verbose bool, width int) {
	items := Items(r.Findings, r.GPUAddresses())
	checkWidth := 0
	for _, it := range items {
		if verbose || it.Status != preflight.Pass {
			checkWidth = max(checkWidth, lipgloss.Width(sanitize.Terminal(it.Check)))
		}
	}
	// " ✗ check  " and the text past it; where that leaves too little room,
	// the check gets a line of its own and the text an indent of 5.
	indent := 3 + checkWidth + 2
	if width-indent < 40 {
		indent = min(5, width/4)
	}
	passes, blank := 0, false
	for _, it := range items {
		if it.Status == preflight.Pass && !verbose {
			passes++
			continue
		}
		if !blank {
			b.WriteString("\n")
			blank = true
		}
		item(b, r, it, st, checkWidth, indent, width)
	}
	if passes > 0 {
		if !blank {
			b.WriteString("\n")
		}
		n := r.Summary.Pass
		hang(b, " "+st.status[preflight.Pass].Render(symbols[preflight.Pass])+" ", plural.N(n, "finding")+" passed (-v lists them)", 3, width)
	}
}

// item writes one Item: its status, check, subject and message, and its
// remedy where it has something to fix.
func item(b *strings.Builder, r *Report, it Item, st styles, checkWidth, indent, width int) {
	check := sanitize.Terminal(it.Check)
	lead := " " + st.status[it.Status].Render(cmp.Or(symbols[it.Status], "?")) + " " + check
	if indent > 5 {
		lead += strings.Repeat(" ", checkWidth-lipgloss.Width(check))
	}
	lead += "  "
	text := sanitize.Terminal(it.Subject) + ": " + sanitize.Terminal(it.Message)
	if r.Mode == "" && len(it.Modes) < len(preflight.Modes) {
		ms := make([]string, len(it.Modes))
		for i, m := range it.Modes {
			ms[i] = string(m)
		}
		text += " " + st.faint.Render("["+sanitize.Terminal(strings.Join(ms, ","))+"]")
	}
	hang(b, lead, text, indent, width)
	if it.Remedy != "" && (it.Status == preflight.Fail || it.Status == preflight.Error || it.Status == preflight.Warn) {
		hang(b, strings.Repeat(" ", indent), st.status[it.Status].Render("→ fix: ")+sanitize.Terminal(it.Remedy), indent, width)
	}
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
		s += "; " + plural.N(len(r.NVSwitches), "NVSwitch")
	}
	return s
}
