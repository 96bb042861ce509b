// Package fleet runs gpuprep on many hosts over SSH: inventories (gpuprep's
// own YAML and Ansible INI/YAML, with ~/.ssh/config), a verifying SSH
// transport, agentless upload of the gpuprep binary and a bounded parallel
// runner.
package fleet

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/yamlpos"
)

// Host is one inventory entry, after the inventory's own defaults and group
// variables are applied (and, with ApplySSHConfig, ~/.ssh/config).
type Host struct {
	Name    string `json:"name"`
	Address string `json:"address"` // host name or IP to connect to (default: Name)
	Port    int    `json:"port,omitempty"`
	User    string `json:"user,omitempty"`
	Mode    string `json:"mode,omitempty"`
	// Jump is a ProxyJump spec: [user@]host[:port][,…] (empty: direct).
	Jump          string            `json:"jump,omitempty"`
	IdentityFiles []string          `json:"identityFiles,omitempty"`
	Groups        []string          `json:"groups,omitempty"`
	Vars          map[string]string `json:"vars,omitempty"`
	// Source is FILE:LINE of the entry, for messages.
	Source string `json:"source,omitempty"`
	// Problem is what keeps this host from being contacted (a key file
	// that is not there, a connection that is not SSH, a value that could
	// not be rendered): the host's own error, reported for it alone.
	Problem string `json:"problem,omitempty"`
	// Local: ansible_connection local: gpuprep runs on this machine itself,
	// without SSH (see Local); Address, Port, User and Jump are not used.
	Local bool `json:"local,omitempty"`
}

// Var returns a host variable.
func (h *Host) Var(k string) string { return h.Vars[k] }

// Target is host:port as dialled.
func (h *Host) Target() string {
	if h.Local {
		return LocalTarget
	}
	p := h.Port
	if p == 0 {
		p = 22
	}
	return joinHostPort(h.Address, p)
}

func joinHostPort(h string, p int) string {
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		return "[" + h + "]:" + strconv.Itoa(p)
	}
	return h + ":" + strconv.Itoa(p)
}

// Inventory is a parsed inventory file.
type Inventory struct {
	File   string
	Format string // gpuprep, ansible-ini, ansible-yaml, ansible-dir, ansible-list, ansible-inventory (read by it)
	// Note says which reader read an Ansible inventory, and what it
	// applied, for stderr ("" for gpuprep's own format).
	Note  string
	Hosts []*Host
	vars  []map[string]aVar // while loading by ansible-inventory: each host's variables
}

// Error is an inventory error naming the file, line and field.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// Modes a host may name (the values `gpuprep check --mode` accepts).
var validModes = map[string]bool{"container": true, "vm-passthrough": true, "vm-vgpu": true}

