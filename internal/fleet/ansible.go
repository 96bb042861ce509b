package fleet

import (
	"cmp"
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Ansible inventories are read as Ansible reads them: groups with hosts,
// children and vars; the implicit groups all and ungrouped; variables from
// the least specific group (all) to the most specific, then host variables.
// gpuprep reads what Ansible's ssh connection plugin reads: ansible_host,
// ansible_port, ansible_user and ansible_private_key_file, where the
// ansible_ssh_* form of each wins when both are set; a ProxyJump in
// ansible_ssh_args, ansible_ssh_common_args, then ansible_ssh_extra_args
// (-J X or -o ProxyJump=X; the first wins, as on ssh's command line; a
// ProxyCommand there is an error); and gpuprep_*
// variables (gpuprep_mode, gpuprep_jump, gpuprep_root, …).
// ansible_oracle_test.go checks all of it against ansible-inventory.
// Deliberate differences: where Ansible warns and passes over part of an
// inventory (a group that is not a mapping, a misspelt group field), gpuprep
// stops with the file and line, since a fleet run must not leave hosts out
// silently; an address must be a host name or IP (validAddress); YAML
// variables keep their text as written (see yaml11Int).

type aVar struct {
	val   string
	line  int
	file  string // where it is set ("": the inventory file being read)
	vault bool   // a !vault value: encrypted, unknown without the vault password
}

type aGroup struct {
	name     string
	file     string
	line     int
	hosts    map[string]bool // listed in the group itself
	children []string
	vars     map[string]aVar
}

type aHost struct {
	name string
	file string
	line int
	vars map[string]aVar
}

type aInv struct {
	file   string
	format string
	yamlOn map[*yaml.Node]bool // YAML groups being read (alias loops)
	groups map[string]*aGroup
	hosts  map[string]*aHost
	order  []string            // hosts in first-seen order
	direct map[string][]string // host -> the groups that list it (a set lookup per group, not a scan)
	work   int                 // YAML groups and host entries read so far (bounded by maxYAMLWork)
	vdirs  *varsDirs           // group_vars/ and host_vars/ beside the inventory (nil: none)
}

func newAInv(file, format string) *aInv {
	return &aInv{file: file, format: format, groups: map[string]*aGroup{}, hosts: map[string]*aHost{}, direct: map[string][]string{}}
}

func (a *aInv) group(name string, line int) *aGroup {
	g := a.groups[name]
	if g == nil {
		g = &aGroup{name: name, file: a.file, line: line, vars: map[string]aVar{}, hosts: map[string]bool{}}
		a.groups[name] = g
	}
	return g
}

func (a *aInv) host(name string, line int) *aHost {
	h := a.hosts[name]
	if h == nil {
		h = &aHost{name: name, file: a.file, line: line, vars: map[string]aVar{}}
		a.hosts[name] = h
		a.order = append(a.order, name)
	}
	return h
}

func (a *aInv) addHostToGroup(g *aGroup, name string) {
	if !g.hosts[name] {
		g.hosts[name] = true
		a.direct[name] = append(a.direct[name], g.name)
	}
}

// addHosts adds the hosts of pat (an INI host line's first field or a YAML
// host key, at line) to g, with vars. A port in the pattern becomes the
// ansible_port of the hosts the pattern defines first, before vars are set,
// as in Ansible (InventoryData.add_host gives the port to a new Host only):
// an ansible_port among the host's own variables wins over it.
func (a *aInv) addHosts(g *aGroup, pat string, line int, field string, vars map[string]aVar) error {
	pat, port := splitPatternPort(pat)
	if port != "" {
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return &Error{File: a.file, Line: line, Field: field, Msg: fmt.Sprintf("host %q: %q is not a TCP port", pat, port)}
		}
	}
	if len(pat) > maxHostPattern {
		return &Error{File: a.file, Line: line, Field: field, Msg: fmt.Sprintf("host pattern of %d bytes: at most %d", len(pat), maxHostPattern)}
	}
	names, err := expandRange(pat)
	if err != nil {
		return &Error{File: a.file, Line: line, Field: field, Msg: err.Error()}
	}
	if err := a.roomFor(names, line, field); err != nil {
		return err
	}
	if len(names) > 0 {
		if msg := hostNameProblem(names[0]); msg != "" { // the names of one pattern differ only in their ranges
			return &Error{File: a.file, Line: line, Field: field, Msg: msg}
		}
	}
	for _, n := range names {
		isNew := a.hosts[n] == nil
		h := a.host(n, line)
		if isNew && port != "" {
			h.vars["ansible_port"] = aVar{val: port, line: line, file: a.file}
		}
		// As InventoryData.set_variable, which looks the name up among
		// the groups first: the variables of a host named as a group
		// that exists are that group's (so group_vars/all beats them).
		into := h.vars
		if same := a.groups[n]; same != nil {
			into = same.vars
		}
		for k, v := range vars {
			into[k] = v
		}
		a.addHostToGroup(g, n)
	}
	return nil
}

// The two port forms of Ansible's parse_address
// (lib/ansible/parsing/utils/addresses.py): "[host]:port", and "host:port"
// where host holds no ':' outside [x:y] ranges, so that a bare IPv6
// address keeps its colons.
var (
	bracketedHostPort = lazyRegexp(`^\[(.+)\]:([0-9]+)$`)
	patternHostPort   = lazyRegexp(`^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$`)
)

