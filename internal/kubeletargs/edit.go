package kubeletargs

import (
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"maps"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// ParseLabels parses a --node-labels value: "k=v,k2=v2", strictly (gpuprep
// edits only values it reads unambiguously).
func ParseLabels(s string) ([]Label, error) {
	var out []Label
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--node-labels %q: %q is not key=value", s, kv)
		}
		out = append(out, Label{k, v})
	}
	return out, nil
}

// MergeLabels sets the labels of set (in place where the key exists, at the
// end otherwise) and drops the keys of remove; everything else keeps its
// order.
func MergeLabels(have []Label, set []Label, remove []string) []Label {
	drop := map[string]bool{}
	for _, k := range remove {
		drop[k] = true
	}
	out := []Label{}
	done := map[string]bool{}
	for _, l := range have {
		if drop[l.Key] || done[l.Key] {
			continue
		}
		for _, s := range set {
			if s.Key == l.Key {
				l.Value = s.Value
			}
		}
		done[l.Key] = true
		out = append(out, l)
	}
	for _, s := range set {
		if !done[s.Key] {
			out = append(out, s)
			done[s.Key] = true
		}
	}
	return out
}

// FormatLabels writes labels as a --node-labels value.
func FormatLabels(ls []Label) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Key + "=" + l.Value
	}
	return strings.Join(parts, ",")
}

// EditError names the file and line gpuprep refuses to edit.
type EditError struct {
	File string
	Line int
	Msg  string
}

