package fleet

import "fmt"

// maxInventoryHosts bounds the hosts of one inventory, after host ranges
// are expanded: the same bound as one range's (maxRangeHosts), so a file of
// many such lines (each a few bytes that make 100000 hosts) is refused at the
// line that passes it instead of taking the memory and the CPU. A fleet of
// 100000 GPU nodes is beyond the largest clusters built.
const maxInventoryHosts = maxRangeHosts

// roomFor refuses a host pattern (at line) whose new hosts would take the
// inventory past maxInventoryHosts.
func (a *aInv) roomFor(names []string, line int, field string) error {
	n := len(a.hosts)
	for _, h := range names {
		if a.hosts[h] == nil {
			n++
		}
	}
	if n > maxInventoryHosts {
		return &Error{File: a.file, Line: line, Field: field, Msg: fmt.Sprintf("the inventory would have %d hosts, more than %d", n, maxInventoryHosts)}
	}
	return nil
}
