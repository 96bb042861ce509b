package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// An inventory directory (-i inventory/), read as Ansible's
// InventoryManager.parse_source reads one (ansible/ansible v2.14.0,
// lib/ansible/inventory/manager.py): its entries in sorted order, a
// subdirectory where it sorts, each file an inventory of its own merged
// into one (a later file's variable of a group or host replaces an
// earlier's); passed over are names that start with ".", group_vars,
// host_vars and vars_plugins, and names ending in one of
// INVENTORY_IGNORE_EXTS (lib/ansible/config/base.yml: REJECT_EXTS of
// lib/ansible/constants.py, then .orig, .ini, .cfg, .retry): a hosts.ini in
// an inventory directory is not read. Its own group_vars/ and host_vars/
// apply (not those of a subdirectory). A file with no extension or .yml,
// .yaml or .json is YAML (else INI, as Parse reads one); any other file is
// INI, as Ansible's ini plugin takes what its yaml plugin does not. An
// executable file (an inventory script) or a plugin configuration is for
// Ansible alone (needsAnsible).

// inventoryIgnored is InventoryManager's IGNORED with the default
// INVENTORY_IGNORE_EXTS and no INVENTORY_IGNORE_PATTERNS, searched in an
// entry's name.
var inventoryIgnored = lazyRegexp(`^\.|^host_vars$|^group_vars$|^vars_plugins$|` +
	`\.pyc$|\.pyo$|\.swp$|\.bak$|~$|\.rpm$|\.md$|\.txt$|\.rst$|\.orig$|\.ini$|\.cfg$|\.retry$`)

// inventoryDirFiles lists the files of an inventory directory Ansible
// reads, in its order.
func inventoryDirFiles(dir string) ([]string, error) {
	var out []string
	n := 0
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		if depth > maxVarsDepth {
			return &Error{File: d, Msg: fmt.Sprintf("directories nested more than %d deep (a link to a directory above?): not read", maxVarsDepth)}
		}
		ents, err := os.ReadDir(d) // sorted by name
		if err != nil {
			return &Error{File: d, Msg: err.Error()}
		}
		for _, e := range ents {
			if n++; n > maxTrustEntries {
				return &Error{File: dir, Msg: fmt.Sprintf("more than %d entries: not read", maxTrustEntries)}
			}
			if inventoryIgnored().MatchString(e.Name()) {
				continue
			}
			p := filepath.Join(d, e.Name())
			fi, err := os.Stat(p)
			if err != nil {
				return &Error{File: p, Msg: err.Error()}
			}
			if fi.IsDir() {
				if err := walk(p, depth+1); err != nil {
					return err
				}
				continue
			}
			out = append(out, p)
		}
		return nil
	}
	return out, walk(dir, 0)
}

// parseDir reads an inventory directory with gpuprep's own reader.
func parseDir(dir string) (*Inventory, error) {
	files, err := inventoryDirFiles(dir)
	if err != nil {
		return nil, err
	}
	a := newAInv(dir, "ansible-dir")
	total := 0
	for _, f := range files {
		data, err := readRegular(f, maxInventoryFile)
		if err != nil {
			return nil, err
		}
		if total += len(data); total > maxInventoryFile {
			return nil, &Error{File: f, Msg: fmt.Sprintf("the inventory directory's files hold more than %d bytes: more than gpuprep reads", maxInventoryFile)}
		}
		if err := a.readSource(f, data); err != nil {
			return nil, err
		}
	}
	a.file = dir
	if a.groups["all"] == nil {
		a.group("all", 0)
		a.group("ungrouped", 0)
	}
	if a.vdirs, err = openVarsDirs(dir); err != nil {
		return nil, err
	}
	finishImplicit(a)
	inv, err := a.resolve()
	if err != nil {
		return nil, err
	}
	return checkParsed(dir, inv)
}

// readSource reads one file of an inventory directory into a.
func (a *aInv) readSource(f string, data []byte) error {
	switch strings.ToLower(filepath.Ext(f)) {
	case "", ".yml", ".yaml", ".json":
	default:
		return a.readINI(f, data)
	}
	var doc yaml.Node
	yerr := yaml.Unmarshal(data, &doc)
	if yerr == nil && len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		switch {
		case isSavedList(m):
			return &Error{File: f, Msg: "an ansible-inventory --list answer in an inventory directory: Ansible's yaml plugin refuses it there (give the file alone with -i)"}
		case isGpuprep(m):
			return &Error{File: f, Msg: "gpuprep's own inventory format in an inventory directory: Ansible does not read it (give the file alone with -i)"}
		}
		return a.readYAML(f, m)
	}
	if looksYAML(f, data) {
		return notYAMLInventory(f, data, &doc, yerr)
	}
	return a.readINI(f, data)
}