// splitPatternPort splits a trailing :PORT off a host pattern before its
// ranges are expanded, as Ansible does: web[01:02]:2222 is web01 and web02
// on port 2222; [fe80::1]:2222 is fe80::1 on port 2222. port is "" when the
// pattern names none. What remains is checked as an address later.
func splitPatternPort(pat string) (host, port string) {
	host = pat
	for _, re := range []*regexp.Regexp{bracketedHostPort(), patternHostPort()} {
		if m := re.FindStringSubmatch(host); m != nil && m[1] != "" {
			host, port = m[1], m[2]
		}
	}
	// Ansible keeps the pattern whole when what is left is no IP address
	// or host name (parse_address fails): h-:2222 is a host named so.
	if port != "" && !ansibleAddress(host) {
		return pat, ""
	}
	return host, port
}

var (
	ansibleRange = lazyRegexp(`\[[^\]]*\]`)
	// A label as Ansible's: a word character first, word characters and
	// dashes, no dash or underscore last.
	ansibleHostname = lazyRegexp(`^(?:[\p{L}\p{N}]|[\p{L}\p{N}_][\p{L}\p{N}_-]*[\p{L}\p{N}])(?:\.(?:[\p{L}\p{N}]|[\p{L}\p{N}_][\p{L}\p{N}_-]*[\p{L}\p{N}]))*$`)
)

// ansibleAddress reports whether s (ranges in it standing for one value)
// is an IPv4 or IPv6 address or a host name as Ansible's parse_address
// reads them.
func ansibleAddress(s string) bool {
	s = ansibleRange().ReplaceAllString(s, "0")
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return ansibleHostname().MatchString(s)
}

// resolve turns the groups into Hosts.
func (a *aInv) resolve() (*Inventory, error) {
	depth, err := a.groupDepths()
	if err != nil {
		return nil, err
	}
	member := a.memberships()
	priority, err := a.groupPriorities()
	if err != nil {
		return nil, err
	}
	inv := &Inventory{File: a.file, Format: a.format}
	for _, hn := range a.order {
		gs := slices.Collect(maps.Keys(member[hn]))
		sortGroups(gs, depth, priority)
		h, err := a.resolveHost(a.hosts[hn], gs)
		if err != nil {
			return nil, err
		}
		inv.Hosts = append(inv.Hosts, h)
	}
	return inv, nil
}

