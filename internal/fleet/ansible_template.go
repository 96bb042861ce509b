package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// templated reports whether a value holds Jinja: {{ … }} or {% … %}.
func templated(v string) bool { return strings.Contains(v, "{{") || strings.Contains(v, "{%") }

// templatedVar returns the first variable gpuprep reads that holds a
// template, by name.
func templatedVar(vars map[string]aVar) (string, aVar, bool) {
	var names []string
	for k, v := range vars {
		if connectionVar(k) && templated(v.val) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return "", aVar{}, false
	}
	sort.Strings(names)
	return names[0], vars[names[0]], true
}

// connectionVar reports whether gpuprep reads variable k.
func connectionVar(k string) bool {
	return strings.HasPrefix(k, "ansible_") || strings.HasPrefix(k, "gpuprep_")
}

// renderTemplates renders the variables gpuprep reads that hold a template
// ("{{ inventory_hostname }}.mgmt", lookups) the way a play would see them:
// Ansible's own debug action, which runs on the controller and contacts no
// host, once per such variable, for the hosts that have it:
// `ansible all -i FILE --limit @LIST -m ansible.builtin.debug -a var=NAME
// -t DIR` (the tree callback writes each host's result to DIR/HOST). A
// value Ansible cannot render is that host's problem.
func renderTemplates(ctx context.Context, r host.Runner, file string, inv *Inventory) error {
	byVar := map[string][]int{}
	for i, vars := range inv.vars {
		for k, v := range vars {
			if connectionVar(k) && templated(v.val) {
				byVar[k] = append(byVar[k], i)
			}
		}
	}
	names := make([]string, 0, len(byVar))
	for k := range byVar {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := renderVar(ctx, r, file, inv, k, byVar[k]); err != nil {
			return err
		}
	}
	return nil
}

// renderVar renders variable k for the hosts at idx.
func renderVar(ctx context.Context, r host.Runner, file string, inv *Inventory, k string, idx []int) error {
	dir, err := os.MkdirTemp("", "gpuprep-ansible-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var limit strings.Builder
	for _, i := range idx {
		limit.WriteString(inv.Hosts[i].Name + "\n") // names were checked: no newline, no control character
	}
	list := filepath.Join(dir, "limit")
	if err := os.WriteFile(list, []byte(limit.String()), 0o600); err != nil {
		return err
	}
	tree := filepath.Join(dir, "tree")
	_, runErr := r.Run(ctx, "env", "ANSIBLE_NOCOLOR=1", "ANSIBLE_GATHERING=explicit", "ansible", "all", "-i", file, "--limit", "@"+list,
		"-m", "ansible.builtin.debug", "-a", "var="+k, "-t", tree)
	for _, i := range idx {
		h := inv.Hosts[i]
		v, why := treeResult(tree, h.Name, k)
		if why != "" {
			if runErr != nil && why == "no result" {
				why = host.OutputTail([]byte(runErr.Error()))
			}
			if h.Problem == "" {
				h.Problem = fmt.Sprintf("%s: host %q: %s %q: Ansible could not render it: %s", file, h.Name, k, inv.vars[i][k].val, why)
			}
			continue
		}
		inv.vars[i][k] = aVar{val: v}
		h.Vars[k] = v
	}
	return nil
}

// treeResult reads what the tree callback wrote for a host: the rendered
// value of k, or why there is none.
func treeResult(tree, name, k string) (string, string) {
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", "no result (its name cannot be a file name)"
	}
	b, err := readBounded(filepath.Join(tree, name), 1<<20)
	if err != nil {
		return "", "no result"
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(b, &res); err != nil {
		return "", "no result"
	}
	if raw, ok := res["failed"]; ok && string(raw) == "true" {
		return "", jsonScalar(res["msg"])
	}
	raw, ok := res[k]
	if !ok {
		return "", "no result"
	}
	v := jsonScalar(raw)
	if v == "VARIABLE IS NOT DEFINED!" || strings.HasPrefix(v, "VARIABLE IS NOT DEFINED!") || templated(v) {
		return "", "it renders as " + fmt.Sprintf("%q", v)
	}
	return v, ""
}