// Load reads an inventory: gpuprep's YAML (apiVersion gpuprep/v1, kind
// Inventory, or a top-level `hosts:` list), an Ansible YAML inventory (a
// mapping of groups), or an Ansible INI inventory.
func Load(file string) (*Inventory, error) {
	data, err := readBounded(file, maxInventoryFile)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Parse parses inventory data read from file (the name is used in errors).
// group_vars/ and host_vars/ beside the file are not read (LoadWith reads
// them).
func Parse(file string, data []byte) (*Inventory, error) {
	return parseWith(file, data, nil)
}

// parseWith is Parse, an Ansible inventory's hosts taking the variables of
// vd (group_vars/ and host_vars/; nil: none) as Ansible applies them.
func parseWith(file string, data []byte, vd *varsDirs) (*Inventory, error) {
	var inv *Inventory
	var err error
	var doc yaml.Node
	yerr := yaml.Unmarshal(data, &doc)
	switch {
	case strings.EqualFold(path.Ext(file), ".ini"):
		// Named INI: read as INI even where the text also reads as YAML
		// (h1 x="a: b" is a YAML mapping), as Ansible's ini plugin does.
		inv, err = parseINI(file, data, vd)
	case yerr == nil && len(doc.Content) == 1 && isSavedList(doc.Content[0]):
		return parseSavedList(file, data) // its hosts' problems are their own
	case yerr == nil && len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode && isGpuprep(doc.Content[0]):
		inv, err = parseOwn(file, doc.Content[0])
	case yerr == nil && len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode:
		inv, err = parseAnsibleYAML(file, doc.Content[0], vd)
	case looksYAML(file, data):
		return nil, notYAMLInventory(file, data, &doc, yerr)
	default:
		inv, err = parseINI(file, data, vd)
	}
	if err != nil {
		return nil, err
	}
	return checkParsed(file, inv)
}

// checkParsed checks the hosts an inventory was read as: some, each a host
// gpuprep can name, and in gpuprep's format each once.
func checkParsed(file string, inv *Inventory) (*Inventory, error) {
	if len(inv.Hosts) == 0 {
		return nil, &Error{File: file, Msg: "no hosts"}
	}
	seen := map[string]string{}
	for _, h := range inv.Hosts {
		if h.Address == "" {
			h.Address = h.Name
		}
		if prev, ok := seen[h.Name]; ok && inv.Format == "gpuprep" {
			return nil, &Error{File: file, Line: lineOf(h.Source), Field: "name", Msg: fmt.Sprintf("host %q already defined at %s", h.Name, prev)}
		}
		seen[h.Name] = h.Source
		if err := validateHost(file, h); err != nil {
			return nil, err
		}
		sort.Strings(h.Groups)
	}
	return inv, nil
}

// notYAMLInventory is the error for YAML that is no inventory: the line of a
// syntax error (yamlpos: the line the parser stopped at, not yaml.v3's
// context line), or of a document that is not a mapping.
func notYAMLInventory(file string, data []byte, doc *yaml.Node, yerr error) error {
	if yerr != nil {
		ye := yamlpos.Locate(data, yerr)
		return &Error{File: file, Line: ye.Line, Msg: "not valid YAML: " + ye.Msg}
	}
	line := 0
	if len(doc.Content) == 1 {
		line = doc.Content[0].Line
	}
	return &Error{File: file, Line: line, Msg: "not an inventory: want a mapping (apiVersion: gpuprep/v1 with hosts:, or Ansible's groups)"}
}

func looksYAML(file string, data []byte) bool {
	ext := strings.ToLower(path.Ext(file))
	if ext == ".yaml" || ext == ".yml" {
		return true
	}
	t := bytes.TrimSpace(data)
	return bytes.HasPrefix(t, []byte("---")) || bytes.HasPrefix(t, []byte("apiVersion:"))
}

func lineOf(source string) int {
	i := strings.LastIndexByte(source, ':')
	if i < 0 {
		return 0
	}
	n, _ := strconv.Atoi(source[i+1:])
	return n
}

func validateHost(file string, h *Host) error {
	line := lineOf(h.Source)
	bad := func(field, msg string) error { return &Error{File: file, Line: line, Field: field, Msg: msg} }
	if msg := hostNameProblem(h.Name); msg != "" {
		return bad("name", msg)
	}
	if !validAddress(h.Address) {
		return bad("address", fmt.Sprintf("host %q: %q is not a host name or IP address", h.Name, h.Address))
	}
	if err := validJump(h.Jump); err != nil {
		return bad("jump", fmt.Sprintf("host %q: %v", h.Name, err))
	}
	if h.Port < 0 || h.Port > 65535 {
		return bad("port", fmt.Sprintf("host %q: %d is not a TCP port", h.Name, h.Port))
	}
	if strings.ContainsAny(h.User, "\x00\r\n") {
		return bad("user", fmt.Sprintf("host %q: user contains control characters", h.Name))
	}
	if h.Mode != "" && !validModes[h.Mode] {
		return bad("mode", fmt.Sprintf("host %q: %q: want container, vm-passthrough or vm-vgpu", h.Name, h.Mode))
	}
	for k, v := range h.Vars {
		if strings.ContainsRune(v, 0) {
			return bad("vars."+k, fmt.Sprintf("host %q: NUL byte in value", h.Name))
		}
	}
	return nil
}

// validAddress reports whether a is a host name (letters, digits, '.', '-',
// '_'; no leading '-') or an IP address (IPv6 possibly in brackets, with an
// optional zone). Nothing else may pass: with --accept-new the address is
// written into known_hosts, where ',' separates host patterns and '*?!' and
// '[]' are wildcards, negation and port brackets, so an inventory address
// like "victim.corp,x.attacker.example" would record a key that OpenSSH and
// gpuprep then trust for victim.corp. A leading '-' would read as an option.
func validAddress(a string) bool {
	if len(a) > maxHostName {
		return false
	}
	if validHostName(a) {
		return true
	}
	if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
		ip, ok := parseIP(a[1 : len(a)-1])
		return ok && ip.Is6()
	}
	_, ok := parseIP(a)
	return ok
}