// groupDepths is each group's depth below all, by its longest path from
// all (all 0); an error when a child names no group, or the graph has a
// cycle.
func (a *aInv) groupDepths() (map[string]int, error) {
	for _, g := range a.groups {
		for _, c := range g.children {
			if a.groups[c] == nil {
				return nil, &Error{File: g.file, Line: g.line, Field: g.name + ".children", Msg: fmt.Sprintf("group %q is not defined", c)}
			}
		}
	}
	depth := map[string]int{}
	names := slices.Sorted(maps.Keys(a.groups))
	isChild := a.childSet()
	for _, n := range names {
		if n != "all" && !isChild[n] {
			if err := a.visitDepth(depth, n, 1, []string{"all"}); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range names {
		if _, ok := depth[n]; !ok && n != "all" { // only reachable through a cycle
			if err := a.visitDepth(depth, n, 1, nil); err != nil {
				return nil, err
			}
		}
	}
	depth["all"] = 0
	return depth, nil
}

// visitDepth gives group name, reached from all through path, the depth
// d unless it has one as deep, then its children theirs.
func (a *aInv) visitDepth(depth map[string]int, name string, d int, path []string) error {
	if contains(path, name) {
		return &Error{File: a.groups[name].file, Line: a.groups[name].line, Field: name + ".children", Msg: "cycle: " + strings.Join(append(path, name), " -> ")}
	}
	if cur, ok := depth[name]; ok && cur >= d {
		return nil
	}
	depth[name] = d
	for _, c := range a.groups[name].children {
		if err := a.visitDepth(depth, c, d+1, append(path, name)); err != nil {
			return err
		}
	}
	return nil
}

// childSet is the groups some group has as a child.
func (a *aInv) childSet() map[string]bool {
	isChild := map[string]bool{}
	for _, g := range a.groups {
		for _, c := range g.children {
			isChild[c] = true
		}
	}
	return isChild
}

// memberships are each host's groups: those that list it and their
// ancestors, and all. As Ansible's reconcile_inventory: a host in no group
// but all is listed in ungrouped; one also in another group is no longer
// listed there (it stays in ungrouped through a child of ungrouped, if any).
func (a *aInv) memberships() map[string]map[string]bool {
	parents := map[string][]string{}
	for _, g := range a.groups {
		for _, c := range g.children {
			parents[c] = append(parents[c], g.name)
		}
	}
	member := map[string]map[string]bool{} // host -> groups
	ungrouped := a.groups["ungrouped"]
	for _, hn := range a.order {
		m := a.memberOf(hn, parents)
		other := false
		for g := range m {
			other = other || g != "all" && g != "ungrouped"
		}
		switch {
		case other && ungrouped.hosts[hn]:
			delete(ungrouped.hosts, hn)
			m = a.memberOf(hn, parents)
		case !other && !m["ungrouped"]:
			a.addHostToGroup(ungrouped, hn)
			m["ungrouped"] = true
		}
		member[hn] = m
	}
	return member
}

// memberOf is the groups host hn is in: all, those that list it, and
// their ancestors (parents: each group's parents).
func (a *aInv) memberOf(hn string, parents map[string][]string) map[string]bool {
	m := map[string]bool{"all": true}
	var up func(g string)
	up = func(g string) {
		m[g] = true
		for _, p := range parents[g] {
			if !m[p] {
				up(p)
			}
		}
	}
	for _, g := range a.direct[hn] {
		if a.groups[g].hosts[hn] {
			up(g)
		}
	}
	return m
}

// groupPriorities are the groups' ansible_group_priority (default 1),
// taken out of their variables: the priority is no variable itself.
func (a *aInv) groupPriorities() (map[string]int, error) {
	priority := map[string]int{}
	for _, g := range a.groups {
		priority[g.name] = 1
		if v, ok := g.vars["ansible_group_priority"]; ok {
			n, err := strconv.Atoi(v.val)
			if err != nil {
				return nil, &Error{File: a.at(v), Line: v.line, Field: "ansible_group_priority", Msg: fmt.Sprintf("group %q: %q is not an integer", g.name, v.val)}
			}
			priority[g.name] = n
			delete(g.vars, "ansible_group_priority")
		}
	}
	return priority, nil
}

// sortGroups sorts a host's groups from the least specific to the most
// specific, the order their variables apply in: by depth, then
// ansible_group_priority, then name (Ansible's sort_groups).
func sortGroups(gs []string, depth, priority map[string]int) {
	sort.Slice(gs, func(i, j int) bool {
		if depth[gs[i]] != depth[gs[j]] {
			return depth[gs[i]] < depth[gs[j]]
		}
		if priority[gs[i]] != priority[gs[j]] {
			return priority[gs[i]] < priority[gs[j]]
		}
		return gs[i] < gs[j]
	})
}

// resolveHost is the Host of ah, in the groups gs (sorted by sortGroups):
// its variables, as they apply, and what gpuprep reads of them.
func (a *aInv) resolveHost(ah *aHost, gs []string) (*Host, error) {
	vars, problem, err := a.precedence(ah, gs)
	if err != nil {
		return nil, err
	}
	h := &Host{Name: ah.name, Source: fmt.Sprintf("%s:%d", ah.file, ah.line), Vars: map[string]string{}, Problem: problem}
	for _, g := range gs {
		if g != "all" {
			h.Groups = append(h.Groups, g)
		}
	}
	for k, v := range vars {
		if !v.vault { // an encrypted value is not known: no value rather than a wrong one
			h.Vars[k] = v.val
		}
	}
	if problem != "" {
		return h, nil // a vault-encrypted vars file: none of its variables is known
	}
	if err := a.applyVars(h, vars); err != nil {
		return nil, err
	}
	return h, nil
}

func first(vars map[string]aVar, keys ...string) (aVar, string, bool) {
	for _, k := range keys {
		if v, ok := vars[k]; ok {
			return v, k, true
		}
	}
	return aVar{}, "", false
}

// applyVars sets what gpuprep reads of h's variables: the connection
// (Ansible's and gpuprep's variables), and a bastion from ssh arguments.
func (a *aInv) applyVars(h *Host, vars map[string]aVar) error {
	if p := a.unresolved(h.Name, vars); p != "" {
		h.Problem = p // that host's problem: Ansible would resolve it, gpuprep's reader cannot
		return nil
	}
	if err := a.connectionVars(h, vars); err != nil {
		return err
	}
	// gpuprep_mode, gpuprep_jump, … as in every inventory format
	if err := gpuprepVars(a.file, h, h.Vars, func(k string) (int, string) { return vars[k].line, k }); err != nil {
		return a.setBy(err, vars)
	}
	if _, ok := vars["gpuprep_jump"]; ok {
		return nil
	}
	return a.argsJump(h, vars)
}

// connectionVars reads the ssh connection plugin's variables: address,
// port, user, key and connection type.
func (a *aInv) connectionVars(h *Host, vars map[string]aVar) error {
	if v, k, ok := first(vars, "ansible_ssh_host", "ansible_host"); ok {
		if !validAddress(v.val) {
			return &Error{File: a.at(v), Line: v.line, Field: k, Msg: fmt.Sprintf("host %q: %q is not a host name or IP address", h.Name, v.val)}
		}
		h.Address = v.val
	}
	if v, k, ok := first(vars, "ansible_ssh_port", "ansible_port"); ok {
		p, err := strconv.Atoi(v.val)
		if err != nil || p <= 0 || p > 65535 {
			return &Error{File: a.at(v), Line: v.line, Field: k, Msg: fmt.Sprintf("host %q: %q is not a TCP port", h.Name, v.val)}
		}
		h.Port = p
	}
	if v, _, ok := first(vars, "ansible_ssh_user", "ansible_user"); ok {
		h.User = v.val
	}
	if v, k, ok := first(vars, "ansible_ssh_private_key_file", "ansible_private_key_file"); ok && v.val != "" {
		p, err := inventoryKeyFile(v.val)
		if err != nil {
			// that host's error: the others are still reached
			h.Problem = (&Error{File: a.at(v), Line: v.line, Field: k, Msg: fmt.Sprintf("host %q: %v", h.Name, err)}).Error()
		} else {
			h.IdentityFiles = []string{p}
		}
	}
	if v, ok := vars["ansible_connection"]; ok && h.Problem == "" {
		h.Problem = connectionProblem(a.at(v), h.Name, v)
		h.Local = h.Problem == "" && isLocalConnection(v.val)
	}
	return nil
}

// argsJump reads a bastion from the ssh arguments of h's variables.
func (a *aInv) argsJump(h *Host, vars map[string]aVar) error {
	// As the ssh plugin passes them to ssh, where the first ProxyJump or
	// ProxyCommand wins. The usual Ansible bastion, -o ProxyCommand="ssh
	// -W %h:%p bastion", is read as the ProxyJump it is (ProxyCommandJump);
	// any other ProxyCommand is an error: gpuprep runs no command from an
	// inventory, and dialling the host directly would go around the
	// bastion.
	for _, k := range []string{"ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args"} {
		v, ok := vars[k]
		if !ok {
			continue
		}
		jump, command, found := proxyFromArgs(v.val)
		if !found {
			continue
		}
		if command != "" {
			if j, ok := ProxyCommandJump(command); ok {
				h.Jump = j
				break
			}
			return &Error{File: a.at(v), Line: v.line, Field: k, Msg: fmt.Sprintf("host %q: ProxyCommand %q is not supported (gpuprep runs no command from an inventory; only a bastion's ssh -W %%h:%%p [-p PORT] [-l USER] [USER@]HOST is read, as ProxyJump HOST): use -o ProxyJump=BASTION or -J BASTION, or set gpuprep_jump", h.Name, command)}
		}
		h.Jump = jump
		break
	}
	return nil
}

// proxyFromArgs finds the first -J X, -o ProxyJump=X or -o ProxyCommand=C
// in ssh arguments (split as the ssh plugin splits them: shlex without
// comments). ProxyCommand none is a direct connection ("", "", true).
func proxyFromArgs(s string) (jump, command string, found bool) {
	f, err := splitFields(s, false)
	if err != nil {
		return "", "", false
	}
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == "-J" && i+1 < len(f):
			return f[i+1], "", true
		case strings.HasPrefix(f[i], "-J") && len(f[i]) > 2:
			return f[i][2:], "", true
		case f[i] == "-o" && i+1 < len(f):
			if j, c, ok := proxyOption(f[i+1]); ok {
				return j, c, true
			}
			i++
		case strings.HasPrefix(f[i], "-o"):
			if j, c, ok := proxyOption(f[i][2:]); ok {
				return j, c, true
			}
		}
	}
	return "", "", false
}

