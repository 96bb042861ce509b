package fleet

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// precedence merges a host's variables as Ansible's VariableManager.get_vars
// does (ansible/ansible v2.14.0, lib/ansible/vars/manager.py, in the order
// of VARIABLE_PRECEDENCE's default in lib/ansible/config/base.yml), each
// later layer replacing a variable of an earlier one:
//
//  1. all's variables in the inventory file, then every other group's, from
//     the least specific (gs: by depth, ansible_group_priority, name);
//  2. group_vars/all, then group_vars/GROUP of the same groups in the same
//     order: so group_vars/all beats [gpu:vars] of the inventory file;
//  3. the host's variables in the inventory file;
//  4. host_vars/HOST.
//
// ansible_group_priority orders groups only where the inventory file sets
// it; in group_vars it is an ordinary variable (Group.set_variable is not
// called for it). problem is a vault-encrypted file the host reads.
func (a *aInv) precedence(ah *aHost, gs []string) (map[string]aVar, string, error) {
	vars := map[string]aVar{}
	put := func(m map[string]aVar) {
		for k, v := range m {
			vars[k] = v
		}
	}
	for _, g := range gs {
		if grp := a.groups[g]; grp != nil {
			put(grp.vars)
		}
	}
	problem := ""
	if a.vdirs != nil {
		for _, g := range gs {
			m, p, err := a.vdirs.entity("group_vars", g)
			if err != nil {
				return nil, "", a.entityError("group", g, err)
			}
			put(m)
			problem = firstOf(problem, p)
		}
	}
	put(ah.vars)
	if a.vdirs != nil {
		m, p, err := a.vdirs.entity("host_vars", ah.name)
		if err != nil {
			return nil, "", a.entityError("host", ah.name, err)
		}
		put(m)
		problem = firstOf(problem, p)
	}
	if problem != "" {
		problem = fmt.Sprintf("host %q: %s", ah.name, problem)
	}
	return vars, problem, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// entityError names where a group or host whose vars file could not be
// read is defined, unless err names a file itself.
func (a *aInv) entityError(kind, name string, err error) error {
	if _, ok := err.(*Error); ok {
		return err
	}
	file, line := a.file, 0
	if kind == "group" && a.groups[name] != nil {
		file, line = a.groups[name].file, a.groups[name].line
	} else if h := a.hosts[name]; kind == "host" && h != nil {
		file, line = h.file, h.line
	}
	return &Error{File: file, Line: line, Field: kind, Msg: err.Error()}
}

// at is the file that sets v.
func (a *aInv) at(v aVar) string {
	if v.file != "" {
		return v.file
	}
	return a.file
}

// readVars are the ansible_* variables gpuprep reads (applyVars).
var readVars = map[string]bool{
	"ansible_host": true, "ansible_ssh_host": true, "ansible_port": true, "ansible_ssh_port": true,
	"ansible_user": true, "ansible_ssh_user": true, "ansible_private_key_file": true, "ansible_ssh_private_key_file": true,
	"ansible_connection": true, "ansible_ssh_args": true, "ansible_ssh_common_args": true, "ansible_ssh_extra_args": true,
}

// vaultedVar returns the first variable gpuprep reads (readVars, gpuprep_*)
// that holds a !vault value, by name. Another one (a vaulted
// ansible_become_password) is left out of the host's Vars: gpuprep does
// not use it, and has no value for it.
func vaultedVar(vars map[string]aVar) (string, aVar, bool) {
	var names []string
	for k, v := range vars {
		if v.vault && (readVars[k] || strings.HasPrefix(k, "gpuprep_")) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return "", aVar{}, false
	}
	sort.Strings(names)
	return names[0], vars[names[0]], true
}

// unresolved is a host's problem with a variable gpuprep reads that its own
// reader cannot resolve: a !vault value (Ansible would decrypt it), a
// template (Ansible would render it); "" for none.
func (a *aInv) unresolved(name string, vars map[string]aVar) string {
	if k, v, ok := vaultedVar(vars); ok {
		return (&Error{File: a.at(v), Line: v.line, Field: k, Msg: fmt.Sprintf("host %q: a !vault value (encrypted): gpuprep's own reader has no vault password and cannot resolve it; with ansible-inventory installed (ansible-core) and the vault password configured, --inventory-engine auto or ansible has Ansible read it", name)}).Error()
	}
	if k, v, ok := templatedVar(vars); ok {
		return (&Error{File: a.at(v), Line: v.line, Field: k, Msg: fmt.Sprintf("host %q: %q is a template: gpuprep's own reader renders no Jinja; with ansible-inventory installed (ansible-core), --inventory-engine auto or ansible has Ansible render it", name, v.val)}).Error()
	}
	return ""
}

// setBy makes an error about a variable (its Field) name the file that
// sets it.
func (a *aInv) setBy(err error, vars map[string]aVar) error {
	var e *Error
	if errors.As(err, &e) {
		if v, ok := vars[e.Field]; ok {
			e.File = a.at(v)
		}
	}
	return err
}
