package fleet

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// Select returns the hosts matching limit and groups, in inventory order.
//
// limit is a list of patterns separated by commas or colons (as Ansible's
// --limit): each a shell glob matched against the host name, its address
// or one of its groups; a pattern starting with ! excludes, one starting
// with & must also match. groups (any of them) further restricts the
// selection. Empty limit and groups select every host.
func Select(hosts []*Host, limit string, groups []string) ([]*Host, error) {
	lim, err := parseLimit(limit)
	if err != nil {
		return nil, err
	}
	if err := knownGroups(hosts, groups); err != nil {
		return nil, err
	}
	var out []*Host
	for _, h := range hosts {
		if lim.admits(h) && inGroups(h, groups) {
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		return nil, noMatch(limit, groups)
	}
	return out, nil
}

// hostLimit is a parsed --limit: the patterns that include, exclude (!)
// and must also match (&).
type hostLimit struct{ incl, excl, inter []string }

// parseLimit parses --limit, refusing a pattern path.Match cannot take.
func parseLimit(limit string) (hostLimit, error) {
	var l hostLimit
	for _, p := range strings.FieldsFunc(limit, func(r rune) bool { return r == ',' || r == ':' }) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		dst := &l.incl
		switch p[0] {
		case '!':
			dst, p = &l.excl, p[1:]
		case '&':
			dst, p = &l.inter, p[1:]
		}
		if _, err := path.Match(p, ""); err != nil {
			return hostLimit{}, fmt.Errorf("--limit %q: %v", p, err)
		}
		*dst = append(*dst, p)
	}
	return l, nil
}

// admits says whether h is in the limit: it matches an including pattern
// (when there is one), no excluding one, and every & one.
func (l hostLimit) admits(h *Host) bool {
	if len(l.incl) > 0 && !matchesAny(h, l.incl) {
		return false
	}
	if matchesAny(h, l.excl) {
		return false
	}
	for _, p := range l.inter {
		if !limitMatch(h, p) {
			return false
		}
	}
	return true
}

