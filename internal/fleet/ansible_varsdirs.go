package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/yamlpos"
)

// group_vars/ and host_vars/ beside an inventory, read as Ansible's vars
// plugin host_group_vars reads them (ansible/ansible v2.14.0,
// lib/ansible/plugins/vars/host_group_vars.py, and DataLoader.find_vars_files
// and _get_dir_vars_files in lib/ansible/parsing/dataloader.py):
//
//   - For a group or host NAME, the first of NAME, NAME.yml, NAME.yaml and
//     NAME.json that exists is read, and no other: NAME/ (a directory)
//     before NAME.yml.
//   - A directory's entries are read in sorted order, depth first: a
//     subdirectory without an extension is read where it sorts; a file
//     without an extension or with .yml, .yaml or .json is read; a name
//     that starts with "." or ends with "~" is passed over, and so is
//     anything else (a.d/, x.txt, a FIFO).
//   - Each file is YAML or JSON (a mapping of variables; an empty file sets
//     none); the later file's variable replaces the earlier's (hash_behaviour
//     replace: a mapping is replaced whole, not merged).
//   - The directory is the inventory file's own, or the inventory
//     directory itself (lib/ansible/vars/plugins.py,
//     get_vars_from_inventory_sources); group_vars/ beside a playbook is
//     not an inventory's and is not read.
//
// Deliberate differences, each an error naming the file (and line): a file
// or directory outside the inventory's directory (through a symbolic link,
// or a group named ../x), a NAME that is not a regular file (a FIFO, which
// Ansible would block on reading), a file of more than maxVarsFile bytes,
// and group_vars or host_vars that is not a directory (Ansible warns and
// passes over it). A vault-encrypted file (Ansible stops without its
// password) is the problem of each host that reads it; a !vault value is
// the problem of a host gpuprep reads it for (vaultedVar).

// Bounds on what group_vars/ and host_vars/ are read as.
const (
	maxVarsFile    = 8 << 20          // one file
	maxVarsTotal   = maxInventoryFile // all files together
	maxVarsEntries = maxTrustEntries  // directory entries looked at
	maxVarsDepth   = 16               // nested directories
)

// varsExts are the extensions Ansible looks for (YAML_FILENAME_EXTENSIONS),
// after the bare name.
var varsExts = []string{"", ".yml", ".yaml", ".json"}

// varsDirs reads group_vars/ and host_vars/ of one inventory directory.
type varsDirs struct {
	root    string            // the inventory's directory, symbolic links resolved
	dirs    map[string]string // group_vars, host_vars -> its path ("": none)
	cache   map[string]varsFile
	entries int   // directory entries looked at
	total   int64 // bytes read
}

// varsFile is one vars file read: its variables, or why none are known.
type varsFile struct {
	vars    map[string]aVar
	problem string // a vault-encrypted file: its variables are not known
}

// openVarsDirs looks for group_vars/ and host_vars/ in base, the inventory
// file's directory or the inventory directory; nil when there are none.
func openVarsDirs(base string) (*varsDirs, error) {
	root, err := filepath.EvalSymlinks(base)
	if err != nil {
		return nil, err
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	v := &varsDirs{root: root, dirs: map[string]string{}, cache: map[string]varsFile{}}
	for _, d := range []string{"group_vars", "host_vars"} {
		p := filepath.Join(base, d)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, &Error{File: p, Msg: err.Error()}
		case !fi.IsDir():
			return nil, &Error{File: p, Msg: "not a directory (Ansible warns and passes over it; gpuprep does not guess which variables were meant)"}
		}
		if err := v.inside(p); err != nil {
			return nil, err
		}
		v.dirs[d] = p
	}
	if len(v.dirs) == 0 {
		return nil, nil
	}
	return v, nil
}

// inside refuses p when it resolves outside the inventory's directory.
func (v *varsDirs) inside(p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return &Error{File: p, Msg: "cannot be resolved: " + err.Error()}
	}
	rel, err := filepath.Rel(v.root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return &Error{File: p, Msg: fmt.Sprintf("resolves to %s, outside the inventory's directory %s: gpuprep reads no variables from elsewhere (copy the file in)", real, v.root)}
	}
	return nil
}

// entity returns the variables group_vars/NAME (kind group_vars) or
// host_vars/NAME (kind host_vars) sets, merged in Ansible's order, and the
// first problem of a file that could not be read without Ansible.
func (v *varsDirs) entity(kind, name string) (map[string]aVar, string, error) {
	dir := v.dirs[kind]
	if dir == "" || strings.HasPrefix(name, "/") { // Ansible passes over a name that starts with /
		return nil, "", nil
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return nil, "", fmt.Errorf("%q: its %s file would be looked up at %s, a path gpuprep does not follow", name, kind, filepath.Join(dir, name))
	}
	files, err := v.find(dir, name)
	if err != nil {
		return nil, "", err
	}
	out := map[string]aVar{}
	problem := ""
	for _, f := range files {
		vf, err := v.load(f)
		if err != nil {
			return nil, "", err
		}
		if vf.problem != "" && problem == "" {
			problem = vf.problem
		}
		for k, val := range vf.vars {
			out[k] = val
		}
	}
	return out, problem, nil
}