func (e *EditError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ExtraArgs is the variable of the kubelet environment file for the user's
// flags.
const ExtraArgs = "KUBELET_EXTRA_ARGS"

// Edit makes the labels the kubelet registers with have set and lack remove:
// it removes the keys of set and remove from every --node-labels flag of the
// environment files the kubelet reads (a flag left with no labels goes), and
// sets set in target's last KUBELET_EXTRA_ARGS assignment, the variable last
// on the command line (adding the flag, or the assignment, where missing).
// With target "", it only removes (the labels come from elsewhere: a kubeadm
// JoinConfiguration). Every other byte stays. It returns the files that
// change, and refuses (naming file and line) values continued over lines or
// built from other variables, and labels set where gpuprep does not edit (a
// unit's Environment= or ExecStart=), checking that the result has the
// wanted labels as the kubelet reads them.
func Edit(root *host.Root, target string, set []Label, remove []string) ([]change.File, error) {
	c := Read(root)
	if target != "" && !slices.Contains(c.EnvFiles, target) {
		return nil, fmt.Errorf("the kubelet's unit (%s) does not read %s (its environment files: %s): gpuprep does not know where to add the labels", strings.Join(c.Units, ", "), target, strings.Join(c.EnvFiles, ", "))
	}
	keys := labelKeys(set, remove)
	argVar := map[string]bool{}
	for _, v := range c.ArgVars {
		argVar[v] = true
	}
	var edits []change.File
	overlay := map[string][]byte{}
	files := slices.Clone(c.EnvFiles)
	if target != "" && !slices.Contains(files, target) {
		files = append(files, target)
	}
	for _, f := range files {
		if _, done := overlay[f]; done {
			continue
		}
		old, rerr := root.ReadFile(f)
		if rerr != nil && f != target {
			continue
		}
		var s []Label
		if f == target {
			s = set
		}
		out, err := editEnvFile(f, old, argVar, keys, s, remove, f == target)
		if err != nil {
			return nil, err
		}
		overlay[f] = out
		if rerr != nil || string(out) != string(old) {
			edits = append(edits, change.Between(f, old, rerr == nil, out))
		}
	}
	// the result, as the kubelet reads it
	if err := checkEffective(read(root, overlay).Effective(), c, keys, target, set); err != nil {
		return nil, err
	}
	return edits, nil
}

// labelKeys are the keys of set and remove.
func labelKeys(set []Label, remove []string) map[string]bool {
	keys := map[string]bool{}
	for _, l := range set {
		keys[l.Key] = true
	}
	for _, k := range remove {
		keys[k] = true
	}
	return keys
}

// checkEffective refuses an edit after which the kubelet (its labels eff,
// c read before) would not register each key of keys as set says (with a
// target), or would still register one removed.
func checkEffective(eff map[string]Located, c *Config, keys map[string]bool, target string, set []Label) error {
	for k := range keys {
		want, wanted := "", false
		for _, l := range set {
			if l.Key == k && target != "" {
				want, wanted = l.Value, true
			}
		}
		got, has := eff[k]
		switch {
		case wanted && has && got.Value == want:
		case has:
			return &EditError{got.At.File, got.At.Line, fmt.Sprintf("the kubelet would still register %s=%s from here (%s): gpuprep edits the --node-labels of the kubelet's environment files only; change it there by hand", k, got.Value, where(got.At))}
		case wanted:
			return fmt.Errorf("the kubelet would not register %s=%s: %s is not on its command line (%s)", k, want, ExtraArgs, strings.Join(c.ArgVars, " "))
		}
	}
	return nil
}

func where(o Occurrence) string {
	if o.Var == "" {
		return "on ExecStart"
	}
	if strings.HasSuffix(o.File, ".service") || strings.HasSuffix(o.File, ".conf") {
		return "Environment=" + o.Var
	}
	return o.Var
}

// EditEnv is Edit for one environment file, content, alone: set in its last
// KUBELET_EXTRA_ARGS assignment, the keys of set and remove removed from
// every other --node-labels of the kubeadm drop-in's command-line variables.
func EditEnv(file string, content []byte, set []Label, remove []string) ([]byte, error) {
	keys := labelKeys(set, remove)
	vars := map[string]bool{}
	for _, v := range DefaultArgVars {
		vars[v] = true
	}
	return editEnvFile(file, content, vars, keys, set, remove, true)
}

// editEnvFile removes keys from the --node-labels of every assignment of a
// variable of vars, and with isTarget sets set in the last assignment of
// KUBELET_EXTRA_ARGS (added where missing).
func editEnvFile(file string, content []byte, vars, keys map[string]bool, set []Label, remove []string, isTarget bool) ([]byte, error) {
	lines := strings.SplitAfter(string(content), "\n")
	assigns, last := assignments(lines, vars)
	dropKeys := slices.Sorted(maps.Keys(keys))
	for _, i := range assigns {
		if isTarget && i == last {
			continue
		}
		// another assignment: only its --node-labels with one of keys change
		if !strings.Contains(lines[i], "--node-labels") {
			continue
		}
		out, err := editAssignment(file, lines, i, func(rhs string) (string, error) {
			return editNodeLabelsFlags(rhs, nil, dropKeys, false)
		}, keys)
		if err != nil {
			return nil, err
		}
		lines[i] = out
	}
	if !isTarget {
		return []byte(strings.Join(lines, "")), nil
	}
	if last < 0 {
		return appendExtraArgs(strings.Join(lines, ""), set, remove), nil
	}
	out, err := editAssignment(file, lines, last, func(rhs string) (string, error) {
		return editNodeLabelsFlags(rhs, set, remove, true)
	}, nil)
	if err != nil {
		return nil, err
	}
	lines[last] = out
	return []byte(strings.Join(lines, "")), nil
}

// assignments are the lines of an environment file that assign a variable
// of vars, and last, the last that assigns KUBELET_EXTRA_ARGS (-1: none).
func assignments(lines []string, vars map[string]bool) (assigns []int, last int) {
	last = -1
	for i, l := range lines {
		t := strings.TrimPrefix(strings.TrimSpace(l), "export ")
		name, _, ok := strings.Cut(t, "=")
		if !ok || strings.HasPrefix(t, "#") || !vars[strings.TrimSpace(name)] {
			continue
		}
		assigns = append(assigns, i)
		if strings.TrimSpace(name) == ExtraArgs {
			last = i
		}
	}
	return assigns, last
}

// appendExtraArgs is text with a KUBELET_EXTRA_ARGS assignment of the
// labels set added, on a line of its own (none when there are none).
func appendExtraArgs(text string, set []Label, remove []string) []byte {
	value := FormatLabels(MergeLabels(nil, set, remove))
	if value == "" {
		return []byte(text)
	}
	sep := ""
	if text != "" && !strings.HasSuffix(text, "\n") {
		sep = "\n"
	}
	return []byte(text + sep + ExtraArgs + "=\"--node-labels=" + value + "\"\n")
}

// editAssignment edits the value of the assignment on lines[idx] with edit,
// keeping its quoting and every other byte. With onlyKeys, a value that
// needs no change (none of those keys in its --node-labels) is left as it
// is, whatever it looks like.
func editAssignment(file string, lines []string, idx int, edit func(string) (string, error), onlyKeys map[string]bool) (string, error) {
	line := lines[idx]
	nl := ""
	if strings.HasSuffix(line, "\n") {
		nl, line = "\n", strings.TrimSuffix(line, "\n")
	}
	eq := strings.Index(line, "=")
	prefix, rhs := line[:eq+1], line[eq+1:]
	trail := rhs[len(strings.TrimRight(rhs, " \t")):]
	rhs = strings.TrimRight(rhs, " \t")
	quote := ""
	if len(rhs) >= 2 && (rhs[0] == '"' || rhs[0] == '\'') && rhs[len(rhs)-1] == rhs[0] {
		quote, rhs = rhs[:1], rhs[1:len(rhs)-1]
	}
	name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(prefix[:eq]), "export "))
	if onlyKeys != nil && !mentionsAny(rhs, onlyKeys) && !strings.HasSuffix(rhs, "\\") {
		return lines[idx], nil
	}
	if why := unreadValue(rhs, quote); why != "" {
		return "", &EditError{file, idx + 1, name + why}
	}
	newRHS, err := edit(rhs)
	if err != nil {
		return "", &EditError{file, idx + 1, err.Error()}
	}
	if quote == "" && strings.ContainsAny(newRHS, " \t") {
		quote = "\""
	}
	return prefix + quote + newRHS + quote + trail + nl, nil
}