// validHostName reports whether s is made of host name characters only.
func validHostName(s string) bool {
	if s == "" || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// parseIP parses an IPv4 or IPv6 address. netip accepts any bytes in an
// IPv6 zone (fe80::1%eth0), so the zone must look like an interface name.
func parseIP(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" && !validHostName(ip.Zone()) {
		return netip.Addr{}, false
	}
	return ip, true
}

// validJump checks the hosts of a ProxyJump spec ([user@]host[:port],
// comma-separated, ssh:// allowed) the way validAddress checks a host's
// address: jump hosts' keys are recorded in known_hosts too.
func validJump(spec string) error {
	if spec == "" {
		return nil
	}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "ssh://")
		if _, rest, ok := strings.Cut(part, "@"); ok {
			part = rest
		}
		host := part
		if strings.HasPrefix(part, "[") {
			if end := strings.IndexByte(part, ']'); end > 0 {
				host = part[:end+1]
			}
		} else if i := strings.LastIndexByte(part, ':'); i >= 0 && strings.Count(part, ":") == 1 {
			host = part[:i]
		}
		if !validAddress(host) {
			return fmt.Errorf("jump %q: %q is not a host name or IP address", spec, host)
		}
	}
	return nil
}

// KeyFile checks a key file named on the command line (--identity) as an
// inventory's are checked: ~ expanded, and the file must exist.
func KeyFile(p string) (string, error) { return inventoryKeyFile(p) }

// inventoryKeyFile expands a leading ~ in a key file an inventory names and
// checks that the file exists: the transport passes over key files it cannot
// read, so a misspelt one would otherwise surface as an authentication
// failure on every host (or not at all, while ssh-agent has a key that works).
func inventoryKeyFile(p string) (string, error) {
	p, err := expandHome(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	switch {
	case os.IsNotExist(err):
		return "", fmt.Errorf("key file %s does not exist", p)
	case err != nil:
		return "", fmt.Errorf("key file: %v", err)
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("key file %s is not a regular file", p)
	}
	return p, nil
}

// expandHome expands a leading "~/" (or "~" alone) to the user's home
// directory and "~name/" to that user's, as Ansible (os.path.expanduser)
// and ssh do for key files, and as expandIdentity does for ssh_config's
// IdentityFile. It does not expand ssh_config's %-tokens: a host's user
// and port are not final before ssh_config is applied.
func expandHome(p string) (string, error) {
	if !strings.HasPrefix(p, "~") {
		return p, nil
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	var home string
	if name == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%s: %v", p, err)
		}
		home = h
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return "", fmt.Errorf("%s: no user %q to expand ~%s", p, name, name)
		}
		home = u.HomeDir
	}
	// Not cleaned: ~/.ssh/../k is under the target of a ~/.ssh symlink, as
	// ssh and Python's expanduser leave it.
	if !strings.Contains(p, "/") {
		return home, nil
	}
	return strings.TrimRight(home, "/") + "/" + rest, nil
}

// ---- gpuprep's own format ----

func isGpuprep(m *yaml.Node) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i].Value, m.Content[i+1]
		if k == "apiVersion" || k == "kind" && v.Value == "Inventory" {
			return true
		}
		if k == "hosts" && v.Kind == yaml.SequenceNode {
			return true
		}
	}
	return false
}