// limitMatch says whether the --limit pattern p matches h's name, address
// or one of its groups ("all" and "*" match every host).
func limitMatch(h *Host, p string) bool {
	if p == "all" || p == "*" {
		return true
	}
	for _, s := range append([]string{h.Name, h.Address}, h.Groups...) {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// matchesAny says whether one of the patterns ps matches h.
func matchesAny(h *Host, ps []string) bool {
	for _, p := range ps {
		if limitMatch(h, p) {
			return true
		}
	}
	return false
}

// knownGroups refuses a --group no host is in ("all" aside).
func knownGroups(hosts []*Host, groups []string) error {
	known := map[string]bool{}
	for _, h := range hosts {
		for _, g := range h.Groups {
			known[g] = true
		}
	}
	for _, g := range groups {
		if strings.TrimSpace(g) == "" {
			return fmt.Errorf("--group %q names no group (an empty value, an unset variable?): give an inventory group's name, or leave --group out for every host", g)
		}
		if !known[g] && g != "all" {
			return fmt.Errorf("--group %q: no host is in that group", g)
		}
	}
	return nil
}

// inGroups says whether h is in one of groups (none given, or "all": every
// host is).
func inGroups(h *Host, groups []string) bool {
	if len(groups) == 0 || contains(groups, "all") {
		return true
	}
	for _, g := range groups {
		if contains(h.Groups, g) {
			return true
		}
	}
	return false
}

// SSHConfig is a parsed ssh_config file (~/.ssh/config) with the files it
// includes.
//
// github.com/kevinburke/ssh_config reads the file's lines (keywords,
// values, quotes, comments, line numbers), but which blocks apply to a host
// is decided here, as ssh's first pass does (readconf.c): blocks in file
// order, the first value of a keyword wins, IdentityFile accumulates, and
// `Match host` sees the HostName set so far, `Match user` the user so far.
// The library cannot be left to do it: it refuses every Match but `Match
// host` and `Match all` ("Match Exec is not supported", `unsupported Match
// criterion "originalhost"`), which made one such block anywhere in
// ~/.ssh/config stop every fleet command; it matches `Match host` against
// the alias rather than the HostName, reads `Match host a user b` as three
// host patterns and `Match host a,b` as one, and parses Included files
// itself with the same limits. So each Host and Match line reaches it as a
// placeholder Host line and each Include line as a comment, and this file
// evaluates them.
//
// Match criteria that gpuprep cannot evaluate (exec, which would run a
// command; canonical and final, which need ssh's second pass; tagged,
// localnetwork and any newer one) leave a block undecided. An undecided
// block that only sets options gpuprep does not read, or ones already
// decided for the host, is passed over: it cannot change how gpuprep
// connects, and many real configs have such blocks (an IdentityAgent under
// `Match exec`). One that would set a host's HostName, User, Port,
// IdentityFile or ProxyJump is an error for that host, naming the file and
// line and the way past it (setting the value in the inventory, which wins,
// or --ssh-config none): guessing either way could dial the wrong address,
// as the wrong user or around a bastion, and ignoring the whole file would
// also drop the settings that are right. A warning and carrying on was not
// chosen for that reason, and this package writes to no terminal.
//
// ssh itself is the oracle (select_oracle_test.go runs `ssh -G` and `ssh
// -v` on each case). Deliberate differences: a keyword gpuprep does not
// read is passed over whether ssh knows it or not (ssh refuses an unknown
// one, but a keyword newer than any list here must not stop a fleet run
// where the user's ssh reads it); ~ and %d expand from $HOME, as Ansible's
// expanduser does, where ssh takes the passwd entry's home.
type SSHConfig struct {
	root *cfgFile // nil: no file
}

// cfgFile is one ssh_config file: its blocks in order.
type cfgFile struct {
	name   string
	blocks []*cfgBlock
}

// wantsFinal reports whether a Match line in f or a file it includes has a
// final criterion (negated or not, included under a block that applies or
// not): ssh 9.2 then parses the config a second time (see lookup).
func (f *cfgFile) wantsFinal() bool {
	for _, b := range f.blocks {
		for _, c := range b.crits {
			if c.attr == "final" {
				return true
			}
		}
		for _, it := range b.items {
			for _, inc := range it.included {
				if inc.wantsFinal() {
					return true
				}
			}
		}
	}
	return false
}

// cfgBlock is a file's implicit first block (line 0: it applies wherever
// the file does), a Host block or a Match block, with the lines under it.
type cfgBlock struct {
	line     int
	kind     string   // "", "host" or "match"
	patterns []string // Host
	crits    []matchCrit
	text     string // the Host or Match line, for messages
	items    []cfgItem
}

// matchCrit is one criterion of a Match line: [!]attr [arg].
type matchCrit struct {
	neg       bool
	attr, arg string
}

// cfgItem is a keyword line, or an Include with the files it named.
type cfgItem struct {
	line     int
	key      string // lower case
	value    string
	included []*cfgFile
}

// blockPlaceholder starts the Host line that stands in for the Host or
// Match line on line N when the library reads a file.
const blockPlaceholder = "gpuprep-ssh-config-block-line-"

// maxIncludeDepth is OpenSSH's READCONF_MAX_DEPTH.
const maxIncludeDepth = 16

// SystemSSHConfig is the system-wide ssh_config ssh reads after the
// user's file when no file is named (ssh -F).
var SystemSSHConfig = "/etc/ssh/ssh_config"

// LoadSSHConfig reads an ssh_config file and those it includes; a missing
// file is an empty config.
func LoadSSHConfig(file string) (*SSHConfig, error) {
	return LoadSSHConfigs(file)
}

// LoadSSHConfigs reads ssh_config files that apply one after the other, as
// ssh reads ~/.ssh/config and then /etc/ssh/ssh_config: the first value
// found in either wins. A missing file is passed over.
func LoadSSHConfigs(files ...string) (*SSHConfig, error) {
	var loaded []*cfgFile
	for _, file := range files {
		data, err := readBounded(file, maxSSHConfigFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		f, err := parseCfgFile(file, data, 0)
		if err != nil {
			return nil, err
		}
		loaded = append(loaded, f)
	}
	switch len(loaded) {
	case 0:
		return &SSHConfig{}, nil
	case 1:
		return &SSHConfig{root: loaded[0]}, nil
	}
	// The files in sequence, as if one included the next.
	return &SSHConfig{root: &cfgFile{blocks: []*cfgBlock{{items: []cfgItem{{key: "include", included: loaded}}}}}}, nil
}

// loadCfgFile reads an included file (depth: how many Includes deep).
func loadCfgFile(name string, depth int) (*cfgFile, error) {
	data, err := readBounded(name, maxSSHConfigFile)
	if err != nil {
		return nil, err
	}
	return parseCfgFile(name, data, depth)
}

// parseCfgFile parses one file's data and loads the files it includes.
func parseCfgFile(name string, data []byte, depth int) (*cfgFile, error) {
	text, headers, includes, raw, err := cfgPlaceholders(name, data)
	if err != nil {
		return nil, err
	}
	c, err := ssh_config.DecodeBytes(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	f := &cfgFile{name: name}
	for i, lh := range c.Hosts {
		b := &cfgBlock{}
		if i > 0 {
			if b = cfgHeader(lh, headers); b == nil {
				return nil, fmt.Errorf("%s: cannot read block %d", name, i)
			}
		}
		for _, n := range lh.Nodes {
			it, ok, err := cfgNode(name, n, includes, raw, depth)
			if err != nil {
				return nil, err
			}
			if ok {
				b.items = append(b.items, it)
			}
		}
		f.blocks = append(f.blocks, b)
	}
	return f, nil
}

// cfgHeader finds the Host or Match line a library block stands for.
func cfgHeader(lh *ssh_config.Host, headers map[int]*cfgBlock) *cfgBlock {
	if len(lh.Patterns) != 1 {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(lh.Patterns[0].String(), blockPlaceholder))
	if err != nil {
		return nil
	}
	return headers[n]
}

// cfgNode turns a library node into an item: a keyword line, or an Include
// (whose files it loads). Comments and blank lines give no item. The value
// is taken from the line's raw text (raw), not the library's: it ends a
// value at any '#' and keeps quotes, where ssh ends it only at a '#' that
// starts an argument and strips the quotes.
func cfgNode(file string, n ssh_config.Node, includes map[int][]string, raw map[int]string, depth int) (cfgItem, bool, error) {
	switch n := n.(type) {
	case *ssh_config.KV:
		line := n.Pos().Line
		key := strings.ToLower(n.Key)
		v, err := cfgItemValue(key, raw[line])
		if err != nil {
			return cfgItem{}, false, fmt.Errorf("%s:%d: %s: %v", file, line, n.Key, err)
		}
		return cfgItem{line: line, key: key, value: v}, true, nil
	case *ssh_config.Empty:
		args, ok := includes[n.Pos().Line]
		if !ok {
			return cfgItem{}, false, nil
		}
		files, err := loadIncludes(file, n.Pos().Line, args, depth)
		return cfgItem{line: n.Pos().Line, key: "include", included: files}, true, err
	}
	return cfgItem{}, false, fmt.Errorf("%s:%d: unexpected %T", file, n.Pos().Line, n)
}

// cfgItemValue is the value of a keyword line as ssh reads it from rest
// (the text after the keyword): ProxyCommand takes the rest of the line,
// ProxyJump the rest up to a '#' (parse_jump), other options their first
// argument. The options gpuprep reads take one argument; ssh refuses a
// line with more, so the load does too rather than guess.
func cfgItemValue(key, rest string) (string, error) {
	switch key {
	case "proxycommand", "proxyjump":
		v := strings.TrimSpace(rest)
		if key == "proxyjump" {
			v, _, _ = strings.Cut(v, "#")
			v = strings.TrimSpace(v)
		}
		if v == "" {
			return "", fmt.Errorf("no value (ssh refuses the line too)")
		}
		return v, nil
	}
	args, err := cfgArgs(rest)
	if err != nil {
		return "", err
	}
	switch key {
	case "hostname", "user", "port", "identityfile", "canonicalizehostname":
		if len(args) == 0 || args[0] == "" {
			return "", fmt.Errorf("no value (ssh refuses the line too)")
		}
		if len(args) > 1 {
			return "", fmt.Errorf("extra arguments at end of line")
		}
	}
	if len(args) == 0 {
		return "", nil
	}
	return args[0], nil
}

// loadIncludes loads the files an Include line names: globs, relative to
// ~/.ssh (or /etc/ssh from a file there), as ssh does; a glob that matches
// nothing is no error.
func loadIncludes(file string, line int, args []string, depth int) ([]*cfgFile, error) {
	if depth+1 > maxIncludeDepth {
		return nil, fmt.Errorf("%s:%d: Include nested more than %d deep", file, line, maxIncludeDepth)
	}
	var out []*cfgFile
	for _, a := range args {
		names, err := filepath.Glob(includePath(file, a))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: Include %q: %v", file, line, a, err)
		}
		// glob(3) sorts its whole result; filepath.Glob sorts per
		// directory only.
		sort.Strings(names)
		for _, n := range names {
			if !includeReadable(n) {
				continue
			}
			f, err := loadCfgFile(n, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: Include: %v", file, line, err)
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// includeReadable reports whether an Include match is a file to read: ssh
// passes over a directory and a dangling symlink without complaint.
func includeReadable(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && !fi.IsDir()
}

// includePath is where an Include argument points.
func includePath(from, arg string) string {
	home, _ := os.UserHomeDir()
	switch {
	case arg == "~" || strings.HasPrefix(arg, "~/"):
		return filepath.Join(home, arg[1:])
	case filepath.IsAbs(arg):
		return arg
	case strings.HasPrefix(filepath.Clean(from), "/etc/ssh/"):
		return filepath.Join("/etc/ssh", arg)
	}
	return filepath.Join(home, ".ssh", arg)
}

// cfgPlaceholders rewrites data for the library, line for line: each Host
// or Match line becomes a placeholder Host line (headers keeps what it
// said), each Include line a comment (includes keeps its arguments). The
// keyword is found as the library's lexer finds it; raw keeps, for every
// other keyword line, the text after the keyword.
func cfgPlaceholders(file string, data []byte) (text []byte, headers map[int]*cfgBlock, includes map[int][]string, raw map[int]string, err error) {
	headers, includes, raw = map[int]*cfgBlock{}, map[int][]string{}, map[int]string{}
	var b strings.Builder
	for i, ln := range strings.SplitAfter(string(data), "\n") {
		n := i + 1
		body := strings.TrimRight(ln, "\r\n")
		eol := ln[len(body):]
		kw, rest := cfgKeyword(body)
		kw = strings.ToLower(kw)
		if kw != "host" && kw != "match" && kw != "include" {
			raw[n] = rest
			b.WriteString(ln)
			continue
		}
		args, err := cfgArgs(rest)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s:%d: %v", file, n, err)
		}
		if kw == "include" {
			includes[n] = args
			b.WriteString("#" + eol)
			continue
		}
		blk := &cfgBlock{line: n, kind: kw, text: strings.TrimSpace(body)}
		if kw == "host" {
			if len(args) == 0 {
				return nil, nil, nil, nil, fmt.Errorf("%s:%d: Host without patterns", file, n)
			}
			blk.patterns = args
		} else if blk.crits, err = parseMatch(args); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s:%d: %v", file, n, err)
		}
		headers[n] = blk
		b.WriteString("Host " + blockPlaceholder + strconv.Itoa(n) + eol)
	}
	return []byte(b.String()), headers, includes, raw, nil
}

// cfgKeyword splits a line into its keyword and what follows the keyword
// and its separator (spaces, tabs, at most one '='); a comment or blank
// line has no keyword.
func cfgKeyword(line string) (kw, rest string) {
	line = strings.TrimLeft(line, " \t")
	if line == "" || line[0] == '#' {
		return "", ""
	}
	end := strings.IndexAny(line, " \t=")
	if end < 0 {
		return line, ""
	}
	rest = strings.TrimLeft(line[end:], " \t")
	rest = strings.TrimLeft(strings.TrimPrefix(rest, "="), " \t")
	return line[:end], rest
}

// cfgArgs splits a line's arguments as ssh does (argv_split): at spaces
// and tabs, with "…" and '…' quoting and backslash escapes, up to a '#'
// that starts an argument.
func cfgArgs(s string) ([]string, error) {
	var t cfgTokens
	for i := 0; i < len(s); i++ {
		var stop bool
		if i, stop = t.step(s, i); stop {
			return t.args, nil
		}
	}
	if t.quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	t.endArg()
	return t.args, nil
}

// cfgTokens is cfgArgs's state: the arguments so far, the one being read
// (inArg: one has begun, even if empty: "") and the open quote (0: none).
type cfgTokens struct {
	args  []string
	cur   strings.Builder
	inArg bool
	quote byte
}

// step reads s[i] (and the character a backslash escapes), returning the
// index of the last one read; stop at a comment.
func (t *cfgTokens) step(s string, i int) (next int, stop bool) {
	c := s[i]
	if t.quote != 0 && c == t.quote {
		t.quote = 0
		return i, false
	}
	if t.quote == 0 {
		if handled, stop := t.unquoted(c); handled {
			return i, stop
		}
	}
	if c == '\\' && i+1 < len(s) && strings.IndexByte("\\\"' \t", s[i+1]) >= 0 {
		t.add(s[i+1])
		return i + 1, false
	}
	t.add(c)
	return i, false
}

// unquoted handles c outside quotes when it is a blank (ending the
// argument), a comment's # (stop) or an opening quote.
func (t *cfgTokens) unquoted(c byte) (handled, stop bool) {
	switch {
	case c == ' ' || c == '\t':
		t.endArg()
	case c == '#' && !t.inArg:
		return true, true
	case c == '"' || c == '\'':
		t.quote, t.inArg = c, true
	default:
		return false, false
	}
	return true, false
}

func (t *cfgTokens) add(c byte) {
	t.cur.WriteByte(c)
	t.inArg = true
}

func (t *cfgTokens) endArg() {
	if t.inArg {
		t.args, t.inArg = append(t.args, t.cur.String()), false
		t.cur.Reset()
	}
}

// parseMatch parses Match criteria: all, canonical and final stand alone,
// every other criterion takes an argument (attr=arg is read as attr arg).
func parseMatch(args []string) ([]matchCrit, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("Match without criteria")
	}
	var crits []matchCrit
	for i := 0; i < len(args); i++ {
		c := matchCrit{attr: strings.ToLower(args[i])}
		c.attr, c.neg = strings.CutPrefix(c.attr, "!")
		// As readconf.c: all ends the line, after one criterion at most.
		if c.attr == "all" && (i < len(args)-1 || len(crits) > 1) {
			return nil, fmt.Errorf("Match: %q cannot be combined with other Match criteria", args[i])
		}
		if a, v, ok := strings.Cut(args[i], "="); ok {
			c.attr, c.arg = strings.TrimPrefix(strings.ToLower(a), "!"), v
		} else if c.attr != "all" && c.attr != "canonical" && c.attr != "final" {
			if i+1 == len(args) {
				return nil, fmt.Errorf("Match %s needs an argument", c.attr)
			}
			i++
			c.arg = args[i]
		}
		crits = append(crits, c)
	}
	return crits, nil
}

// tri is a block's answer to whether it applies to a host.
type tri int8

const (
	triNo tri = iota
	triMaybe
	triYes
)

func triOf(b bool) tri {
	if b {
		return triYes
	}
	return triNo
}

// cfgValue is a value from ssh_config and where it was set (FILE:LINE).
type cfgValue struct {
	val, src string
}

// hostOpts is what the passes over the config give a host: the options
// gpuprep reads. Values given before the pass (the inventory's, or a
// ProxyJump's user@ and :port) stand, as ssh's command line does.
type hostOpts struct {
	alias string
	// host is what Host lines match: the alias in the first pass, the
	// lower-cased HostName in the final one.
	host                       string
	final                      bool // the second (final) pass
	hostName, user, port, jump cfgValue
	proxyCommand               cfgValue // read only to refuse it (see fill)
	identityFiles              []cfgValue
	identityFixed              bool
	// Read only to decide on the final pass and refuse canonicalization.
	canonicalize cfgValue
}

// lookup evaluates the config for alias; preset holds the values that win
// over the file's.
//
// ssh parses the config a second time when a Match line anywhere has a
// final criterion or CanonicalizeHostname is on (ssh.c): Host lines and
// Match host then see the lower-cased HostName from the first pass, Match
// canonical and final are true, and values the first pass set still win.
// The first pass has canonical and final false, so both are decided.
func (s *SSHConfig) lookup(alias string, preset *Host) (*hostOpts, error) {
	o := &hostOpts{alias: alias, host: alias, identityFixed: len(preset.IdentityFiles) > 0}
	o.user.val, o.jump.val = preset.User, preset.Jump
	if preset.Port != 0 {
		o.port.val = strconv.Itoa(preset.Port)
	}
	if s == nil || s.root == nil {
		return o, nil
	}
	if err := o.walk(s.root, triYes, ""); err != nil {
		return nil, err
	}
	canon, err := o.canonicalizing()
	if err != nil || !canon && !s.root.wantsFinal() {
		return o, err
	}
	o.final, o.host = true, strings.ToLower(o.resolvedHost())
	return o, o.walk(s.root, triYes, "")
}

// resolvedHost is the host name as far as the pass has it: the HostName
// (with %h expanded) or else the alias.
func (o *hostOpts) resolvedHost() string {
	if o.final {
		return o.host
	}
	if o.hostName.val != "" {
		h, _ := expandHostName(o.hostName.val, o.alias) // a bad token: fill says so
		return h
	}
	return o.alias
}

// canonicalizing reports whether CanonicalizeHostname is on after the
// first pass. Where ssh would canonicalize the name (always, or yes for a
// host reached directly) it is an error: that takes DNS (CanonicalDomains,
// CNAMEs), and the name it finds decides the Host blocks of the final pass
// and the address dialled. An IP address is left as it is.
func (o *hostOpts) canonicalizing() (bool, error) {
	v := o.canonicalize
	mode := strings.ToLower(v.val)
	switch mode {
	case "", "no", "false":
		return false, nil
	case "yes", "true", "always":
	default:
		return false, fmt.Errorf("ssh config %s: CanonicalizeHostname %q is not yes, no or always", v.src, v.val)
	}
	direct := (o.jump.val == "" || strings.EqualFold(o.jump.val, "none")) &&
		(o.proxyCommand.val == "" || strings.EqualFold(o.proxyCommand.val, "none"))
	if mode != "always" && !direct {
		return true, nil
	}
	h := o.resolvedHost()
	if a, err := netip.ParseAddr(h); err == nil && a.String() == h {
		return true, nil
	}
	return false, fmt.Errorf("ssh config %s: CanonicalizeHostname %s (for %s) is not supported: gpuprep does not look names up in DNS; set the address in the inventory (and the user, port and jump the canonical name's blocks give), or pass --ssh-config none", v.src, v.val, o.alias)
}

// walk evaluates f's blocks, where the file applies as outer says (an
// Include under a block applies as far as that block does); why names the
// block that left outer undecided.
func (o *hostOpts) walk(f *cfgFile, outer tri, why string) error {
	for _, b := range f.blocks {
		on, bwhy := o.applies(f, b)
		if outer < on {
			on, bwhy = outer, why
		}
		if on == triNo {
			continue
		}
		for _, it := range b.items {
			if it.key == "include" {
				for _, inc := range it.included {
					if err := o.walk(inc, on, bwhy); err != nil {
						return err
					}
				}
				continue
			}
			if it.value == "" || !o.open(it.key) {
				continue
			}
			if on == triMaybe {
				return o.undecided(bwhy, fmt.Sprintf("%s:%d", f.name, it.line), it.key)
			}
			o.set(it.key, cfgValue{it.value, fmt.Sprintf("%s:%d", f.name, it.line)})
		}
	}
	return nil
}

// applies evaluates a block's Host or Match line for the host as the pass
// has it so far. Undecided, it also says which line and criterion.
func (o *hostOpts) applies(f *cfgFile, b *cfgBlock) (tri, string) {
	switch b.kind {
	case "host":
		return triOf(hostPatternsMatch(o.host, b.patterns)), ""
	case "match":
		r, unknown := triYes, ""
		for _, c := range b.crits {
			t := o.criterion(c)
			if t == triMaybe && unknown == "" {
				unknown = c.attr
			}
			if c.neg {
				t = triYes - t
			}
			r = min(r, t)
		}
		if r != triMaybe {
			return r, ""
		}
		return r, fmt.Sprintf("%s:%d: `%s` (gpuprep does not evaluate Match %s)", f.name, b.line, b.text, unknown)
	}
	return triYes, ""
}

// criterion evaluates one Match criterion as readconf.c's match_cfg_line;
// those gpuprep cannot evaluate are triMaybe.
func (o *hostOpts) criterion(c matchCrit) tri {
	switch c.attr {
	case "all":
		return triYes
	case "canonical", "final":
		return triOf(o.final)
	case "host":
		return triOf(patternListMatch(strings.ToLower(o.resolvedHost()), c.arg, true))
	case "originalhost":
		return triOf(patternListMatch(strings.ToLower(o.alias), c.arg, true))
	case "user":
		u := o.user.val
		if u == "" {
			u = localUser()
		}
		return triOf(patternListMatch(u, c.arg, false))
	case "localuser":
		return triOf(patternListMatch(localUser(), c.arg, false))
	}
	return triMaybe
}

// open reports whether key is an option gpuprep reads that the pass has
// not yet decided.
func (o *hostOpts) open(key string) bool {
	switch key {
	case "hostname":
		// The final pass starts with HostName set to the first's result.
		return o.hostName.val == "" && !o.final
	case "user":
		return o.user.val == ""
	case "port":
		return o.port.val == ""
	case "proxyjump": // whichever comes first wins, as in ssh
		return o.jump.val == "" && o.proxyCommand.val == ""
	case "proxycommand":
		// ProxyJump none from the config leaves ProxyCommand open
		// (readconf.c parse_jump sets proxy_command only for a real jump).
		return o.proxyCommand.val == "" && (o.jump.val == "" || o.jump.src != "" && strings.EqualFold(o.jump.val, "none"))
	case "identityfile":
		return !o.identityFixed
	case "canonicalizehostname":
		return o.canonicalize.val == "" && !o.final
	}
	return false
}

func (o *hostOpts) set(key string, v cfgValue) {
	switch key {
	case "hostname":
		o.hostName = v
	case "user":
		o.user = v
	case "port":
		o.port = v
	case "proxyjump":
		o.jump = v
	case "proxycommand":
		o.proxyCommand = v
	case "identityfile":
		o.identityFiles = append(o.identityFiles, v)
	case "canonicalizehostname":
		o.canonicalize = v
	}
}

// undecidedHints says, per option, how to get past an undecided block.
var undecidedHints = map[string]string{
	"hostname":             "HostName at %s: change the Match so that it cannot apply to this host",
	"user":                 "User at %s: set the user in the inventory (or user@ in a ProxyJump), which wins over ssh_config",
	"port":                 "Port at %s: set the port in the inventory (or :port in a ProxyJump), which wins over ssh_config",
	"identityfile":         "IdentityFile at %s: set the key file in the inventory, which wins over ssh_config",
	"proxyjump":            "ProxyJump at %s: set the jump in the inventory (none for none), which wins over ssh_config",
	"proxycommand":         "ProxyCommand at %s: set the jump in the inventory (none for none), which wins over ssh_config",
	"canonicalizehostname": "CanonicalizeHostname at %s: change the Match so that it cannot apply to this host",
}

// undecided is the error for an undecided block (why) that would set key
// (at) for the host.
func (o *hostOpts) undecided(why, at, key string) error {
	return fmt.Errorf("ssh config %s could apply to %s and would set its "+undecidedHints[key]+", or pass --ssh-config none", why, o.alias, at)
}

// hostPatternsMatch matches a Host line's patterns as ssh does: a negated
// pattern that matches rules the block out, else any pattern matching
// rules it in. The alias is compared as given (Match host lowercases).
func hostPatternsMatch(alias string, patterns []string) bool {
	found := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if globMatch(alias, strings.TrimPrefix(p, "!")) {
			if neg {
				return false
			}
			found = true
		}
	}
	return found
}

// patternListMatch is OpenSSH's match_pattern_list: a comma-separated list
// of patterns, negated ones ruling out.
func patternListMatch(s, list string, lower bool) bool {
	if lower {
		list = strings.ToLower(list)
	}
	return hostPatternsMatch(s, strings.Split(list, ","))
}

// globMatch is OpenSSH's match_pattern: '*' matches any run of bytes, '?'
// exactly one byte (the library's `?` also matches none). It backtracks
// only to the last '*' (O(len(s)·len(p))): trying every split at every
// '*' took seconds for a Host line of many stars against a long name.
func globMatch(s, p string) bool {
	si, pi := 0, 0
	star, mark := -1, 0 // the last '*' seen, and where s stood after it
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si, pi = si+1, pi+1
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Apply fills what the inventory left open from the ssh_config entry of the
// host's address, as ssh would when given that address: HostName, User,
// Port, IdentityFile and ProxyJump. Values the inventory sets win, as the
// options Ansible passes on ssh's command line do; an inventory jump of
// "none" keeps ssh_config's ProxyJump away. The HostName and the jump chain
// (each hop resolved through the config) are checked here, so that a bad
// value is reported with the file and line it came from before any host is
// dialled.
func (s *SSHConfig) Apply(h *Host) error {
	alias := h.Address
	if alias == "" {
		alias = h.Name
	}
	src := "inventory"
	if h.Source != "" {
		src += " " + h.Source
	}
	cfgSrc, err := s.fill(h, alias)
	if err != nil || h.Jump == "" {
		return err
	}
	var path []string
	if cfgSrc != "" {
		// The host's own ProxyJump: were a hop to lead back to it, ssh
		// would loop.
		src, path = "ssh config "+cfgSrc, []string{alias}
	}
	_, err = s.jumpChain(h.Jump, src, path)
	return err
}

// fill does Apply's work for h, known to ssh_config as alias, without
// following its jump hosts. It returns where the ProxyJump it set came
// from ("" when it set none).
func (s *SSHConfig) fill(h *Host, alias string) (string, error) {
	o, err := s.lookup(alias, h)
	if err != nil {
		return "", err
	}
	if err := o.fillAddress(h, alias); err != nil {
		return "", err
	}
	if h.User == "" {
		h.User = o.user.val
	}
	if err := o.fillPort(h, alias); err != nil {
		return "", err
	}
	if len(h.IdentityFiles) == 0 {
		files, err := identityFiles(o.identityFiles, h, alias)
		if err != nil {
			return "", err
		}
		h.IdentityFiles = files
	}
	return o.fillJump(h, alias)
}

// fillAddress sets h's address (ssh's case) from HostName when set,
// checked as an address.
func (o *hostOpts) fillAddress(h *Host, alias string) error {
	h.Address = sshHostCase(h.Address)
	v := o.hostName
	if v.src == "" {
		return nil
	}
	addr, err := expandHostName(v.val, alias)
	if err != nil {
		return fmt.Errorf("ssh config %s: HostName %q (for %s): %v", v.src, v.val, alias, err)
	}
	addr = sshHostCase(addr)
	if !configAddressOK(addr) {
		return fmt.Errorf("ssh config %s: HostName %q (for %s) is not a host name or IP address", v.src, addr, alias)
	}
	h.Address = addr
	return nil
}

// fillPort sets h's port from Port when the inventory gives none.
func (o *hostOpts) fillPort(h *Host, alias string) error {
	if v := o.port; h.Port == 0 && v.src != "" {
		n, ok := configPort(v.val)
		if !ok {
			return fmt.Errorf("ssh config %s: Port %q (for %s) is not a TCP port (1-65535)", v.src, v.val, alias)
		}
		h.Port = n
	}
	return nil
}

// fillJump sets h's jump host from ProxyJump, or a bastion ProxyCommand,
// when the inventory gives none (its none: connect directly), returning
// where in the config the jump came from.
func (o *hostOpts) fillJump(h *Host, alias string) (string, error) {
	if strings.EqualFold(h.Jump, "none") {
		h.Jump = ""
		return "", nil
	}
	if v := o.jump; h.Jump == "" && v.src != "" && !strings.EqualFold(v.val, "none") {
		h.Jump = v.val
		return v.src, nil
	}
	// gpuprep runs no ProxyCommand (a command line from a config file);
	// dialling the host directly instead would fail with no word why, or
	// go around the bastion the config sends it through. The bastion idiom
	// of configs older than ProxyJump, ssh -W %h:%p bastion, is read as
	// the ProxyJump it is.
	if v := o.proxyCommand; h.Jump == "" && v.src != "" && !strings.EqualFold(v.val, "none") {
		if jump, ok := ProxyCommandJump(v.val); ok {
			h.Jump = jump
			return v.src, nil
		}
		return "", fmt.Errorf("ssh config %s: ProxyCommand (for %s) is not supported: gpuprep runs no command; only a bastion's ssh -W %%h:%%p [-p PORT] [-l USER] [USER@]HOST (or HOST nc %%h %%p) is read, as ProxyJump HOST. Use ProxyJump, set the jump in the inventory (none to connect directly), or pass --ssh-config none", v.src, alias)
	}
	return "", nil
}

// ProxyCommandJump reads the bastion idiom that ProxyJump replaced, ssh
// -W %h:%p [-p PORT] [-l USER] [USER@]HOST or ssh [USER@]HOST nc %h %p
// (optionally after exec, with -q, -T, -x or -a), as the ProxyJump spec
// it is equivalent to. Anything else (other options, shell syntax, quotes,
// another command) is not read: ok is false, and gpuprep runs nothing.
func ProxyCommandJump(cmd string) (jump string, ok bool) {
	f, ok := proxySSHArgv(cmd)
	if !ok {
		return "", false
	}
	var p proxyArgs
	for i := 1; i < len(f); i++ {
		if i, ok = p.take(f, i); !ok {
			return "", false
		}
	}
	return p.jump()
}

// proxySSHArgv is cmd's words when cmd is a plain ssh command line (exec
// aside): no quoting, expansion or shell syntax ssh's own shell would
// read differently.
func proxySSHArgv(cmd string) ([]string, bool) {
	if strings.ContainsAny(cmd, "\"'\\;&|<>`$(){}*?!#\n") {
		return nil, false
	}
	f := strings.Fields(cmd)
	if len(f) > 0 && f[0] == "exec" {
		f = f[1:]
	}
	if len(f) == 0 || f[0] != "ssh" && f[0] != "/usr/bin/ssh" && f[0] != "/bin/ssh" {
		return nil, false
	}
	return f, true
}

// proxyArgs is what a bastion ProxyCommand's ssh arguments say: the
// bastion (dest), its -l user and -p port, and whether they forward to
// the host (-W %h:%p, or nc %h %p run on the bastion).
type proxyArgs struct {
	user, port, dest string
	forward          bool
}

// take reads the argument f[i] (and its option's value), returning the
// index of the last one read; ok false for one a bastion idiom has not.
func (p *proxyArgs) take(f []string, i int) (next int, ok bool) {
	a := f[i]
	switch {
	case a == "-q" || a == "-T" || a == "-x" || a == "-a":
		return i, true
	case a == "-W" || a == "-p" || a == "-l":
		return p.option(a, f, i)
	case strings.HasPrefix(a, "-") || p.dest != "":
		return p.ncTail(f, i)
	}
	p.dest = a
	return i, true
}

// option reads -W %h:%p, -p PORT or -l USER (each once) at f[i].
func (p *proxyArgs) option(a string, f []string, i int) (int, bool) {
	if i+1 >= len(f) {
		return i, false
	}
	v := f[i+1]
	switch a {
	case "-W":
		if p.forward || v != "%h:%p" && v != "[%h]:%p" {
			return i, false
		}
		p.forward = true
	case "-p":
		if _, ok := sshPortNumber(v); !ok || p.port != "" {
			return i, false
		}
		p.port = v
	default:
		if p.user != "" {
			return i, false
		}
		p.user = v
	}
	return i + 1, true
}

// ncTail reads the command run on the bastion after its name: only
// nc %h %p, the forward -W makes (and only when -W did not).
func (p *proxyArgs) ncTail(f []string, i int) (int, bool) {
	if p.dest != "" && !p.forward && len(f)-i == 3 && f[i] == "nc" && f[i+1] == "%h" && f[i+2] == "%p" {
		p.forward = true
		return len(f), true
	}
	return i, false
}

// jump is the ProxyJump [USER@]HOST[:PORT] the arguments say, ok false when
// they forward nowhere or name no single bastion.
func (p proxyArgs) jump() (string, bool) {
	user, dest := p.user, p.dest
	if !p.forward || dest == "" || strings.Contains(dest, "%") {
		return "", false
	}
	if u, h, found := strings.Cut(dest, "@"); found {
		if user != "" || u == "" {
			return "", false
		}
		user, dest = u, h
	}
	if strings.Contains(dest, ":") {
		if p.port == "" {
			return "", false // an IPv6 bastion without -p: say it as ProxyJump
		}
		dest = "[" + dest + "]"
	}
	if user != "" {
		dest = user + "@" + dest
	}
	if p.port != "" {
		dest += ":" + p.port
	}
	return dest, true
}

// configPort parses a Port option as ssh's a2port: a number, or a TCP
// service name (Port ssh is 22).
func configPort(v string) (int, bool) {
	if n, ok := sshPortNumber(v); ok || v == "" || v[0] >= '0' && v[0] <= '9' || v[0] == '+' || v[0] == '-' {
		return n, ok
	}
	n, err := net.LookupPort("tcp", v)
	return n, err == nil && n > 0
}

// identityFiles expands the IdentityFile values for h (HostName, User and
// Port applied; alias as the host was named) as ssh does when it loads
// them: ~, ${VAR} and the % tokens. "none" names no file; it stays in the
// list as NoIdentityFile, which keeps ssh's default keys from being
// offered. A token gpuprep does not expand, or an unset variable, is an
// error naming the line, as it is fatal to ssh.
func identityFiles(vals []cfgValue, h *Host, alias string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, v := range vals {
		// A value given again is dropped, as ssh's add_identity_file does.
		if seen[v.val] {
			continue
		}
		seen[v.val] = true
		if strings.EqualFold(v.val, NoIdentityFile) {
			if !slices.Contains(out, NoIdentityFile) {
				out = append(out, NoIdentityFile)
			}
			continue
		}
		f, err := expandIdentity(v.val, h, alias)
		if err != nil {
			return nil, fmt.Errorf("ssh config %s: IdentityFile %q (for %s): %v; set the key file in the inventory, which wins over ssh_config, or pass --ssh-config none", v.src, v.val, alias, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// expandIdentity is ssh's tilde_expand_filename and
// default_client_percent_dollar_expand for one IdentityFile: %h is the
// lower-cased HostName, %r the remote user (the local one when none is
// set), %n the alias, %l and %L the local host name and its first label.
func expandIdentity(s string, h *Host, alias string) (string, error) {
	home, _ := os.UserHomeDir()
	if strings.HasPrefix(s, "~") {
		// ssh's tilde_expand_filename: ~ and ~name, then a slash or the end.
		e, err := expandHome(s)
		if err != nil {
			return "", err
		}
		s = e
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${")
			}
			name := s[i+2 : i+end]
			val, ok := os.LookupEnv(name)
			if !ok || name == "" {
				return "", fmt.Errorf("environment variable ${%s} has no value", name)
			}
			b.WriteString(val)
			i += end
		case s[i] == '%':
			if i+1 == len(s) {
				return "", fmt.Errorf("%% at the end")
			}
			i++
			t, err := identityToken(s[i], h, alias, home)
			if err != nil {
				return "", err
			}
			b.WriteString(t)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// identityToken is the value of %c in an IdentityFile.
func identityToken(c byte, h *Host, alias, home string) (string, error) {
	switch c {
	case '%':
		return "%", nil
	case 'h':
		return strings.ToLower(h.Address), nil
	case 'n':
		return alias, nil
	case 'r':
		if h.User != "" {
			return h.User, nil
		}
		return localUser(), nil
	case 'u':
		return localUser(), nil
	case 'p':
		if h.Port == 0 {
			return "22", nil
		}
		return strconv.Itoa(h.Port), nil
	case 'd':
		return home, nil
	case 'i':
		return strconv.Itoa(os.Getuid()), nil
	case 'l', 'L':
		name, err := os.Hostname()
		if err != nil {
			return "", err
		}
		if c == 'L' {
			name, _, _ = strings.Cut(name, ".")
		}
		return name, nil
	}
	return "", fmt.Errorf("token %%%c is not expanded by gpuprep", c)
}

// configAddressOK reports whether an address ssh_config gave (a HostName,
// or a jump host with none) may be dialled and recorded: what validAddress
// allows an inventory, without the brackets an inventory may put around an
// IPv6 address. With --accept-new the address is written into known_hosts,
// where a HostName "victim,attacker.example" would record the attacker's
// key for victim too.
func configAddressOK(a string) bool {
	return !strings.HasPrefix(a, "[") && validAddress(a)
}

// Defaults fills the user (the local user) and port (22) when still unset.
func Defaults(h *Host) {
	if h.User == "" {
		h.User = localUser()
	}
	if h.Port == 0 {
		h.Port = 22
	}
}

func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// expandHostName expands a HostName value as ssh does: %h is the host as
// named, %% a percent sign; any other token is an error, as it is to ssh.
func expandHostName(s, alias string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("%% at the end")
		}
		i++
		switch s[i] {
		case 'h':
			b.WriteString(alias)
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("unknown token %%%c (ssh allows %%h and %%%% in HostName)", s[i])
		}
	}
	return b.String(), nil
}

// JumpHop is one hop of a ProxyJump chain.
type JumpHop struct {
	User    string
	Address string
	Port    int
	// IdentityFiles from ssh_config for the hop.
	IdentityFiles []string
}

// maxJumpHops bounds a ProxyJump chain. OpenSSH sets no bound (each hop is
// one more ssh process, so a loop forks until something gives); loops are
// caught by name below, and the bound keeps any chain a config can
// describe finite.
const maxJumpHops = 16

// ParseJump parses a ProxyJump spec ([user@]host[:port], comma-separated;
// ssh://user@host:port also accepted), resolving each hop through cfg and
// following the first hop's own ProxyJump as ssh does. Apply has already
// checked each host's jump, naming where it came from (the inventory or an
// ssh_config line); this is the resolution at dial time.
func ParseJump(spec string, cfg *SSHConfig) ([]JumpHop, error) {
	return cfg.jumpChain(spec, "", nil)
}

// jumpChain resolves spec, from src (for messages), into hops in dialling
// order. Like ssh (which reaches "a,b" as `ssh -J a -W … b`), only the first
// hop's own ProxyJump applies, and each hop's own config (HostName, User,
// Port, IdentityFile) does; user@ and :port in spec win. path holds the
// hosts whose own ProxyJump is being followed: meeting one again is a loop.
func (s *SSHConfig) jumpChain(spec, src string, path []string) ([]JumpHop, error) {
	where := ""
	if src != "" {
		where = src + ": "
	}
	var hops []JumpHop
	for i, part := range strings.Split(spec, ",") {
		h, err := parseJumpHop(part)
		if err != nil && strings.Contains(spec, ",") {
			err = fmt.Errorf("hop %q: %v", strings.TrimSpace(part), err)
		}
		if err != nil {
			return nil, fmt.Errorf("%sProxyJump %q: %v", where, spec, err)
		}
		alias := h.Address
		if i > 0 {
			h.Jump = "none" // reached through the hops before it
		}
		ownSrc, err := s.fill(h, alias)
		if err != nil {
			return nil, err
		}
		if !configAddressOK(h.Address) {
			return nil, fmt.Errorf("%sProxyJump %q: %q is not a host name or IP address", where, spec, h.Address)
		}
		Defaults(h)
		if h.Jump != "" {
			up, err := s.followJump(h.Jump, ownSrc, path, alias)
			if err != nil {
				return nil, err
			}
			hops = append(hops, up...)
		}
		hops = append(hops, JumpHop{User: h.User, Address: h.Address, Port: h.Port, IdentityFiles: h.IdentityFiles})
	}
	if len(hops) > maxJumpHops {
		return nil, fmt.Errorf("%sProxyJump %q: more than %d jump hosts", where, spec, maxJumpHops)
	}
	return hops, nil
}

// followJump resolves the ProxyJump alias's own config gives it (spec,
// set at src), unless that leads back to a host on path.
func (s *SSHConfig) followJump(spec, src string, path []string, alias string) ([]JumpHop, error) {
	path = append(slices.Clip(path), alias)
	if i := slices.Index(path, alias); i < len(path)-1 {
		return nil, fmt.Errorf("ssh config %s: ProxyJump loop: %s", src, strings.Join(path[i:], " -> "))
	}
	if len(path) > maxJumpHops {
		return nil, fmt.Errorf("ssh config %s: ProxyJump %q: more than %d jump hosts", src, spec, maxJumpHops)
	}
	return s.jumpChain(spec, "ssh config "+src, path)
}

// parseJumpHop parses one hop: [ssh://][user@]host[:port], an IPv6
// address in brackets when it has a port.
func parseJumpHop(part string) (*Host, error) {
	part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "ssh://"))
	if part == "" {
		return nil, fmt.Errorf("empty hop")
	}
	h := &Host{}
	if i := strings.LastIndexByte(part, '@'); i >= 0 {
		h.User, part = part[:i], part[i+1:]
		if h.User == "" {
			return nil, fmt.Errorf("empty user")
		}
	}
	host, port, hasPort := part, "", false
	if strings.HasPrefix(part, "[") {
		end := strings.IndexByte(part, ']')
		if end < 0 {
			return nil, fmt.Errorf("no ] after [")
		}
		host, port = part[1:end], part[end+1:]
		if port != "" {
			if port, hasPort = strings.CutPrefix(port, ":"); !hasPort {
				return nil, fmt.Errorf("want [address]:port")
			}
		}
	} else if strings.Count(part, ":") == 1 {
		host, port, hasPort = strings.Cut(part, ":")
	}
	if hasPort {
		n, ok := sshPortNumber(port)
		if !ok {
			return nil, fmt.Errorf("port %q is not a TCP port (1-65535)", port)
		}
		h.Port = n
	}
	if host == "" {
		return nil, fmt.Errorf("no host")
	}
	h.Address = host
	return h, nil
}

// sshPortNumber parses a TCP port, 1 to 65535. Port 0 is not "the
// default": a spec that says :0 is a mistake to report, not to mend.
func sshPortNumber(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '+' {
		return 0, false
	}
	return n, true
}

// sshHostCase is the host name ssh connects to and looks up in known_hosts:
// a name in lower case, an IP address as written (an IPv6 zone names a
// network interface, and interface names have case).
func sshHostCase(a string) string {
	if _, err := netip.ParseAddr(a); err == nil {
		return a
	}
	return strings.ToLower(a)
}
