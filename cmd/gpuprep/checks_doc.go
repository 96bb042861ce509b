package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpuprep/gpuprep/preflight"
)

// checksDocHeader opens docs/checks.md, which `gpuprep checks -o markdown`
// writes from the registry (TestChecksDocUpToDate keeps it so).
const checksDocHeader = `# gpuprep's checks

<!-- Generated from the check registry (preflight.All) by ` + "`gpuprep checks -o markdown`" + `:
do not edit; go test ./cmd/gpuprep -run TestChecksDocUpToDate -update rewrites it. -->

Every check ` + "`gpuprep check`" + ` runs, with its stable ID (for ` + "`--skip`" + ` and ` + "`--ignore`" + `), the modes
it counts for, what it verifies and reads, why it matters, which ` + "`gpuprep apply`" + ` steps change its
verdict, and the usual remedies (each finding names its own). A fail of a check no planned step
changes is listed by ` + "`gpuprep plan`" + ` as not ready after apply.
`

// modesText is a check's modes, "all" for every mode.
func modesText(ms []preflight.Mode) string {
	if len(ms) == len(preflight.Modes) {
		return "all"
	}
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// changedByText says what in a plan changes c's verdict.
func changedByText(c preflight.Check) string {
	switch {
	case c.Beyond == preflight.BeyondPlan:
		return "no step: beyond what a plan changes (the hardware, the firmware, the kernel's build)"
	case c.Beyond == preflight.BeyondUnlessReboot:
		return strings.Join(c.ChangedBy, ", ") + " (only by rebooting into new kernel arguments)"
	case len(c.ChangedBy) == 0:
		return "no step"
	}
	return strings.Join(c.ChangedBy, ", ")
}

// writeCheckDoc writes one check's description for a terminal.
func writeCheckDoc(w io.Writer, c preflight.Check) {
	fmt.Fprintf(w, "%s — %s\n  modes:      %s\n  verifies:   %s\n  reads:      %s\n  matters:    %s\n  changed by: %s\n",
		c.ID, c.Title, modesText(c.Modes), c.Doc.Verifies, c.Doc.Reads, c.Doc.Matters, changedByText(c))
	for _, r := range c.Remedies {
		fmt.Fprintf(w, "  remedy:     %s\n", r)
	}
}

// writeChecksMarkdown writes docs/checks.md: a table of every check, then
// a section per check.
func writeChecksMarkdown(w io.Writer, checks []preflight.Check) error {
	var b strings.Builder
	b.WriteString(checksDocHeader)
	b.WriteString("\n| ID | title | modes | changed by |\n| --- | --- | --- | --- |\n")
	for _, c := range checks {
		by := strings.Join(c.ChangedBy, ", ")
		switch c.Beyond {
		case preflight.BeyondPlan:
			by = "beyond a plan"
		case preflight.BeyondUnlessReboot:
			by += " (the reboot)"
		}
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s |\n", c.ID, mdAnchor(c.ID), c.Title, modesText(c.Modes), by)
	}
	for _, c := range checks {
		fmt.Fprintf(&b, "\n## `%s`\n\n%s. Modes: %s.\n\n- **Verifies:** %s\n- **Reads:** %s\n- **Why it matters:** %s\n- **Changed by:** %s\n",
			c.ID, c.Title, modesText(c.Modes), c.Doc.Verifies, c.Doc.Reads, c.Doc.Matters, changedByText(c))
		for _, r := range c.Remedies {
			fmt.Fprintf(&b, "- **Remedy:** %s\n", r)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdAnchor is the heading anchor GitHub makes for "## `id`": lower case,
// punctuation other than - and _ dropped.
func mdAnchor(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// namedChecks are the registered checks with these IDs, in registry
// order; every check when none is named.
func namedChecks(ids []string) ([]preflight.Check, error) {
	if len(ids) == 0 {
		return preflight.All(), nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		if _, ok := preflight.Lookup(id); !ok {
			return nil, usageErr("%s: no such check (gpuprep checks lists them)", id)
		}
		want[id] = true
	}
	var out []preflight.Check
	for _, c := range preflight.All() {
		if want[c.ID] {
			out = append(out, c)
		}
	}
	return out, nil
}

// writeCheckDocs describes each check, a blank line between them.
func writeCheckDocs(w io.Writer, checks []preflight.Check) error {
	for i, c := range checks {
		if i > 0 {
			fmt.Fprintln(w)
		}
		writeCheckDoc(w, c)
	}
	return nil
}

// changedByShort is the table's CHANGED BY column: the steps, or "-" for
// a check beyond any plan.
func changedByShort(steps []string, beyond preflight.Beyond) string {
	if beyond == preflight.BeyondPlan || len(steps) == 0 {
		return "-"
	}
	return strings.Join(steps, ",")
}
