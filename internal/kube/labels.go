package kube

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Label keys the GPU Operator reads.
const (
	WorkloadLabel   = "nvidia.com/gpu.workload.config"
	VGPUConfigLabel = "nvidia.com/vgpu.config"
)

var labelValueRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`) })

// ValidateLabelValue checks a Kubernetes label value: at most 63
// characters, alphanumerics with '-', '_' and '.' inside.
func ValidateLabelValue(key, v string) error {
	if len(v) > 63 || !labelValueRe().MatchString(v) {
		return fmt.Errorf("label %s=%q: a label value is at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key, v)
	}
	return nil
}

// Label is one key=value.
type Label struct{ Key, Value string }

// ParseLabels parses a --node-labels value: "k=v,k2=v2".
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

// EditKubeletEnv sets and removes node labels in a kubelet environment file
// (/etc/default/kubelet, /etc/sysconfig/kubelet): inside the last
// KUBELET_EXTRA_ARGS assignment's --node-labels, keeping its quoting and
// every other byte of the file. It adds the flag, or the assignment, where
// missing. It refuses (naming file and line) values continued over lines or
// built from other variables.
func EditKubeletEnv(file string, content []byte, set []Label, remove []string) ([]byte, error) {
	text := string(content)
	lines := strings.SplitAfter(text, "\n")
	idx := -1
	for i, l := range lines {
		t := strings.TrimSpace(l)
		t = strings.TrimPrefix(t, "export ")
		if strings.HasPrefix(t, "KUBELET_EXTRA_ARGS=") {
			idx = i
		}
	}
	if idx < 0 {
		value := FormatLabels(MergeLabels(nil, set, remove))
		if value == "" {
			return content, nil
		}
		sep := ""
		if text != "" && !strings.HasSuffix(text, "\n") {
			sep = "\n"
		}
		return []byte(text + sep + "KUBELET_EXTRA_ARGS=\"--node-labels=" + value + "\"\n"), nil
	}
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
	switch {
	case strings.HasSuffix(rhs, "\\"):
		return nil, &EditError{file, idx + 1, "KUBELET_EXTRA_ARGS continues on the next line; gpuprep edits single-line values only"}
	case strings.ContainsAny(rhs, "$`"):
		return nil, &EditError{file, idx + 1, "KUBELET_EXTRA_ARGS refers to variables or commands; gpuprep will not guess its value"}
	case quote == "" && strings.ContainsAny(rhs, "\"'"):
		return nil, &EditError{file, idx + 1, "KUBELET_EXTRA_ARGS has quotes inside its value; gpuprep will not guess its value"}
	}
	newRHS, err := editNodeLabelsFlag(rhs, set, remove)
	if err != nil {
		return nil, &EditError{file, idx + 1, err.Error()}
	}
	if quote == "" && strings.ContainsAny(newRHS, " \t") {
		quote = "\""
	}
	lines[idx] = prefix + quote + newRHS + quote + trail + nl
	return []byte(strings.Join(lines, "")), nil
}

// editNodeLabelsFlag edits the --node-labels flag in a kubelet argument
// string (--node-labels=V or --node-labels V), or appends one.
func editNodeLabelsFlag(args string, set []Label, remove []string) (string, error) {
	type span struct{ start, end int }
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
	for k, w := range words {
		word := args[w.start:w.end]
		var val span
		switch {
		case strings.HasPrefix(word, "--node-labels="):
			val = span{w.start + len("--node-labels="), w.end}
		case word == "--node-labels" && k+1 < len(words):
			val = words[k+1]
		default:
			continue
		}
		have, err := ParseLabels(args[val.start:val.end])
		if err != nil {
			return "", err
		}
		merged := FormatLabels(MergeLabels(have, set, remove))
		if merged == "" { // no labels left: drop the flag and the space before it
			start := w.start
			for start > 0 && (args[start-1] == ' ' || args[start-1] == '\t') {
				start--
			}
			if start == 0 {
				return strings.TrimLeft(args[val.end:], " \t"), nil
			}
			return args[:start] + args[val.end:], nil
		}
		return args[:val.start] + merged + args[val.end:], nil
	}
	merged := FormatLabels(MergeLabels(nil, set, remove))
	if merged == "" {
		return args, nil
	}
	if strings.TrimSpace(args) == "" {
		return "--node-labels=" + merged, nil
	}
	return args + " --node-labels=" + merged, nil
}