// proxyOption reads an ssh -o option (KEY=VALUE or KEY VALUE): a
// ProxyJump or ProxyCommand as proxyFromArgs returns it; false for any
// other.
func proxyOption(o string) (jump, command string, found bool) {
	k, v, ok := strings.Cut(o, "=")
	if !ok {
		k, v, ok = strings.Cut(o, " ")
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	switch {
	case !ok:
	case strings.EqualFold(k, "ProxyJump"):
		return v, "", true
	case strings.EqualFold(k, "ProxyCommand") && strings.EqualFold(v, "none"):
		return "", "", true
	case strings.EqualFold(k, "ProxyCommand"):
		return "", v, true
	}
	return "", "", false
}

// splitFields splits a line into fields the way Ansible's INI parser
// (shlex, POSIX mode) does: whitespace separates, quotes group and are
// removed, a backslash outside quotes escapes any character. With
// comments, a # outside quotes ends the line, inside a word too (shlex's
// commenters, as the INI parser splits host lines).
func splitFields(s string, comments bool) ([]string, error) {
	var out []string
	var cur strings.Builder
	inField := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			// Single quotes take everything up to the next one literally.
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			cur.WriteString(s[i+1 : i+1+j])
			inField = true
			i += j + 1
		case c == '"':
			val, n, ok := scanDoubleQuoted(s[i+1:])
			if !ok {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			cur.WriteString(val)
			inField = true
			i += n
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inField = true
			i++
		case c == '\\':
			return nil, fmt.Errorf("a backslash at the end escapes nothing")
		case c == ' ' || c == '\t':
			if inField {
				out = append(out, cur.String())
				cur.Reset()
				inField = false
			}
		case c == '#' && comments:
			// a comment to the end of the line
			i = len(s)
		default:
			cur.WriteByte(c)
			inField = true
		}
	}
	if inField {
		out = append(out, cur.String())
	}
	return out, nil
}

