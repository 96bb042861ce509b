// Package kubeletargs answers which node labels the kubelet of a systemd host
// registers with, as the kubelet gets them: its unit and drop-ins
// (kubelet.service.d/*.conf, e.g. kubeadm's 10-kubeadm.conf) name the
// environment files (EnvironmentFile=, read in order, a later assignment of a
// variable overriding an earlier one, and Environment= lines) and the command
// line (ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS
// $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS, a $VAR
// splitting into words); on it, repeated --node-labels flags (=V or a separate
// V) merge, a later value of a key overriding an earlier one. It also edits
// those environment files so that the labels the kubelet ends up with are the
// wanted ones (Edit).
package kubeletargs

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Label is one key=value.
type Label struct{ Key, Value string }

// Without a kubelet unit in the root, the kubeadm drop-in of the deb and rpm
// packages (10-kubeadm.conf) is assumed: kubeadm-flags.env sets
// KUBELET_KUBEADM_ARGS, /etc/default/kubelet (deb) or /etc/sysconfig/kubelet
// (rpm) KUBELET_EXTRA_ARGS, the last on the command line.
var (
	DefaultEnvFiles = []string{"/var/lib/kubelet/kubeadm-flags.env", "/etc/sysconfig/kubelet", "/etc/default/kubelet"}
	DefaultArgVars  = []string{"KUBELET_KUBECONFIG_ARGS", "KUBELET_CONFIG_ARGS", "KUBELET_KUBEADM_ARGS", "KUBELET_EXTRA_ARGS"}
)

// unitDirs are systemd's unit directories, the first holding a unit (or a
// drop-in of a name) winning.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// Occurrence is one --node-labels flag on the kubelet's command line.
type Occurrence struct {
	File   string // where it is written: an environment file, or a unit for Environment= and ExecStart=
	Line   int    // 1-based
	Var    string // the variable it comes from; "" when literally on ExecStart
	Labels []Label
	Err    error // a value the kubelet refuses (it then does not start)
}

// Where is "FILE:LINE".
func (o Occurrence) Where() string { return fmt.Sprintf("%s:%d", o.File, o.Line) }

// Config is how the kubelet gets its --node-labels.
type Config struct {
	Units       []string // the unit file and drop-ins read, in order; none: the kubeadm default
	EnvFiles    []string // environment files, in the order systemd reads them
	ArgVars     []string // the variables on the command line, in order
	Occurrences []Occurrence
}

// Located is a label's value and the flag it comes from.
type Located struct {
	Value string
	At    Occurrence
}

// Effective is what the kubelet registers: the last value of each key.
func (c *Config) Effective() map[string]Located {
	out := map[string]Located{}
	for _, o := range c.Occurrences {
		for _, l := range o.Labels {
			out[l.Key] = Located{l.Value, o}
		}
	}
	return out
}

// Lookup is key's effective value and the file that sets it.
func (c *Config) Lookup(key string) (value, file string, found bool) {
	l, ok := c.Effective()[key]
	return l.Value, l.At.File, ok
}

// Read reads the kubelet's configuration in root.
func Read(root *host.Root) *Config { return read(root, nil) }

type assign struct {
	value string
	file  string
	line  int
}

type word struct {
	text string
	from assign
	v    string
}

