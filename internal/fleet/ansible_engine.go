package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Inventory engines: how an Ansible inventory is read.
const (
	EngineAuto    = "auto"    // ansible-inventory where installed, else gpuprep's reader
	EngineAnsible = "ansible" // ansible-inventory, or an error
	EngineGpuprep = "gpuprep" // gpuprep's own INI/YAML reader
)

// LoadOptions say how to read an inventory.
type LoadOptions struct {
	Engine string      // EngineAuto ("" too), EngineAnsible or EngineGpuprep
	Runner host.Runner // runs ansible-inventory and ansible (nil: host.ExecRunner{})
}

// LoadWith reads an inventory as Load does, with group_vars/ and host_vars/
// beside it, or an inventory directory; or where only Ansible can read it,
// by `ansible-inventory -i FILE --list`, which does all of Ansible's own
// work: executable inventory scripts, inventory plugins (a YAML file with
// plugin:), and connection variables holding a template, which ansible
// itself renders (renderTemplates).
//
// Engine auto reads a static inventory file with gpuprep's own reader,
// which ansible_oracle_test.go holds equal to ansible-inventory, and which
// names the file and line of what it refuses; it hands the inventory to
// ansible-inventory where that is installed and the inventory holds any of
// the above, group_vars/ or host_vars/, or is a directory. Engine ansible
// always does; engine gpuprep never does: it reads group_vars/, host_vars/
// and directories itself (ansible_varsdirs.go, ansible_dir.go), says per
// host which values it could not resolve (a template, a vault), and
// refuses what only Ansible reads rather than contacting hosts at addresses
// Ansible would not use. gpuprep's own inventory format is read by gpuprep.
// Inventory.Note says which engine read it.
func LoadWith(file string, o LoadOptions) (*Inventory, error) {
	r := o.Runner
	if r == nil {
		r = host.ExecRunner{}
	}
	engine := o.Engine
	if engine == "" {
		engine = EngineAuto
	}
	st, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	ansibleInstalled := sync.OnceValue(func() bool { return ansibleInstalled(r) }) // asked once
	byAnsible := func(why string) (*Inventory, error) {
		return noted(loadByAnsible(context.Background(), r, file))("read by ansible-inventory (" + why + ")")
	}
	if engine == EngineAnsible {
		return byAnsible("--inventory-engine ansible")
	}
	if why := needsAnsible(file, st); why != "" {
		if engine == EngineGpuprep || !ansibleInstalled() {
			return nil, refuseOwn(file, why, engine)
		}
		return byAnsible(why)
	}
	return loadOwnElseAnsible(file, st, engine, ansibleInstalled, byAnsible)
}

// loadOwnElseAnsible reads an inventory that needs no inventory script or
// plugin: with gpuprep's own reader, or under engine auto, where
// ansible-inventory is installed, by it when the inventory has group_vars/,
// host_vars/, is a directory, or holds a template.
func loadOwnElseAnsible(file string, st os.FileInfo, engine string, installed func() bool, byAnsible func(string) (*Inventory, error)) (*Inventory, error) {
	extra := ownExtras(file, st)
	if extra != "" && engine == EngineAuto && installed() {
		return byAnsible(extra)
	}
	inv, err := loadOwn(file, st)
	if err != nil || inv.Format == "gpuprep" {
		return inv, err
	}
	if inv.Format != "ansible-list" && engine == EngineAuto && anyTemplate(inv) && installed() {
		return byAnsible("a template in a connection variable") // rendered by Ansible, as a play would see it
	}
	inv.Note = ownNote(inv, extra, engine)
	return inv, nil
}

// noted sets the Note of an inventory read by ansible-inventory.
func noted(inv *Inventory, err error) func(string) (*Inventory, error) {
	return func(note string) (*Inventory, error) {
		if err != nil {
			return nil, err
		}
		inv.Note = note
		return inv, nil
	}
}

// refuseOwn is the error for what only Ansible reads, without Ansible.
func refuseOwn(file, why, engine string) error {
	how := "is not installed (install ansible-core, or write the hosts in gpuprep's inventory format)"
	if engine == EngineGpuprep {
		how = "is not used (--inventory-engine gpuprep)"
	}
	return &Error{File: file, Msg: why + ": gpuprep's own reader does not apply it, and ansible-inventory " + how + "; refusing rather than contacting hosts at addresses Ansible would not use"}
}