// scanDoubleQuoted reads the inside of a double-quoted string up to its
// closing quote; n counts the bytes read, the quote included. As in shlex's
// POSIX mode, a backslash escapes only a double quote or a backslash (so
// "a\"b" is a"b and "a\\b" is a\b) and is kept before any other character.
func scanDoubleQuoted(s string) (val string, n int, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return b.String(), i + 1, true
		case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// expandRange expands Ansible host ranges as expand_hostname_range does:
// the first [begin:end] or [begin:end:step] (an empty begin is 0; a
// zero-padded begin pads every number to its width, and then end must be
// as wide), numbers or letters (over a-z then A-Z), then the ranges in each
// name made. A [ that opens no range is an error, as in Ansible; a range
// that counts down is no host.
func expandRange(pat string) ([]string, error) {
	var out []string
	err := expandRangeInto(pat, &out)
	return out, err
}

// maxRangeHosts bounds what one host pattern expands to (Ansible sets no
// bound; a typo such as [1:10000000] would otherwise take the memory).
const maxRangeHosts = 100000

const asciiLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

var pyIntText = lazyRegexp(`^[+-]?[0-9](?:_?[0-9])*$`)

// pyInt is Python's int() of a string: blanks around, a sign, digits with
// single underscores between them.
func pyInt(s string) (int, bool) {
	n, ok := pyBigInt(s)
	if !ok || !n.IsInt64() {
		return 0, false
	}
	return int(n.Int64()), true
}

// pyBigInt is pyInt without a size limit.
func pyBigInt(s string) (*big.Int, bool) {
	s = strings.TrimSpace(s)
	if !pyIntText().MatchString(s) {
		return nil, false
	}
	return new(big.Int).SetString(strings.ReplaceAll(s, "_", ""), 10)
}

func expandRangeInto(pat string, out *[]string) error {
	i := strings.IndexByte(pat, '[')
	if i < 0 {
		*out = append(*out, pat)
		return nil
	}
	j := strings.IndexByte(pat[i:], ']')
	if j < 0 {
		return fmt.Errorf("%q: [ without ] (a host range is [begin:end] or [begin:end:step])", pat)
	}
	j += i
	head, tail := pat[:i], pat[j+1:]
	items, err := rangeItems(pat, pat[i+1:j])
	if err != nil {
		return err
	}
	for _, it := range items {
		if len(*out) > maxRangeHosts {
			return fmt.Errorf("%q: the host range makes more than %d hosts", pat, maxRangeHosts)
		}
		if err := expandRangeInto(head+it+tail, out); err != nil {
			return err
		}
	}
	return nil
}

// rangeItems are what the range nrange (the inside of its brackets, in
// the host pattern pat) stands for, in order: letters or numbers.
func rangeItems(pat, nrange string) ([]string, error) {
	beg, end, stepText, width, err := rangeBounds(pat, nrange)
	if err != nil {
		return nil, err
	}
	step, stepOK := pyInt(stepText)
	ib, ie := strings.Index(asciiLetters, beg), strings.Index(asciiLetters, end)
	if ib >= 0 && ie >= 0 && stepOK && step != 0 {
		if ib > ie {
			return nil, fmt.Errorf("%q: the host range's begin comes after its end", pat)
		}
		var items []string
		for k := ib; k <= ie && step > 0; k += step {
			items = append(items, asciiLetters[k:k+1])
		}
		return items, nil
	}
	lo, ok1 := pyBigInt(beg)
	hi, ok2 := pyBigInt(end)
	if !ok1 || !ok2 || !stepOK || step == 0 {
		return nil, fmt.Errorf("%q: bad host range (begin, end and step must be numbers, or begin and end letters)", pat)
	}
	return numberRange(pat, lo, hi, step, width)
}

// rangeBounds splits a range's inside, begin:end or begin:end:step, into
// its begin (0 when empty), end and step (1 when none), and the width a
// zero-padded begin gives every number (0: none).
func rangeBounds(pat, nrange string) (beg, end, step string, width int, err error) {
	bounds := strings.Split(nrange, ":")
	if len(bounds) != 2 && len(bounds) != 3 {
		return "", "", "", 0, fmt.Errorf("%q: a host range is [begin:end] or [begin:end:step]", pat)
	}
	beg, end, step = cmp.Or(bounds[0], "0"), bounds[1], "1"
	if len(bounds) == 3 {
		step = bounds[2]
	}
	if end == "" {
		return "", "", "", 0, fmt.Errorf("%q: the host range has no end", pat)
	}
	if beg[0] == '0' && len(beg) > 1 {
		if len(beg) != len(end) {
			return "", "", "", 0, fmt.Errorf("%q: a zero-padded host range needs begin and end of one width", pat)
		}
		width = len(beg)
	}
	return beg, end, step, width, nil
}

// numberRange is Python's range(lo, hi+1, step), each number zero-padded
// to width, counted before it is made (in big integers: no bound
// overflows); an error when it makes more than maxRangeHosts.
func numberRange(pat string, lo, hi *big.Int, step, width int) ([]string, error) {
	st := big.NewInt(int64(step))
	span := new(big.Int).Sub(new(big.Int).Add(hi, big.NewInt(1)), lo) // stop - start
	if step < 0 {
		span.Neg(span)
		st.Neg(st)
	}
	n := new(big.Int)
	if span.Sign() > 0 {
		n.Add(span, new(big.Int).Sub(st, big.NewInt(1)))
		n.Quo(n, st) // ceil(span / |step|)
	}
	if n.Cmp(big.NewInt(maxRangeHosts)) > 0 {
		return nil, fmt.Errorf("%q: the host range makes more than %d hosts", pat, maxRangeHosts)
	}
	var items []string
	k := new(big.Int).Set(lo)
	for i := int64(0); i < n.Int64(); i++ {
		items = append(items, zfill(k.String(), width))
		k.Add(k, big.NewInt(int64(step)))
	}
	return items, nil
}

// zfill is Python's str.zfill: pads with zeros after any sign.
func zfill(s string, width int) string {
	if len(s) >= width {
		return s
	}
	sign := ""
	if s[0] == '-' || s[0] == '+' {
		sign, s = s[:1], s[1:]
	}
	return sign + strings.Repeat("0", width-len(s)-len(sign)) + s
}

// pySplitLines splits text into lines as Python's str.splitlines, which
// Ansible's INI parser uses: at \n, \r\n, \r, \v, \f, \x1c-\x1e, U+0085,
// U+2028 and U+2029.
func pySplitLines(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		switch r {
		case '\n', '\r', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
			if r == '\n' && i > 0 && s[i-1] == '\r' && start == i {
				start = i + 1 // the \n of \r\n
				continue
			}
			out = append(out, s[start:i])
			start = i + utf8.RuneLen(r)
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func parseINI(file string, data []byte, vd *varsDirs) (*Inventory, error) {
	a := newAInv(file, "ansible-ini")
	a.vdirs = vd
	if err := a.readINI(file, data); err != nil {
		return nil, err
	}
	finishImplicit(a)
	return a.resolve()
}

// readINI reads one INI inventory file into a (an inventory directory reads
// several into one).
func (a *aInv) readINI(file string, data []byte) error {
	a.file = file
	r := &iniReader{a: a, file: file, section: "ungrouped", kind: "hosts",
		defined: map[string]bool{"all": true, "ungrouped": true}, varsOnly: map[string]int{}, childAt: map[string]iniChildRef{}}
	for n := range a.groups {
		r.defined[n] = true
	}
	a.group("all", 0)
	a.group("ungrouped", 0)
	for _, text := range pySplitLines(string(data)) {
		r.line++
		if err := r.readLine(strings.TrimSpace(text)); err != nil {
			return err
		}
	}
	return r.undefined()
}

// iniReader is where the reading of one INI inventory file is: the line,
// the section it is in, and the groups named so far. A group is defined by
// a [g] or [g:children] section, or by an earlier file of the directory;
// [g:vars] or a child entry without one is an error, as in Ansible
// ("Section [g:vars] not valid for undefined group", "includes undefined
// group").
type iniReader struct {
	a       *aInv
	file    string
	line    int
	section string
	kind    string // of the section: hosts, vars or children
	defined map[string]bool
	// varsOnly: where a group's first [g:vars] is; childAt: where a group is
	// first named as a child
	varsOnly map[string]int
	childAt  map[string]iniChildRef
}

type iniChildRef struct {
	line   int
	parent string
}

func (r *iniReader) bad(field, msg string) error {
	return &Error{File: r.file, Line: r.line, Field: field, Msg: msg}
}

// readLine reads one line t, trimmed, of the file.
func (r *iniReader) readLine(t string) error {
	switch {
	case t == "" || t[0] == '#' || t[0] == ';':
		return nil
	case t[0] == '[' && !startsBracketedHost(t):
		return r.sectionLine(t)
	}
	switch r.kind {
	case "vars":
		return r.varLine(t)
	case "children":
		return r.childLine(t)
	}
	return r.hostLine(t)
}

// sectionLine starts a section. As Ansible's section pattern: [name] or
// [name:type], then nothing but blanks and a # comment.
func (r *iniReader) sectionLine(t string) error {
	end := strings.IndexByte(t, ']')
	if rest := strings.TrimSpace(t[end+1:]); end < 0 || rest != "" && rest[0] != '#' {
		return r.bad("section", fmt.Sprintf("%q: want [group], [group:vars] or [group:children]", t))
	}
	name := t[1:end]
	r.kind = "hosts"
	if n, k, ok := strings.Cut(name, ":"); ok {
		if k != "vars" && k != "children" {
			return r.bad("section", fmt.Sprintf("[%s]: unknown section type %q (want vars or children)", name, k))
		}
		name, r.kind = n, k
	}
	if name == "" || strings.ContainsAny(name, " \t") {
		return r.bad("section", fmt.Sprintf("%q is not a group name", name))
	}
	r.section = name
	r.a.group(name, r.line)
	if r.kind != "vars" {
		r.defined[name] = true
	} else if _, ok := r.varsOnly[name]; !ok {
		r.varsOnly[name] = r.line
	}
	return nil
}

// varLine is a key=value line of a [g:vars] section: the text after = as
// written (no comment, no splitting), as Ansible's
// _parse_variable_definition takes it.
func (r *iniReader) varLine(t string) error {
	k, v, ok := strings.Cut(t, "=")
	if !ok {
		return r.bad(r.section+":vars", fmt.Sprintf("%q: want key=value", t))
	}
	k = strings.TrimSpace(k)
	r.a.groups[r.section].vars[k] = aVar{val: pyLiteral(strings.TrimSpace(v)), line: r.line, file: r.file}
	return nil
}

// childLine is a line of a [g:children] section. As Ansible's groupname
// pattern: the name as written (no quotes or escapes), then blanks and a #
// comment at most.
func (r *iniReader) childLine(t string) error {
	name := t
	if i := strings.IndexAny(t, " \t"); i >= 0 {
		rest := strings.TrimLeft(t[i:], " \t")
		name = t[:i]
		if rest != "" && rest[0] != '#' {
			return r.bad(r.section+":children", fmt.Sprintf("%q: want one group name per line", t))
		}
	}
	if strings.ContainsAny(name, ":]") {
		return r.bad(r.section+":children", fmt.Sprintf("%q is not a group name", name))
	}
	g := r.a.groups[r.section]
	if !contains(g.children, name) {
		g.children = append(g.children, name)
	}
	if _, ok := r.childAt[name]; !ok {
		r.childAt[name] = iniChildRef{r.line, r.section}
	}
	return nil
}

// hostLine is a host line: a host pattern, then key=value variables.
func (r *iniReader) hostLine(t string) error {
	f, err := splitFields(t, true)
	if err != nil {
		return r.bad("host", err.Error())
	}
	if len(f) == 0 {
		return nil
	}
	vars := map[string]aVar{}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			pat, _ := splitPatternPort(f[0])
			return r.bad("host", fmt.Sprintf("host %q: %q: want key=value", pat, kv))
		}
		vars[k] = aVar{val: pyLiteral(v), line: r.line, file: r.file}
	}
	return r.a.addHosts(r.a.groups[r.section], f[0], r.line, "host", vars)
}

// undefined is the error of a child or a [g:vars] of a group with no [g]
// or [g:children] section anywhere in the file, as in Ansible (being a
// child does not define a group); nil when there is none.
func (r *iniReader) undefined() error {
	for _, name := range slices.Sorted(maps.Keys(r.childAt)) {
		if c := r.childAt[name]; !r.defined[name] {
			return &Error{File: r.file, Line: c.line, Field: c.parent + ".children", Msg: fmt.Sprintf("group %q is not defined (no [%s] or [%s:children] section)", name, name, name)}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.varsOnly)) {
		if !r.defined[name] {
			return &Error{File: r.file, Line: r.varsOnly[name], Field: "section", Msg: fmt.Sprintf("[%s:vars]: group %q is not defined (no [%s] or [%s:children] section)", name, name, name, name)}
		}
	}
	return nil
}

// startsBracketedHost reports whether an INI line that starts with '[' is a
// host line naming a bracketed address with a port ([fe80::1]:2222 …), the
// one form in which an IPv6 address takes a port, rather than a section.
func startsBracketedHost(t string) bool {
	f := strings.Fields(t)
	return len(f) > 0 && bracketedHostPort().MatchString(f[0])
}

// finishImplicit makes every top-level group a child of all (resolve puts
// hosts that are in no other group into ungrouped).
func finishImplicit(a *aInv) {
	all := a.groups["all"]
	isChild := a.childSet()
	for n := range a.groups {
		if n != "all" && !isChild[n] && !contains(all.children, n) {
			all.children = append(all.children, n)
		}
	}
	sort.Strings(all.children)
}

func parseAnsibleYAML(file string, m *yaml.Node, vd *varsDirs) (*Inventory, error) {
	a := newAInv(file, "ansible-yaml")
	a.vdirs = vd
	if err := a.readYAML(file, m); err != nil {
		return nil, err
	}
	finishImplicit(a)
	return a.resolve()
}

// readYAML reads one YAML inventory (its top mapping, m) into a.
func (a *aInv) readYAML(file string, m *yaml.Node) error {
	a.file = file
	a.group("all", m.Line)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if err := a.yamlGroup(m.Content[i], m.Content[i+1]); err != nil {
			return err
		}
	}
	if a.groups["ungrouped"] == nil {
		a.group("ungrouped", 0)
	}
	return nil
}