func parseOwn(file string, m *yaml.Node) (*Inventory, error) {
	inv := &Inventory{File: file, Format: "gpuprep"}
	bad := func(n *yaml.Node, field, msg string) error {
		return &Error{File: file, Line: n.Line, Field: field, Msg: msg}
	}
	var defaults *Host
	var hostsNode *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		switch k.Value {
		case "apiVersion":
			if v.Value != "gpuprep/v1" {
				return nil, bad(v, "apiVersion", fmt.Sprintf("%q: want gpuprep/v1", v.Value))
			}
		case "kind":
			if v.Value != "Inventory" {
				return nil, bad(v, "kind", fmt.Sprintf("%q: want Inventory", v.Value))
			}
		case "defaults":
			h, err := ownHost(file, v, "defaults", true)
			if err != nil {
				return nil, err
			}
			defaults = h
		case "hosts":
			if v.Kind != yaml.SequenceNode {
				return nil, bad(v, "hosts", "want a list of hosts")
			}
			hostsNode = v
		default:
			return nil, bad(k, k.Value, "unknown field (want apiVersion, kind, defaults, hosts)")
		}
	}
	if hostsNode == nil {
		return nil, &Error{File: file, Line: m.Line, Field: "hosts", Msg: "missing"}
	}
	for i, hn := range hostsNode.Content {
		h, err := ownHost(file, hn, fmt.Sprintf("hosts[%d]", i), false)
		if err != nil {
			return nil, err
		}
		if defaults != nil {
			mergeDefaults(h, defaults)
		}
		inv.Hosts = append(inv.Hosts, h)
	}
	return inv, nil
}

func mergeDefaults(h, d *Host) {
	if h.Port == 0 {
		h.Port = d.Port
	}
	if h.User == "" {
		h.User = d.User
	}
	if h.Mode == "" {
		h.Mode = d.Mode
	}
	if _, direct := h.Vars["gpuprep_jump"]; h.Jump == "" && !direct { // gpuprep_jump "": direct
		h.Jump = d.Jump
	}
	if len(h.IdentityFiles) == 0 {
		h.IdentityFiles = d.IdentityFiles
	}
	h.Groups = union(h.Groups, d.Groups)
	for k, v := range d.Vars {
		if _, ok := h.Vars[k]; !ok {
			if h.Vars == nil {
				h.Vars = map[string]string{}
			}
			h.Vars[k] = v
		}
	}
	// a host's mode or jump field wins over the defaults' variable: the
	// variable says what applies
	for k, f := range map[string]string{"gpuprep_mode": h.Mode, "gpuprep_jump": h.Jump} {
		if _, ok := h.Vars[k]; ok {
			h.Vars[k] = f
		}
	}
}

func union(a, b []string) []string {
	for _, x := range b {
		if !contains(a, x) {
			a = append(a, x)
		}
	}
	return a
}

func contains(a []string, x string) bool {
	for _, y := range a {
		if y == x {
			return true
		}
	}
	return false
}

func ownHost(file string, n *yaml.Node, where string, isDefaults bool) (*Host, error) {
	h := &Host{Source: fmt.Sprintf("%s:%d", file, n.Line)}
	if n.Kind == yaml.ScalarNode && !isDefaults {
		h.Name = n.Value
		return h, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, &Error{File: file, Line: n.Line, Field: where, Msg: "want a mapping (name, address, port, user, mode, groups, vars, jump)"}
	}
	r := &ownHostReader{file: file, where: where, h: h}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := r.field(n.Content[i], n.Content[i+1]); err != nil {
			return nil, err
		}
	}
	if !isDefaults && h.Name == "" {
		if h.Address == "" {
			return nil, &Error{File: file, Line: n.Line, Field: where + ".name", Msg: "missing (name or address required)"}
		}
		h.Name = h.Address
	}
	// gpuprep_mode and gpuprep_jump say what the fields mode and jump say
	// (as in an Ansible inventory); both at once must agree.
	fields := map[string]string{"gpuprep_mode": h.Mode, "gpuprep_jump": h.Jump}
	err := gpuprepVars(file, h, h.Vars, func(k string) (int, string) { return r.varLines[k], where + ".vars." + k })
	if err != nil {
		return nil, err
	}
	for k, f := range fields {
		if v, ok := h.Vars[k]; ok && f != "" && f != v {
			msg := fmt.Sprintf("%q contradicts %s: %q (give one of them)", v, strings.TrimPrefix(k, "gpuprep_"), f)
			if h.Name != "" {
				msg = fmt.Sprintf("host %q: %s", h.Name, msg)
			}
			return nil, &Error{File: file, Line: r.varLines[k], Field: where + ".vars." + k, Msg: msg}
		}
	}
	return h, nil
}

