package fleet

import (
	"context"
	"encoding/json"

	"gopkg.in/yaml.v3"
)

// A saved `ansible-inventory --list` answer (or an inventory script's
// output: the same JSON, _meta.hostvars and each group's hosts and
// children as lists) read as a file. Ansible itself reads this format only
// from an executable (its script plugin, lib/ansible/plugins/inventory/
// script.py, ansible/ansible v2.14.0); given as a plain file its yaml
// plugin refuses it ("Invalid children entry for all group, requires a
// dictionary") and the inventory is empty. gpuprep reads it as
// ansible-inventory's own answer, the way the ansible engine reads the live
// one (fromList), without running anything: what is in it is what
// ansible-inventory had already resolved (group_vars, host_vars,
// precedence), so the hosts are the ones the original inventory gave.
// Templates in it stay unrendered: each is its host's problem.

// isSavedList says whether doc, a file's top YAML/JSON mapping, is a
// --list answer: a _meta mapping with hostvars (a static YAML inventory
// has no group _meta with hostvars: Ansible skips that key there).
func isSavedList(doc *yaml.Node) bool {
	if doc.Kind != yaml.MappingNode || doc.Style&yaml.FlowStyle == 0 {
		return false // JSON is a flow mapping
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "_meta" || doc.Content[i+1].Kind != yaml.MappingNode {
			continue
		}
		m := doc.Content[i+1]
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == "hostvars" {
				return true
			}
		}
	}
	return false
}

// parseSavedList reads a saved --list answer (see above).
func parseSavedList(file string, data []byte) (*Inventory, error) {
	if !json.Valid(data) {
		return nil, &Error{File: file, Msg: "_meta.hostvars: an ansible-inventory --list answer, but not valid JSON"}
	}
	return fromList(context.Background(), nil, file, data, "ansible-list")
}