func (a *aInv) yamlGroup(k, v *yaml.Node) error {
	v = yamlDeref(v)
	// A group that holds itself through an alias (g: &g {children: {g:
	// *g}}) is refused, as Ansible does (it recurses until Python stops
	// it); gpuprep would recurse until Go's stack ran out.
	if a.yamlOn[v] {
		return &Error{File: a.file, Line: k.Line, Field: k.Value, Msg: "the group contains itself through a YAML alias"}
	}
	if a.yamlOn == nil {
		a.yamlOn = map[*yaml.Node]bool{}
	}
	a.yamlOn[v] = true
	defer delete(a.yamlOn, v)
	if err := a.spend(k); err != nil {
		return err
	}
	g := a.group(k.Value, k.Line)
	if v.Kind == yaml.ScalarNode && (v.Tag == "!!null" || v.Value == "") {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return &Error{File: a.file, Line: v.Line, Field: k.Value, Msg: "want a group: a mapping with hosts, children, vars"}
	}
	// A group may take its fields from an anchor (<<: *base), as PyYAML
	// reads it.
	v, err := a.yamlMerged(v, k.Value, nil)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		if err := a.yamlGroupField(g, k.Value, v.Content[i], yamlDeref(v.Content[i+1])); err != nil {
			return err
		}
	}
	return nil
}