// ownHostReader reads the fields of a host entry (at where in file) of
// gpuprep's own inventory into h.
type ownHostReader struct {
	file, where string
	h           *Host
	varLines    map[string]int // the lines of h.Vars
}

func (r *ownHostReader) bad(n *yaml.Node, field, msg string) error {
	return &Error{File: r.file, Line: n.Line, Field: r.where + "." + field, Msg: msg}
}

// scalar is field k's value v, which must be a single value.
func (r *ownHostReader) scalar(k, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", r.bad(v, k.Value, "want a single value")
	}
	return v.Value, nil
}

// field reads field k, with value v.
func (r *ownHostReader) field(k, v *yaml.Node) error {
	h, field := r.h, r.where+"."+k.Value
	var err error
	switch k.Value {
	case "name":
		h.Name, err = r.scalar(k, v)
	case "address", "host":
		h.Address, err = r.scalar(k, v)
	case "port":
		h.Port, err = r.port(k, v)
	case "user":
		h.User, err = r.scalar(k, v)
	case "mode":
		h.Mode, err = r.scalar(k, v)
		if err == nil && !validModes[h.Mode] {
			err = r.bad(v, k.Value, fmt.Sprintf("%q: want container, vm-passthrough or vm-vgpu", h.Mode))
		}
	case "jump", "bastion", "proxyJump":
		h.Jump, err = r.scalar(k, v)
	case "identityFile":
		err = r.identityFiles(k, v)
	case "groups":
		if v.Kind != yaml.SequenceNode {
			return r.bad(v, k.Value, "want a list of group names")
		}
		h.Groups, err = scalars(r.file, v, field)
	case "vars":
		h.Vars, r.varLines, err = varsMap(r.file, v, r.where+".vars")
	default:
		return r.bad(k, k.Value, "unknown field (want name, address, port, user, mode, groups, vars, jump, identityFile)")
	}
	return err
}

// port is field k's value v as a TCP port.
func (r *ownHostReader) port(k, v *yaml.Node) (int, error) {
	s, err := r.scalar(k, v)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(s)
	if err != nil || p <= 0 || p > 65535 {
		return p, r.bad(v, k.Value, fmt.Sprintf("%q is not a TCP port", s))
	}
	return p, nil
}

// identityFiles reads identityFile: one key file or a list of them.
func (r *ownHostReader) identityFiles(k, v *yaml.Node) error {
	field := r.where + "." + k.Value
	var err error
	if v.Kind == yaml.SequenceNode {
		r.h.IdentityFiles, err = scalars(r.file, v, field)
	} else {
		var s string
		s, err = r.scalar(k, v)
		r.h.IdentityFiles = []string{s}
	}
	if err != nil {
		return err
	}
	return ownKeyFiles(r.file, v, field, r.h.IdentityFiles)
}

