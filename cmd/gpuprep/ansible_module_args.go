package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ansibleArgs are a module's arguments as Ansible writes them (see
// ansible_module.go): the task's own, typed as the play gave them (a binary
// module gets no AnsibleModule argument_spec coercion), and Ansible's
// _ansible_* internals, of which gpuprep reads _ansible_check_mode and
// _ansible_diff (action/__init__.py _update_module_args).
type ansibleArgs struct {
	module    string // _gpuprep_module, from the collection's action plugin
	checkMode bool
	diff      bool
	strs      map[string]string
	lists     map[string][]string
	bools     map[string]bool
	raw       map[string]json.RawMessage
	deps      *deps // what the module's commands reach the machine through (nil: realDeps)
}

type ansibleParamKind int

const (
	paramStr ansibleParamKind = iota
	paramList
	paramBool
)

// ansibleParamKinds: every module parameter and its type. The module
// docs (ansible/…/plugins/modules/*.py) list the same.
var ansibleParamKinds = map[string]ansibleParamKind{
	"root": paramStr, "mode": paramStr, "select": paramList, "ignore": paramList, "skip": paramList,
	"nvswitch": paramBool, "vgpu_config_file": paramStr, "vgpu_config": paramStr, "driver": paramStr,
	"kubeconfig": paramStr, "node": paramStr, "force": paramBool,
	"to": paramStr, "force_files": paramBool,
	"before_join": paramBool, "kubeadm_config": paramStr, "system_disk": paramBool,
}

// ansibleParams: the parameters each module takes.
var ansibleParams = map[string][]string{
	"check":    {"root", "mode", "select", "ignore", "skip"},
	"apply":    {"root", "mode", "select", "nvswitch", "vgpu_config_file", "vgpu_config", "driver", "kubeconfig", "node", "force"},
	"rollback": {"root", "system_disk", "to", "force", "force_files", "kubeconfig"},
	"label":    {"root", "system_disk", "mode", "vgpu_config", "node", "kubeconfig", "before_join", "kubeadm_config"},
}

func parseAnsibleArgs(b []byte) (*ansibleArgs, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("module arguments: %v", err)
	}
	a := &ansibleArgs{strs: map[string]string{}, lists: map[string][]string{}, bools: map[string]bool{}, raw: map[string]json.RawMessage{}}
	for k, v := range raw {
		var err error
		switch {
		case k == "_gpuprep_module":
			err = json.Unmarshal(v, &a.module)
		case k == "_ansible_check_mode":
			a.checkMode, err = ansibleBool(v)
		case k == "_ansible_diff":
			a.diff, err = ansibleBool(v)
		case strings.HasPrefix(k, "_ansible_"):
		default:
			a.raw[k] = v
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
	}
	return a, nil
}

// allow takes the task's arguments: each one of names, of its type; any
// other is an error (as AnsibleModule's "Unsupported parameters").
func (a *ansibleArgs) allow(names ...string) error {
	ok := map[string]bool{}
	for _, n := range names {
		ok[n] = true
	}
	var unknown []string
	for k, v := range a.raw {
		if !ok[k] {
			unknown = append(unknown, k)
			continue
		}
		if string(bytes.TrimSpace(v)) == "null" {
			continue // an unset option, as Ansible passes omitted ones
		}
		var err error
		switch ansibleParamKinds[k] {
		case paramStr:
			var s string
			if err = json.Unmarshal(v, &s); err == nil {
				a.strs[k] = s
			}
		case paramList:
			a.lists[k], err = ansibleList(v)
		case paramBool:
			a.bools[k], err = ansibleBool(v)
		}
		if err != nil {
			return fmt.Errorf("argument %s: %v", k, err)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unsupported parameters: %s (supported: %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return nil
}

func (a *ansibleArgs) str(k string) string    { return a.strs[k] }
func (a *ansibleArgs) list(k string) []string { return a.lists[k] }
func (a *ansibleArgs) flag(k string) bool     { return a.bools[k] }

// ansibleList: a list of strings, or one string of comma-separated items
// (as AnsibleModule's type list takes it).
func ansibleList(v json.RawMessage) ([]string, error) {
	var l []string
	if err := json.Unmarshal(v, &l); err == nil {
		return l, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("want a list of strings or a comma-separated string, got %s", v)
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// ansibleBool: a JSON boolean, or a string Ansible takes for one (a
// templated value arrives as a string): the values of
// lib/ansible/module_utils/parsing/convert_bool.py, BOOLEANS_TRUE and
// BOOLEANS_FALSE (ansible-core v2.14.18).
func ansibleBool(v json.RawMessage) (bool, error) {
	var b bool
	if err := json.Unmarshal(v, &b); err == nil {
		return b, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "y", "yes", "on", "1", "true", "t":
			return true, nil
		case "n", "no", "off", "0", "false", "f", "":
			return false, nil
		}
	}
	var n float64
	if err := json.Unmarshal(v, &n); err == nil && (n == 0 || n == 1) {
		return n == 1, nil
	}
	return false, fmt.Errorf("want a boolean, got %s", v)
}