// yamlGroupField reads field fk (hosts, children or vars) of group g,
// named name, with its value fv.
func (a *aInv) yamlGroupField(g *aGroup, name string, fk, fv *yaml.Node) error {
	field := name + "." + fk.Value
	if fv.Kind == yaml.ScalarNode && fv.Tag != "!!null" && fv.Value != "" && (fk.Value == "hosts" || fk.Value == "children") {
		// hosts: h1 is {h1: null}, as Ansible reads it.
		fv = &yaml.Node{Kind: yaml.MappingNode, Line: fv.Line, Column: fv.Column,
			Content: []*yaml.Node{fv, {Kind: yaml.ScalarNode, Tag: "!!null", Line: fv.Line}}}
	}
	empty := fv.Kind == yaml.ScalarNode && (fv.Tag == "!!null" || fv.Value == "")
	switch fk.Value {
	case "hosts":
		if empty {
			return nil
		}
		return a.yamlHosts(g, field, fv)
	case "children":
		if empty {
			return nil
		}
		return a.yamlChildren(g, field, fv)
	case "vars":
		vars, err := a.yamlVars(fv, field)
		if err != nil {
			return err
		}
		maps.Copy(g.vars, vars)
		return nil
	}
	return &Error{File: a.file, Line: fk.Line, Field: field, Msg: "unknown group field (want hosts, children, vars)"}
}

// yamlHosts reads a group's hosts: a mapping of host patterns to their
// variables.
func (a *aInv) yamlHosts(g *aGroup, field string, fv *yaml.Node) error {
	if fv.Kind != yaml.MappingNode {
		return &Error{File: a.file, Line: fv.Line, Field: field, Msg: "want a mapping of host names to variables"}
	}
	for j := 0; j+1 < len(fv.Content); j += 2 {
		hk, hv := fv.Content[j], fv.Content[j+1]
		if err := a.spend(hk); err != nil {
			return err
		}
		if t := yamlHostKeyType(hk); t != "" {
			return &Error{File: a.file, Line: hk.Line, Field: field, Msg: fmt.Sprintf("host %q reads as %s in YAML, as Ansible reads it (Host pattern must be a string): quote it", hk.Value, t)}
		}
		vars, err := a.yamlVars(hv, field+"."+hk.Value)
		if err != nil {
			return err
		}
		if err := a.addHosts(g, hk.Value, hk.Line, field, vars); err != nil {
			return err
		}
	}
	return nil
}

// yamlChildren reads a group's children: a mapping of group names to
// groups.
func (a *aInv) yamlChildren(g *aGroup, field string, fv *yaml.Node) error {
	if fv.Kind != yaml.MappingNode {
		return &Error{File: a.file, Line: fv.Line, Field: field, Msg: "want a mapping of group names"}
	}
	for j := 0; j+1 < len(fv.Content); j += 2 {
		ck := fv.Content[j]
		if !contains(g.children, ck.Value) {
			g.children = append(g.children, ck.Value)
		}
		if err := a.yamlGroup(ck, fv.Content[j+1]); err != nil {
			return err
		}
	}
	return nil
}

func (a *aInv) yamlVars(n *yaml.Node, field string) (map[string]aVar, error) {
	out := map[string]aVar{}
	n = yamlDeref(n)
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Value == "") {
		return out, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, &Error{File: a.file, Line: n.Line, Field: field, Msg: "want a mapping of variables"}
	}
	n, err := a.yamlMerged(n, field, nil)
	if err != nil {
		return nil, err
	}
	m, _, err := varsMap(a.file, n, field)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, yamlDeref(n.Content[i+1])
		val := m[k]
		// The port Ansible connects to is the number PyYAML (YAML 1.1)
		// reads: ansible_port: 010 is port 8. Other variables keep their
		// text (see yaml11Int).
		if (k == "ansible_port" || k == "ansible_ssh_port") && v.Kind == yaml.ScalarNode && v.Style == 0 {
			if p, ok := yaml11Int(v.Value); ok {
				val = p
			}
		}
		out[k] = aVar{val: val, line: n.Content[i+1].Line, file: a.file}
		if hasVaultTag(v, 0) { // encrypted: no value rather than its ciphertext
			out[k] = aVar{line: n.Content[i+1].Line, file: a.file, vault: true}
		}
	}
	return out, nil
}