// loadOwn reads an inventory with gpuprep's own reader: a directory, or a
// file with group_vars/ and host_vars/ beside it.
func loadOwn(file string, st os.FileInfo) (*Inventory, error) {
	if st.IsDir() {
		return parseDir(file)
	}
	data, err := readBounded(file, maxInventoryFile)
	if err != nil {
		return nil, err
	}
	vd, err := openVarsDirs(filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	return parseWith(file, data, vd)
}

// ownExtras says what of an inventory gpuprep's own reader reads beyond
// one file ("" for nothing): an inventory directory, group_vars/ or
// host_vars/ beside the file.
func ownExtras(file string, st os.FileInfo) string {
	base := filepath.Dir(file)
	what := ""
	if st.IsDir() {
		base, what = file, "an inventory directory"
	}
	var dirs []string
	for _, d := range []string{"group_vars", "host_vars"} {
		if _, err := os.Stat(filepath.Join(base, d)); err == nil {
			dirs = append(dirs, d+"/")
		}
	}
	if len(dirs) > 0 {
		beside := strings.Join(dirs, " and ") + " beside the inventory"
		if what != "" {
			beside = what + " with " + strings.Join(dirs, " and ")
		}
		what = beside
	}
	return what
}

// ownNote is the Note of an inventory gpuprep's own reader read.
func ownNote(inv *Inventory, extra, engine string) string {
	why := "ansible-inventory is not installed"
	if engine == EngineGpuprep {
		why = "--inventory-engine gpuprep"
	}
	switch {
	case inv.Format == "ansible-list":
		return "read by gpuprep's own reader (a saved ansible-inventory --list answer)"
	case extra != "":
		return "read by gpuprep's own reader (" + why + "), " + extra + " read with Ansible's rules and precedence"
	case engine == EngineGpuprep:
		return "read by gpuprep's own reader (--inventory-engine gpuprep)"
	}
	return "read by gpuprep's own reader"
}

// anyTemplate reports whether a host was left with a template to render.
func anyTemplate(inv *Inventory) bool {
	for _, h := range inv.Hosts {
		if strings.Contains(h.Problem, "is a template") {
			return true
		}
	}
	return false
}

// ansibleInstalled reports whether ansible-inventory can be run.
func ansibleInstalled(r host.Runner) bool {
	_, err := r.Run(context.Background(), "ansible-inventory", "--version")
	var ee *exec.Error
	return !errors.As(err, &ee)
}

// needsAnsible says what in an inventory only Ansible's reader applies: an
// executable file (Ansible's script plugin runs it, before any other plugin
// reads it) or an inventory plugin's configuration, given or in the
// inventory directory; "" when none.
func needsAnsible(file string, st os.FileInfo) string {
	if !st.IsDir() {
		return onlyAnsible(file, st)
	}
	files, err := inventoryDirFiles(file)
	if err != nil {
		return "" // gpuprep's reader says what is wrong with it
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			if why := onlyAnsible(f, fi); why != "" {
				return why + " in the inventory directory: " + f
			}
		}
	}
	return ""
}

// onlyAnsible says why Ansible alone reads one inventory file.
func onlyAnsible(file string, st os.FileInfo) string {
	if !st.Mode().IsRegular() {
		return "" // a pipe is read once, by the reader
	}
	if st.Mode().Perm()&0o111 != 0 {
		return "an executable inventory (Ansible runs it as an inventory script)"
	}
	if p := pluginConfig(file); p != "" {
		return "an inventory plugin's configuration (plugin: " + p + ")"
	}
	return ""
}

