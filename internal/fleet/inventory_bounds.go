package fleet

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

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

// maxYAMLWork bounds the group definitions, host entries and merges (<<:)
// a YAML inventory is read as. An alias (*g) reads the anchored group
// again, as Ansible does, so thirty groups that each list the one before
// twice, under two names, are a billion group definitions in a file of a
// few KiB; mappings that each merge the one before twice are a billion
// merges. A real inventory is read in as many steps as it has groups, host
// lines and merge keys.
const maxYAMLWork = 1_000_000

// spend counts one YAML group, host entry or merge (at node k) against
// maxYAMLWork.
func (a *aInv) spend(k *yaml.Node) error {
	a.work++
	if a.work > maxYAMLWork {
		return &Error{File: a.file, Line: k.Line, Field: k.Value, Msg: fmt.Sprintf("YAML aliases make the inventory more than %d groups, host entries and merges to read", maxYAMLWork)}
	}
	return nil
}
