package report

import "fmt"

// Bounds on the fields of a saved report that the text formats align in
// columns. Every row is padded to the widest cell of its column, so a report
// of 2000 hosts with one name of 100 KB rendered as 200 MB of text; with
// 100000 hosts and a megabyte it would be 100 GB. gpuprep writes host names
// of at most 253 bytes (a DNS name; fleet inventories refuse longer), and
// statuses, verdicts, outcomes, phases and check names of a few words.
const (
	maxHostField = 253
	maxWordField = 64
)

// checkWidths refuses a report (read from name) with a column field past
// its bound, naming the field.
func checkWidths(name string, d *Document) error {
	if d.Host != nil {
		return checkHost(name, "", d.Host)
	}
	for i, h := range d.Fleet.Hosts {
		at := fmt.Sprintf("hosts[%d].", i)
		for _, f := range []struct {
			field, v string
			max      int
		}{
			{"name", h.Name, maxHostField}, {"address", h.Address, maxHostField}, {"status", h.Status, maxWordField},
			{"verdict", h.Verdict, maxWordField}, {"outcome", h.Outcome, maxWordField}, {"phase", h.Phase, maxWordField},
			{"mode", h.Mode, maxWordField},
		} {
			if err := fieldWidth(name, at+f.field, f.v, f.max); err != nil {
				return err
			}
		}
		if h.Report != nil {
			if err := checkHost(name, at+"report.", h.Report); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHost bounds a host report's aligned fields: its findings' check names.
func checkHost(name, at string, r *Report) error {
	for i, f := range r.Findings {
		if err := fieldWidth(name, fmt.Sprintf("%sfindings[%d].check", at, i), f.Check, maxWordField); err != nil {
			return err
		}
	}
	return nil
}

func fieldWidth(name, field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%s: %s: %d bytes, more than %d: not a report gpuprep wrote", name, field, len(v), max)
	}
	return nil
}