// gpuprepVars checks the gpuprep_* host variables gpuprep reads (docs/commands/fleet.md:
// "Host variables gpuprep reads") and applies gpuprep_mode and
// gpuprep_jump to h, the same way in every inventory format; at gives a
// variable's line and field name for errors. Other gpuprep_* variables
// are read where they are used: gpuprep_root, gpuprep_select and
// gpuprep_cache_dir by fleet, gpuprep_vgpu_config_file, gpuprep_driver
// and gpuprep_vgpu_config by fleet apply (which checks them before any
// host is contacted). A gpuprep_* variable gpuprep does not know is left
// alone: Ansible roles may use the prefix for their own variables.
func gpuprepVars(file string, h *Host, vars map[string]string, at func(k string) (int, string)) error {
	bad := func(k, format string, a ...any) error {
		line, field := at(k)
		msg := fmt.Sprintf(format, a...)
		if h.Name != "" {
			msg = fmt.Sprintf("host %q: %s", h.Name, msg)
		}
		return &Error{File: file, Line: line, Field: field, Msg: msg}
	}
	if v, ok := vars["gpuprep_mode"]; ok {
		if !validModes[v] {
			return bad("gpuprep_mode", "%q: want container, vm-passthrough or vm-vgpu", v)
		}
		h.Mode = v
	}
	if v, ok := vars["gpuprep_jump"]; ok {
		if err := validJump(v); err != nil {
			return bad("gpuprep_jump", "%v", err)
		}
		h.Jump = v // "": a direct connection, whatever else says otherwise
	}
	if v := vars["gpuprep_cache_dir"]; v != "" && !path.IsAbs(v) {
		return bad("gpuprep_cache_dir", "%q is not an absolute path", v)
	}
	if v := vars["gpuprep_select"]; strings.TrimSpace(v) != "" {
		if _, err := pci.ParseSelector([]string{v}); err != nil {
			return bad("gpuprep_select", "%v", strings.TrimSpace(strings.Replace(err.Error(), "--select", "", 1)))
		}
	}
	return nil
}

// ownKeyFiles expands and checks the key files of an identityFile field (a
// scalar or a list, v), in place, naming the line of a missing one.
func ownKeyFiles(file string, v *yaml.Node, field string, files []string) error {
	for i, f := range files {
		n := v
		if v.Kind == yaml.SequenceNode {
			n = v.Content[i]
		}
		p, err := inventoryKeyFile(f)
		if err != nil {
			return &Error{File: file, Line: n.Line, Field: field, Msg: err.Error()}
		}
		files[i] = p
	}
	return nil
}

func scalars(file string, v *yaml.Node, field string) ([]string, error) {
	var out []string
	for _, e := range v.Content {
		if e.Kind != yaml.ScalarNode {
			return nil, &Error{File: file, Line: e.Line, Field: field, Msg: "want a list of strings"}
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// varsMap reads a vars mapping: the values, and the line of each.
func varsMap(file string, v *yaml.Node, field string) (map[string]string, map[string]int, error) {
	if v.Kind == yaml.ScalarNode && (v.Tag == "!!null" || v.Value == "") {
		return nil, nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, nil, &Error{File: file, Line: v.Line, Field: field, Msg: "want a mapping of variables"}
	}
	out := map[string]string{}
	lines := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		lines[k.Value] = val.Line
		if val.Kind != yaml.ScalarNode {
			// Structured variables are kept as their YAML text; gpuprep
			// reads only scalars. Merge keys and aliases in it are
			// resolved first, as PyYAML reads them.
			b, _ := yaml.Marshal(resolvedYAML(val))
			out[k.Value] = strings.TrimSpace(string(b))
			continue
		}
		if val.Tag == "!!null" {
			out[k.Value] = ""
			continue
		}
		out[k.Value] = val.Value
	}
	return out, lines, nil
}

// resolvedYAML is n, or where it holds a merge key (<<) or an alias, the
// data it reads as (merges applied, aliases followed), for its text.
func resolvedYAML(n *yaml.Node) any {
	if !yamlIndirect(n, 0) {
		return n
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return n
	}
	return v
}

// yamlIndirect reports whether n holds a merge key or an alias.
func yamlIndirect(n *yaml.Node, depth int) bool {
	if n == nil || depth > 64 || n.Kind == yaml.AliasNode {
		return n != nil
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && c.Kind == yaml.ScalarNode && c.Value == "<<" && c.Tag == "!!merge" {
			return true
		}
		if yamlIndirect(c, depth+1) {
			return true
		}
	}
	return false
}