var varRef = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\$(\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$`)
})

// read is Read with overlay's contents in place of the files it names.
func read(root *host.Root, overlay map[string][]byte) *Config {
	readFile := func(p string) ([]byte, error) {
		if b, ok := overlay[p]; ok {
			return b, nil
		}
		return root.ReadFile(p)
	}
	c := &Config{}
	sc := unitScan{vars: map[string]assign{}}
	for _, u := range units(root) {
		b, err := readFile(u)
		if err != nil {
			continue
		}
		c.Units = append(c.Units, u)
		for _, ll := range logicalLines(string(b)) {
			sc.line(u, ll)
		}
	}
	c.EnvFiles = DefaultEnvFiles
	if sc.unitEnv {
		c.EnvFiles = sc.envFiles
	}
	for _, f := range c.EnvFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		for _, a := range envAssignments(string(b)) {
			sc.vars[a.name] = assign{a.value, f, a.line}
		}
	}
	if sc.execAt.file == "" {
		for _, v := range DefaultArgVars {
			sc.exec = append(sc.exec, word{text: "$" + v})
		}
	}
	c.nodeLabels(sc.args(c))
	return c
}

// unitScan is what the kubelet's unit files say, line by line: its
// Environment= variables, its last ExecStart (as written, and where), and
// its EnvironmentFile=s (unitEnv: the units name some).
type unitScan struct {
	vars     map[string]assign
	exec     []word
	execAt   assign
	envFiles []string
	unitEnv  bool
}

// line takes in the logical line ll of the unit file u.
func (sc *unitScan) line(u string, ll logical) {
	k, v, ok := strings.Cut(ll.text, "=")
	if !ok {
		return
	}
	v = strings.TrimSpace(v)
	switch strings.TrimSpace(k) {
	case "EnvironmentFile":
		sc.unitEnv = true
		if v == "" {
			sc.envFiles = nil
		}
		for _, f := range strings.Fields(v) {
			sc.envFiles = append(sc.envFiles, strings.TrimPrefix(f, "-"))
		}
	case "Environment":
		for _, a := range unitWords(v) {
			if name, val, ok := strings.Cut(a, "="); ok {
				sc.vars[name] = assign{val, u, ll.line}
			}
		}
	case "ExecStart":
		sc.exec, sc.execAt = nil, assign{v, u, ll.line}
		for _, w := range unitWords(strings.TrimLeft(v, "@-:+!")) {
			sc.exec = append(sc.exec, word{text: w, from: sc.execAt})
		}
	}
}

// args is the kubelet's command line but the program: $VAR splits into
// words, ${VAR} is one; each variable named is recorded in c.ArgVars.
func (sc *unitScan) args(c *Config) []word {
	var args []word
	for i, w := range sc.exec {
		if i == 0 && sc.execAt.file != "" {
			continue // the program
		}
		m := varRef().FindStringSubmatch(w.text)
		if m == nil {
			args = append(args, w)
			continue
		}
		name := m[2] + m[3]
		c.ArgVars = append(c.ArgVars, name)
		a, ok := sc.vars[name]
		if !ok {
			continue
		}
		if m[2] != "" {
			args = append(args, word{a.value, a, name})
			continue
		}
		for _, f := range strings.Fields(a.value) {
			args = append(args, word{f, a, name})
		}
	}
	return args
}

// nodeLabels records each --node-labels of args in c.Occurrences.
func (c *Config) nodeLabels(args []word) {
	for i := 0; i < len(args); i++ {
		w := args[i]
		var val string
		switch {
		case strings.HasPrefix(w.text, "--node-labels="):
			val = strings.TrimPrefix(w.text, "--node-labels=")
		case w.text == "--node-labels" && i+1 < len(args):
			i++
			val = args[i].text
		default:
			continue
		}
		o := Occurrence{File: w.from.file, Line: w.from.line, Var: w.v}
		o.Labels, o.Err = kubeletLabels(val)
		c.Occurrences = append(c.Occurrences, o)
	}
}

// kubeletLabels parses a --node-labels value as the kubelet does
// (component-base's MapStringString): comma-separated, empty items skipped,
// key and value trimmed.
func kubeletLabels(s string) ([]Label, error) {
	var out []Label
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return out, fmt.Errorf("--node-labels %q: %q is not key=value, which the kubelet refuses", s, kv)
		}
		out = append(out, Label{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out, nil
}

// units are the kubelet's unit file and its drop-ins, in the order systemd
// applies them.
func units(root *host.Root) []string {
	var out []string
	for _, d := range unitDirs {
		if root.Exists(path.Join(d, "kubelet.service")) {
			out = append(out, path.Join(d, "kubelet.service"))
			break
		}
	}
	byName := map[string]string{}
	for _, d := range unitDirs {
		dd := path.Join(d, "kubelet.service.d")
		for _, n := range root.Names(dd) {
			if _, seen := byName[n]; !seen && strings.HasSuffix(n, ".conf") {
				byName[n] = path.Join(dd, n)
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, byName[n])
	}
	return out
}

type logical struct {
	text string
	line int // of its first physical line
}

// logicalLines joins lines continued with a trailing backslash and drops
// comments and blank lines.
func logicalLines(s string) []logical {
	var out []logical
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		t := strings.TrimSpace(lines[i])
		for strings.HasSuffix(t, "\\") && i+1 < len(lines) {
			i++
			t = strings.TrimSuffix(t, "\\") + " " + strings.TrimSpace(lines[i])
		}
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		out = append(out, logical{t, start + 1})
	}
	return out
}

// unitWords splits a unit setting's value into words, double or single
// quotes grouping (and removed).
func unitWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote == 0 && (ch == '"' || ch == '\''):
			quote, in = ch, true
		case quote == 0 && (ch == ' ' || ch == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

type envAssign struct {
	name, value string
	line        int
}

// envAssignments are an environment file's assignments, in order: NAME=VALUE,
// the value's enclosing quotes removed.
func envAssignments(s string) []envAssign {
	var out []envAssign
	for _, ll := range logicalLines(s) {
		t := strings.TrimPrefix(ll.text, "export ")
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, envAssign{strings.TrimSpace(k), v, ll.line})
	}
	return out
}