// mentionsAny reports whether the value rhs sets one of keys (key=).
func mentionsAny(rhs string, keys map[string]bool) bool {
	for k := range keys {
		if strings.Contains(rhs, k+"=") {
			return true
		}
	}
	return false
}

// unreadValue is why gpuprep does not edit the value rhs (quoted by quote,
// "" unquoted), after the variable's name; "" when it does.
func unreadValue(rhs, quote string) string {
	switch {
	case strings.HasSuffix(rhs, "\\"):
		return " continues on the next line; gpuprep edits single-line values only"
	case quote == "" && (strings.HasPrefix(rhs, "\"") || strings.HasPrefix(rhs, "'")):
		return " has an unterminated quote or continues on the next line; gpuprep edits single-line values only"
	case strings.ContainsAny(rhs, "$`"):
		return " refers to variables or commands; gpuprep will not guess its value"
	case quote == "" && strings.ContainsAny(rhs, "\"'"):
		return " has quotes inside its value; gpuprep will not guess its value"
	}
	return ""
}

// editNodeLabelsFlags edits every --node-labels flag (--node-labels=V or
// --node-labels V) of a kubelet argument string: each loses the keys of
// remove and of set, except that with last the last flag gets set instead
// (in place where a key is there, at its end otherwise), and a flag appended
// when there is none. A flag left with no labels goes, with the space before
// it.
func editNodeLabelsFlags(args string, set []Label, remove []string, last bool) (string, error) {
	flags := nodeLabelFlags(args)
	drop := slices.Clone(remove)
	for _, l := range set {
		drop = append(drop, l.Key)
	}
	// from the end, so that the spans before stay valid
	out := args
	for i := len(flags) - 1; i >= 0; i-- {
		f := flags[i]
		have, err := ParseLabels(args[f.val.start:f.val.end])
		if err != nil {
			return "", err
		}
		var merged string
		if last && i == len(flags)-1 {
			merged = FormatLabels(MergeLabels(have, set, remove))
		} else {
			merged = FormatLabels(MergeLabels(have, nil, drop))
		}
		switch {
		case merged == "": // no labels left
			out = dropFlag(args, out, f)
		case merged != args[f.val.start:f.val.end]:
			out = out[:f.val.start] + merged + out[f.val.end:]
		}
	}
	if last && len(flags) == 0 {
		merged := FormatLabels(MergeLabels(nil, set, remove))
		if merged == "" {
			return out, nil
		}
		if strings.TrimSpace(out) == "" {
			return "--node-labels=" + merged, nil
		}
		return out + " --node-labels=" + merged, nil
	}
	return out, nil
}

// span is a byte range of a kubelet argument string.
type span struct{ start, end int }

// labelFlag is one --node-labels flag of an argument string: the flag and
// its value (the same word for --node-labels=V).
type labelFlag struct{ flag, val span }

// nodeLabelFlags are the --node-labels flags of args, in order.
func nodeLabelFlags(args string) []labelFlag {
	var words []span
	for i := 0; i < len(args); {
		for i < len(args) && (args[i] == ' ' || args[i] == '\t') {
			i++
		}
		s := i
		for i < len(args) && args[i] != ' ' && args[i] != '\t' {
			i++
		}
		if i > s {
			words = append(words, span{s, i})
		}
	}
	var flags []labelFlag
	for k := 0; k < len(words); k++ {
		w := words[k]
		word := args[w.start:w.end]
		switch {
		case strings.HasPrefix(word, "--node-labels="):
			flags = append(flags, labelFlag{w, span{w.start + len("--node-labels="), w.end}})
		case word == "--node-labels" && k+1 < len(words):
			flags = append(flags, labelFlag{w, words[k+1]})
			k++
		}
	}
	return flags
}

// dropFlag is out (args as edited after f) without the flag f, left with
// no labels, and the space before it.
func dropFlag(args, out string, f labelFlag) string {
	start := f.flag.start
	for start > 0 && (args[start-1] == ' ' || args[start-1] == '\t') {
		start--
	}
	if start == 0 {
		return strings.TrimLeft(out[f.val.end:], " \t")
	}
	return out[:start] + out[f.val.end:]
}