// find is DataLoader.find_vars_files: the first of NAME (a file or a
// directory), NAME.yml, NAME.yaml, NAME.json that exists.
func (v *varsDirs) find(dir, name string) ([]string, error) {
	for _, ext := range varsExts {
		p := filepath.Join(dir, name+ext)
		fi, err := os.Stat(p) // as os.path.exists: through links; a dangling one is not there
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, &Error{File: p, Msg: err.Error()}
		}
		if err := v.inside(p); err != nil {
			return nil, err
		}
		if fi.IsDir() {
			var out []string
			return out, v.walk(p, 0, &out)
		}
		if !fi.Mode().IsRegular() {
			return nil, &Error{File: p, Msg: fmt.Sprintf("not a regular file (%s): not read", fi.Mode().Type())}
		}
		return []string{p}, nil
	}
	return nil, nil
}

// walk is DataLoader._get_dir_vars_files: dir's entries, sorted, depth first.
func (v *varsDirs) walk(dir string, depth int, out *[]string) error {
	if depth > maxVarsDepth {
		return &Error{File: dir, Msg: fmt.Sprintf("directories nested more than %d deep: not read", maxVarsDepth)}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return &Error{File: dir, Msg: err.Error()}
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names) // Python's sorted: code points, as UTF-8 bytes sort
	for _, n := range names {
		if v.entries++; v.entries > maxVarsEntries {
			return &Error{File: dir, Msg: fmt.Sprintf("more than %d entries in group_vars/ and host_vars/: not read", maxVarsEntries)}
		}
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, "~") {
			continue
		}
		if err := v.walkEntry(filepath.Join(dir, n), depth, out); err != nil {
			return err
		}
	}
	return nil
}

// walkEntry reads one entry of a vars directory: a directory without an
// extension, or a file without one or with a vars extension; else nothing.
func (v *varsDirs) walkEntry(p string, depth int, out *[]string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return nil // a dangling link: neither a directory nor a file, as Ansible sees it
	}
	ext := filepath.Ext(p)
	switch {
	case fi.IsDir() && ext == "":
		if err := v.inside(p); err != nil {
			return err
		}
		return v.walk(p, depth+1, out)
	case fi.Mode().IsRegular() && (ext == "" || contains(varsExts, ext)):
		if err := v.inside(p); err != nil {
			return err
		}
		*out = append(*out, p)
	}
	return nil
}

// load reads one vars file (once).
func (v *varsDirs) load(p string) (varsFile, error) {
	if vf, ok := v.cache[p]; ok {
		return vf, nil
	}
	data, err := readRegular(p, maxVarsFile)
	if err != nil {
		return varsFile{}, err
	}
	if v.total += int64(len(data)); v.total > maxVarsTotal {
		return varsFile{}, &Error{File: p, Msg: fmt.Sprintf("group_vars/ and host_vars/ hold more than %d bytes: not read", maxVarsTotal)}
	}
	vf, err := parseVarsFile(p, data)
	if err != nil {
		return varsFile{}, err
	}
	v.cache[p] = vf
	return vf, nil
}

// readRegular reads a regular file of at most limit bytes, opened without
// blocking (a FIFO put in its place after a stat would otherwise hang).
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &Error{File: p, Msg: err.Error()}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &Error{File: p, Msg: err.Error()}
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{File: p, Msg: fmt.Sprintf("not a regular file (%s): not read", fi.Mode().Type())}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &Error{File: p, Msg: err.Error()}
	}
	if int64(len(b)) > limit {
		return nil, &Error{File: p, Msg: fmt.Sprintf("larger than %d bytes, more than gpuprep reads as a vars file", limit)}
	}
	return b, nil
}

// vaultHeader starts a vault-encrypted file (VaultLib's b_HEADER).
const vaultHeader = "$ANSIBLE_VAULT"

// parseVarsFile reads a vars file's YAML or JSON: a mapping of variables.
func parseVarsFile(p string, data []byte) (varsFile, error) {
	if bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte(vaultHeader)) {
		return varsFile{problem: (&Error{File: p, Msg: "vault-encrypted: gpuprep's own reader has no vault password and cannot know the variables it sets; with ansible-inventory installed (ansible-core) and the vault password configured, --inventory-engine auto or ansible has Ansible read it"}).Error()}, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ye := yamlpos.Locate(data, err)
		return varsFile{}, &Error{File: p, Line: ye.Line, Msg: "not valid YAML: " + ye.Msg}
	}
	if len(doc.Content) == 0 {
		return varsFile{}, nil // an empty file sets nothing
	}
	m := yamlDeref(doc.Content[0])
	switch {
	case m.Kind == yaml.ScalarNode && (m.Tag == "!!null" || m.Value == ""):
		return varsFile{}, nil
	case m.Kind == yaml.SequenceNode && len(m.Content) == 0:
		return varsFile{}, nil // Ansible passes over data that is empty
	case m.Kind != yaml.MappingNode:
		return varsFile{}, &Error{File: p, Line: m.Line, Msg: "want a mapping of variables (Ansible: failed to combine variables, expected dicts)"}
	}
	vars, err := newAInv(p, "vars").yamlVars(m, "vars")
	if err != nil {
		return varsFile{}, err
	}
	return varsFile{vars: vars}, nil
}

// hasVaultTag reports whether n or a node in it is a !vault value
// (AnsibleConstructor's !vault and !vault-encrypted).
func hasVaultTag(n *yaml.Node, depth int) bool {
	if n == nil || depth > 64 {
		return false
	}
	if n.Tag == "!vault" || n.Tag == "!vault-encrypted" {
		return true
	}
	if n.Kind == yaml.AliasNode {
		return hasVaultTag(n.Alias, depth+1)
	}
	for _, c := range n.Content {
		if hasVaultTag(c, depth+1) {
			return true
		}
	}
	return false
}
