package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/internal/sanitize"
	"github.com/gpuprep/gpuprep/preflight"
)

// FleetMarkdown writes the fleet report as GitHub-flavoured Markdown, for a
// CI job summary or a pull request comment, host by host.
func FleetMarkdown(w io.Writer, f *FleetReport) error {
	line, err := summaryLine(f)
	if err != nil {
		return err
	}
	b := bufio.NewWriterSize(w, 64<<10)
	if f.Rollout != nil {
		ro := f.Rollout
		fmt.Fprintf(b, "## gpuprep fleet apply\n\nCanary %d, then batches of %d; stop when more than %s failed; %d failed", ro.Canary, ro.Batch, plural.N(ro.MaxFailures, "host"), ro.Failures)
		if ro.Stopped != "" {
			fmt.Fprintf(b, "; **stopped**: %s", mdText(ro.Stopped))
		}
		b.WriteString(".\n\n| host | phase | outcome | reboot / rollback / error |\n|---|---|---|---|\n")
		if err := f.eachHost(func(_ int, h *FleetHost) error {
			detail := joinNotes(joinNotes(h.RebootNote(), h.RollbackNote()), h.Error)
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdText(h.Name), mdText(h.Phase), mdText(h.Outcome), mdText(detail))
			return nil
		}); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	switch {
	case len(f.Command) > 0:
		fmt.Fprintf(b, "## gpuprep fleet run `%s`\n\n", mdCode(strings.Join(f.Command, " ")))
	case f.Rollout == nil:
		fmt.Fprintf(b, "## %s\n\n", mdText(f.title()))
	}
	fmt.Fprintf(b, "**%s**", mdText(line))
	if f.Mode != "" {
		fmt.Fprintf(b, " (mode `%s`)", mdCode(f.Mode))
	}
	b.WriteString("\n\n")
	if f.Interrupted {
		b.WriteString("> **Interrupted**: hosts marked `cancelled` were not (fully) run.\n\n")
	}
	if len(f.Summary.Checks) > 0 {
		b.WriteString("### Across the fleet\n\n")
		for _, c := range f.Summary.Checks {
			fmt.Fprintf(b, "- %s\n", mdText(c.Sentence(20)))
		}
		b.WriteString("\n")
	}
	b.WriteString("### Hosts\n\n")
	if len(f.Command) > 0 {
		b.WriteString("| host | address | status | exit | outcome | output / error |\n|---|---|---|---|---|---|\n")
		err = f.eachHost(func(_ int, h *FleetHost) error { mdRunRow(b, h); return nil })
	} else {
		b.WriteString("| host | address | status | verdict | pass | warn | fail | error | blockers / error |\n|---|---|---|---|--:|--:|--:|--:|---|\n")
		err = f.eachHost(func(_ int, h *FleetHost) error { mdCheckRow(b, h); return nil })
		if err == nil {
			err = f.eachHost(func(_ int, h *FleetHost) error {
				if h.Report != nil {
					mdFindings(b, h)
				}
				return nil
			})
		}
	}
	if err != nil {
		return err
	}
	return b.Flush()
}

// mdRunRow is a fleet run's host in the hosts table.
func mdRunRow(b *bufio.Writer, h *FleetHost) {
	code := "–"
	if h.ExitCode != nil {
		code = fmt.Sprint(*h.ExitCode)
	}
	detail := h.Error
	if h.Status == "evaluated" {
		detail = firstLine(h.Stdout, 120)
		if len(h.Output) > 0 {
			detail = "JSON output"
		}
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", mdText(h.Name), mdText(h.Address), mdText(h.Status), code, mdText(orDash(h.Outcome)), mdText(detail))
}

// mdCheckRow is a fleet check's host in the hosts table.
func mdCheckRow(b *bufio.Writer, h *FleetHost) {
	if h.Report == nil {
		fmt.Fprintf(b, "| %s | %s | %s | – | | | | | %s |\n", mdText(h.Name), mdText(h.Address), mdText(h.Status), mdText(h.Error))
		return
	}
	s := h.Report.Summary
	fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d | %d | %d | %s |\n", mdText(h.Name), mdText(h.Address), mdText(h.Status),
		mdText(verdictIcon(h.Verdict)), s.Pass, s.Warn, s.Fail, s.Error, mdText(strings.Join(blockers(h.Report), ", ")))
}

func verdictIcon(v string) string {
	switch v {
	case VerdictReady:
		return "✅ ready"
	case VerdictNotReady:
		return "❌ not ready"
	}
	return "❔ " + v
}

// mdText is a report's string in Markdown, a table cell's too:
// sanitize.Markdown (one line, metacharacters escaped, no raw HTML).
func mdText(s string) string { return sanitize.Markdown(s) }

// mdCode is a report's string in a code span.
func mdCode(s string) string { return sanitize.MarkdownCode(s) }

// mdFindings writes a host's findings that need attention (failures,
// errors, warnings, skips: the passes are counted in the table) that count
// for its mode, per-device findings that say the same thing merged, in a
// collapsed section; nothing for a host with none.
func mdFindings(b *bufio.Writer, h *FleetHost) {
	var fs []preflight.Finding
	for _, fd := range h.Report.Findings {
		if fd.Status != preflight.Pass && Counts(h.Report, fd) {
			fs = append(fs, fd)
		}
	}
	if len(fs) == 0 {
		return
	}
	// raw HTML, where Markdown is not parsed: HTML-escaped
	fmt.Fprintf(b, "\n<details><summary>%s: %s</summary>\n\n", sanitize.HTML(h.Name), sanitize.HTML(h.Verdict))
	for _, it := range Items(fs, h.Report.GPUAddresses()) {
		fmt.Fprintf(b, "- **%s** `%s` %s: %s", mdText(string(it.Status)), mdCode(it.Check), mdText(it.Subject), mdText(it.Message))
		if it.Remedy != "" {
			fmt.Fprintf(b, " — fix: %s", mdText(it.Remedy))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n</details>\n")
}