// yamlDeref follows an alias (*name) to the node it names.
func yamlDeref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// yamlMerged applies YAML merge keys (<<: *base, or a list of them) to a
// mapping, as PyYAML does: the mapping's own keys win; of several << keys
// the later wins, of a list of mappings the earlier. A mapping merged into
// itself through an alias (on is the merge path) adds nothing more.
func (a *aInv) yamlMerged(n *yaml.Node, field string, on map[*yaml.Node]bool) (*yaml.Node, error) {
	file := a.file
	if err := a.spend(n); err != nil {
		return nil, err
	}
	own, has, groups, err := a.mergeKeys(n, field)
	if err != nil {
		return nil, err
	}
	if groups == nil {
		return n, nil
	}
	if on == nil {
		on = map[*yaml.Node]bool{}
	}
	on[n] = true
	defer delete(on, n)
	merged := []*yaml.Node{}
	for gi := len(groups) - 1; gi >= 0; gi-- {
		for _, src := range groups[gi] {
			if src.Kind != yaml.MappingNode {
				return nil, &Error{File: file, Line: src.Line, Field: field, Msg: "<< (merge key): want a mapping or a list of mappings"}
			}
			if on[src] {
				continue
			}
			src, err := a.yamlMerged(src, field, on)
			if err != nil {
				return nil, err
			}
			for i := 0; i+1 < len(src.Content); i += 2 {
				if k := src.Content[i]; !has[k.Value] {
					has[k.Value] = true
					merged = append(merged, k, src.Content[i+1])
				}
			}
		}
	}
	c := *n
	c.Content = append(own, merged...)
	return &c, nil
}

// mergeKeys splits mapping n into its own keys and values (own, their
// keys in has) and the mappings of each of its << keys (groups; nil when
// it has none).
func (a *aInv) mergeKeys(n *yaml.Node, field string) (own []*yaml.Node, has map[string]bool, groups [][]*yaml.Node, err error) {
	has = map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !(k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Style == 0 || k.Tag == "!!merge")) {
			own = append(own, k, v)
			has[k.Value] = true
			continue
		}
		v = yamlDeref(v)
		var g []*yaml.Node
		switch v.Kind {
		case yaml.MappingNode:
			g = append(g, v)
		case yaml.SequenceNode:
			for _, e := range v.Content {
				g = append(g, yamlDeref(e))
			}
		default:
			return nil, nil, nil, &Error{File: a.file, Line: k.Line, Field: field, Msg: "<< (merge key): want a mapping or a list of mappings"}
		}
		groups = append(groups, g)
	}
	return own, has, groups, nil
}

var (
	yaml11IntRe = lazyRegexp(`^[-+]?(?:0b[01_]+|0x[0-9a-fA-F_]+|0[0-7_]+|0|[1-9][0-9_]*|[1-9][0-9_]*(?::[0-5]?[0-9])+)$`)
	yaml11Bool  = map[string]bool{"yes": true, "Yes": true, "YES": true, "no": true, "No": true, "NO": true, "true": true, "True": true, "TRUE": true,
		"false": true, "False": true, "FALSE": true, "on": true, "On": true, "ON": true, "off": true, "Off": true, "OFF": true}
)

// yaml11Int is the integer PyYAML (YAML 1.1, as Ansible loads YAML) reads
// in a plain scalar, in decimal: 010 is 8, 0x1F 31, 1_000 1000, 1:20 80.
// gpuprep reads only the connection port so; its own variables keep their
// text (YAML 1.1 would make the PCI address 0000:41:00.0 the float 2460.0).
func yaml11Int(s string) (string, bool) {
	if !yaml11IntRe().MatchString(s) {
		return "", false
	}
	t := strings.ReplaceAll(s, "_", "")
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimLeft(t, "+-")
	var n int64
	var err error
	switch {
	case strings.Contains(t, ":"):
		for _, part := range strings.Split(t, ":") {
			d, e := strconv.ParseInt(part, 10, 64)
			if e != nil {
				return "", false
			}
			n = n*60 + d
		}
	case strings.HasPrefix(t, "0b"):
		n, err = strconv.ParseInt(t[2:], 2, 64)
	case strings.HasPrefix(t, "0x"):
		n, err = strconv.ParseInt(t[2:], 16, 64)
	case len(t) > 1 && t[0] == '0':
		n, err = strconv.ParseInt(t[1:], 8, 64)
	default:
		n, err = strconv.ParseInt(t, 10, 64)
	}
	if err != nil {
		return "", false
	}
	if neg {
		n = -n
	}
	return strconv.FormatInt(n, 10), true
}

// yamlHostKeyType names what PyYAML reads a plain host key as when it is
// no string ("" when it is one): Ansible refuses such a host ("Host
// pattern must be a string").
func yamlHostKeyType(k *yaml.Node) string {
	if k.Kind != yaml.ScalarNode || k.Style != 0 {
		return ""
	}
	switch {
	case k.Tag == "!!int" || k.Tag == "!!float":
		return "a number"
	case k.Tag == "!!bool" || yaml11Bool[k.Value]:
		return "a boolean"
	case k.Tag == "!!null":
		return "null"
	}
	if _, ok := yaml11Int(k.Value); ok {
		return "a number"
	}
	return ""
}