// pluginConfig returns the plugin a YAML inventory names at its top level
// (plugin: netbox.netbox.nb_inventory), which Ansible's auto plugin hands
// to that plugin; "" for anything else.
func pluginConfig(file string) string {
	data, err := readBounded(file, maxInventoryFile)
	if err != nil {
		return ""
	}
	var doc struct {
		Plugin any `yaml:"plugin"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return ""
	}
	if s, ok := doc.Plugin.(string); ok {
		return s
	}
	return ""
}

// inventoryList is ansible-inventory --list's JSON: _meta.hostvars, and for
// each group its hosts and children.
type inventoryList map[string]json.RawMessage

type ansibleGroup struct {
	Hosts    []string `json:"hosts"`
	Children []string `json:"children"`
}

// loadByAnsible runs ansible-inventory and turns its answer into hosts.
func loadByAnsible(ctx context.Context, r host.Runner, file string) (*Inventory, error) {
	if err := checkAnsibleInventory(file); err != nil {
		return nil, &Error{File: file, Msg: "not handed to ansible-inventory, which would run its scripts and plugins as root: " + err.Error()}
	}
	// env(1) sets what makes an unreadable source an error, not a
	// warning with an empty inventory; argv only, no shell.
	out, err := r.Run(ctx, "env", "ANSIBLE_INVENTORY_UNPARSED_FAILED=True", "ANSIBLE_NOCOLOR=1", "ansible-inventory", "-i", file, "--list")
	if err != nil {
		return nil, &Error{File: file, Msg: "ansible-inventory: " + host.OutputTail([]byte(err.Error()))}
	}
	if len(out) > maxInventoryFile {
		return nil, &Error{File: file, Msg: fmt.Sprintf("ansible-inventory printed %d bytes: more than an inventory gpuprep reads (%d)", len(out), maxInventoryFile)}
	}
	return fromList(ctx, r, file, out, "ansible-inventory")
}

// fromList turns ansible-inventory --list's JSON into hosts: format
// "ansible-inventory" for its live answer, whose templates Ansible then
// renders (renderTemplates); "ansible-list" for a saved answer read without
// Ansible (see parseSavedList), where a template is the host's problem.
func fromList(ctx context.Context, r host.Runner, file string, out []byte, format string) (*Inventory, error) {
	groups, hostvars, err := parseList(file, out)
	if err != nil {
		return nil, err
	}
	order, member := walkGroups(groups)
	inv := &Inventory{File: file, Format: format}
	for _, name := range order {
		if msg := hostNameProblem(name); msg != "" {
			return nil, &Error{File: file, Field: "name", Msg: msg}
		}
		h := &Host{Name: name, Source: file, Vars: map[string]string{}}
		for g := range member[name] {
			if g != "all" {
				h.Groups = append(h.Groups, g)
			}
		}
		sort.Strings(h.Groups)
		vars := listVars(h, hostvars[name])
		inv.Hosts = append(inv.Hosts, h)
		inv.vars = append(inv.vars, vars)
	}
	if format == "ansible-inventory" {
		if err := renderTemplates(ctx, r, file, inv); err != nil {
			return nil, err
		}
	}
	a := &aInv{file: file, format: inv.Format}
	for i, h := range inv.Hosts {
		if h.Problem != "" {
			continue
		}
		if err := a.applyVars(h, inv.vars[i]); err != nil {
			h.Problem = err.Error()
		}
	}
	inv.vars = nil
	if len(inv.Hosts) == 0 {
		return nil, &Error{File: file, Msg: "no hosts (the --list JSON lists none)"}
	}
	validateListHosts(file, inv)
	return inv, nil
}

// parseList reads ansible-inventory --list's JSON: its groups, and the
// hosts' variables (_meta.hostvars).
func parseList(file string, out []byte) (map[string]ansibleGroup, map[string]map[string]json.RawMessage, error) {
	var list inventoryList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, nil, &Error{File: file, Msg: "ansible-inventory --list: not its JSON: " + err.Error()}
	}
	groups := map[string]ansibleGroup{}
	for name, raw := range list {
		if name == "_meta" {
			continue
		}
		var g ansibleGroup
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, nil, &Error{File: file, Msg: fmt.Sprintf("ansible-inventory --list: group %q: %v", name, err)}
		}
		groups[name] = g
	}
	var meta struct {
		Hostvars map[string]map[string]json.RawMessage `json:"hostvars"`
	}
	if raw, ok := list["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, nil, &Error{File: file, Msg: "ansible-inventory --list: _meta: " + err.Error()}
		}
	}
	return groups, meta.Hostvars, nil
}

// validateListHosts gives each host without an address its name as one,
// and a host that fails validateHost that error as its problem.
func validateListHosts(file string, inv *Inventory) {
	for _, h := range inv.Hosts {
		if h.Address == "" {
			h.Address = h.Name
		}
		if h.Problem != "" {
			continue
		}
		if err := validateHost(file, h); err != nil {
			h.Problem = err.Error()
		}
	}
}

// walkGroups lists the hosts in the order ansible-inventory --list shows
// them (from all, each group's hosts, then its children, depth first) and
// the groups each is in, through children too.
func walkGroups(groups map[string]ansibleGroup) (order []string, member map[string]map[string]bool) {
	member = map[string]map[string]bool{}
	seen := map[string]bool{}
	var walk func(g string, up []string)
	walk = func(g string, up []string) {
		if seen[g] {
			for _, h := range hostsUnder(groups, g, map[string]bool{}) {
				for _, u := range up {
					member[h][u] = true
				}
			}
			return
		}
		seen[g] = true
		up = append(up, g)
		for _, h := range groups[g].Hosts {
			if member[h] == nil {
				member[h] = map[string]bool{}
				order = append(order, h)
			}
			for _, u := range up {
				member[h][u] = true
			}
		}
		for _, c := range groups[g].Children {
			walk(c, up)
		}
	}
	walk("all", nil)
	return order, member
}

// hostsUnder lists the hosts in group g and its descendants.
func hostsUnder(groups map[string]ansibleGroup, g string, on map[string]bool) []string {
	if on[g] {
		return nil
	}
	on[g] = true
	out := append([]string{}, groups[g].Hosts...)
	for _, c := range groups[g].Children {
		out = append(out, hostsUnder(groups, c, on)...)
	}
	return out
}

// jsonScalar is a variable's value as "{{ var }}" renders it: a string as
// it is, a number as written, a boolean True or False, null empty, a list
// or mapping as compact JSON.
func jsonScalar(raw json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(raw)
	}
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		if v {
			return "True"
		}
		return "False"
	case json.Number:
		return v.String()
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// listVars are a host's variables in a --list answer, each also in
// h.Vars as "{{ var }}" renders it; a !vault value is none.
func listVars(h *Host, hostvars map[string]json.RawMessage) map[string]aVar {
	vars := map[string]aVar{}
	for k, raw := range hostvars {
		if isVaultJSON(raw) { // {"__ansible_vault": …}: encrypted, no value
			vars[k] = aVar{vault: true}
			continue
		}
		v := jsonScalar(raw)
		h.Vars[k] = v
		vars[k] = aVar{val: v}
	}
	return vars
}

// isVaultJSON reports whether a --list value is a !vault value, as
// ansible-inventory writes one it has not decrypted.
func isVaultJSON(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 {
		return false
	}
	_, ok := m["__ansible_vault"]
	return ok
}
