package report

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"iter"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/preflight"
)

// FleetHTML writes one self-contained HTML page (no scripts, no external
// resources): the fleet-wide view, a table of hosts, and each host's
// findings in a collapsible section, failures open.
// The page is written host by host: the template ranges over the hosts as
// eachHost gives them.
func FleetHTML(w io.Writer, f *FleetReport) error {
	var err error
	b := bufio.NewWriterSize(w, 64<<10)
	if xerr := htmlTmpl().Execute(b, htmlFleet{f, f.hostSeq(&err)}); xerr != nil {
		return xerr
	}
	if err != nil {
		return err
	}
	return b.Flush()
}

// htmlFleet is what the page's template is given: the report, its hosts
// an iterator.
type htmlFleet struct {
	*FleetReport
	Hosts iter.Seq2[int, *FleetHost]
}

// htmlTmpl is parsed on first use, not at start-up: most gpuprep runs never
// write HTML.
var htmlTmpl = sync.OnceValue(func() *template.Template { return parseHTML() })

func parseHTML() *template.Template {
	return template.Must(template.New("fleet").Funcs(template.FuncMap{
		"sentence": func(c CheckSpread) string { return c.Sentence(20) },
		"symbol": func(s preflight.Status) string {
			return map[preflight.Status]string{preflight.Pass: "✓", preflight.Warn: "⚠", preflight.Fail: "✗", preflight.Skip: "–", preflight.Error: "?"}[s]
		},
		"modes": func(ms []preflight.Mode) string {
			s := make([]string, len(ms))
			for i, m := range ms {
				s[i] = string(m)
			}
			return strings.Join(s, ", ")
		},
		"hostID":       func(i int) string { return fmt.Sprintf("host-%d", i) },
		"open":         func(h *FleetHost) bool { return h.Verdict != VerdictReady },
		"orDash":       orDash,
		"blockers":     func(r *Report) string { return strings.Join(blockers(r), ", ") },
		"notEvaluated": func(s FleetSummary) int { return s.Hosts - s.Ready - s.NotReady - s.Unknown },
		"count":        plural.N,
	}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpuprep report{{if .Mode}} — {{.Mode}}{{end}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1b1f24;background:#fff}
h1{font-size:1.4rem;margin:0 0 .3rem} h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0} th,td{border-bottom:1px solid #d8dee4;padding:.35rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa} .ready{color:#1a7f37;font-weight:600} .not-ready{color:#cf222e;font-weight:600} .unknown{color:#8250df;font-weight:600}
.pass{color:#1a7f37} .warn{color:#9a6700} .fail{color:#cf222e;font-weight:600} .skip{color:#6e7781} .error{color:#8250df;font-weight:600}
details{border:1px solid #d8dee4;border-radius:6px;margin:.6rem 0;padding:.3rem .8rem} summary{cursor:pointer;font-weight:600;padding:.2rem 0}
.remedy{color:#57606a;font-size:.92em} code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.92em}
.muted{color:#57606a}
</style></head><body>
<h1>gpuprep readiness report</h1>
<p class="muted">{{count .Summary.Hosts "host"}}{{if .Mode}}, mode <code>{{.Mode}}</code>{{end}}: <span class="ready">{{.Summary.Ready}} ready</span>, <span class="not-ready">{{.Summary.NotReady}} not ready</span>, <span class="unknown">{{.Summary.Unknown}} unknown</span>{{with notEvaluated .Summary}}, <span class="error">{{.}} not evaluated</span>{{end}}{{if .Interrupted}} — interrupted before every host finished{{end}}</p>
{{with .Rollout}}<h2>Rollout</h2><p>Canary {{.Canary}}, then batches of {{.Batch}}; stop when more than {{count .MaxFailures "host"}} failed{{if .RollbackOnFailure}}, rolling failed hosts back{{end}}: {{.Failures}} failed.{{if .Stopped}} <span class="fail">Stopped: {{.Stopped}}</span>{{end}}</p>
<table><thead><tr><th>Host</th><th>Phase</th><th>Outcome</th><th>Reboot / rollback</th></tr></thead><tbody>{{range $i, $h := $.Hosts}}<tr><td>{{.Name}}</td><td>{{.Phase}}</td><td>{{.Outcome}}</td><td>{{.RebootNote}}{{if and .RebootNote .RollbackNote}}; {{end}}{{.RollbackNote}}</td></tr>{{end}}</tbody></table>{{end}}
{{if .Summary.Checks}}<h2>Across the fleet</h2><ul>{{range .Summary.Checks}}<li class="{{.Status}}">{{sentence .}}</li>{{end}}</ul>{{end}}
<h2>Hosts</h2>
<table><thead><tr><th>Host</th><th>Address</th><th>Status</th><th>Verdict</th><th>Blockers</th><th>Summary</th></tr></thead><tbody>
{{range $i, $h := .Hosts}}<tr><td><a href="#{{hostID $i}}">{{$h.Name}}</a></td><td>{{orDash $h.Address}}</td><td>{{$h.Status}}</td>
<td class="{{$h.Verdict}}">{{orDash $h.Verdict}}</td><td>{{if $h.Report}}{{blockers $h.Report}}{{else}}{{$h.Error}}{{end}}</td>
<td>{{with $h.Report}}{{.Summary.Pass}} pass, {{.Summary.Warn}} warn, {{.Summary.Fail}} fail, {{.Summary.Skip}} skip, {{.Summary.Error}} error{{end}}</td></tr>
{{end}}</tbody></table>
{{range $i, $h := .Hosts}}<details id="{{hostID $i}}"{{if open $h}} open{{end}}><summary>{{$h.Name}} — <span class="{{$h.Verdict}}">{{orDash $h.Verdict}}</span></summary>
{{with $h.Report}}<p class="muted">{{.Host.OS}}, kernel {{.Host.Kernel}}{{if .GPUs}}; {{count (len .GPUs) "GPU"}}{{end}}</p>
<table><thead><tr><th></th><th>Check</th><th>Subject</th><th>Finding</th><th>Modes</th></tr></thead><tbody>
{{range .Findings}}<tr><td class="{{.Status}}">{{symbol .Status}}</td><td><code>{{.Check}}</code></td><td><code>{{.Subject}}</code></td>
<td>{{.Message}}{{if and .Remedy (ne .Status "pass")}}<div class="remedy">→ {{.Remedy}}</div>{{end}}</td><td class="muted">{{modes .Modes}}</td></tr>
{{end}}</tbody></table>{{else}}<p class="error">{{$h.Status}}: {{$h.Error}}</p>{{end}}
</details>
{{end}}</body></html>
`))
}
