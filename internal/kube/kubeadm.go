package kube

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// EditKubeadmConfig sets and removes node labels in a kubeadm configuration
// file: the node-labels kubelet argument of the JoinConfiguration (or, when
// there is none, the InitConfiguration) nodeRegistration.kubeletExtraArgs —
// a map in kubeadm.k8s.io/v1beta3, a list of {name, value} in v1beta4. Only
// the line holding the value changes, or lines are inserted; every other
// byte stays. Flow-style mappings are refused with file and line.
func EditKubeadmConfig(file string, content []byte, set []Label, remove []string) ([]byte, error) {
	target, apiVersion, err := kubeadmTarget(file, content)
	if err != nil {
		return nil, err
	}
	list := apiVersion >= "kubeadm.k8s.io/v1beta4"
	lines := strings.SplitAfter(string(content), "\n")
	fresh := func() string { return FormatLabels(MergeLabels(nil, set, remove)) }
	nr := value(target, "nodeRegistration")
	if nr == nil {
		return insertAfter(lines, target, 0, keyLine(target, "kind"), nodeRegistrationBlock(list, fresh()))
	}
	if nr.Style&yaml.FlowStyle != 0 {
		return nil, &EditError{File: file, Line: nr.Line, Msg: "nodeRegistration is a flow-style mapping; gpuprep edits block style only"}
	}
	args := value(nr, "kubeletExtraArgs")
	if args == nil {
		// a new first child, before the first line of the existing ones
		return insertAfter(lines, nr, nr.Content[0].Column-1, nr.Content[0].Line-2, kubeletExtraArgsBlock(list, fresh()))
	}
	if args.Style&yaml.FlowStyle != 0 || (args.Kind != yaml.MappingNode && args.Kind != yaml.SequenceNode) {
		return nil, &EditError{File: file, Line: args.Line, Msg: "kubeletExtraArgs is empty or flow-style; gpuprep edits block style only"}
	}
	valNode := nodeLabelsValue(args)
	if valNode == nil {
		return addNodeLabels(lines, args, fresh()), nil
	}
	if valNode.Kind != yaml.ScalarNode || valNode.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return nil, &EditError{File: file, Line: valNode.Line, Msg: "node-labels is not a one-line string"}
	}
	have, err := ParseLabels(valNode.Value)
	if err != nil {
		return nil, &EditError{File: file, Line: valNode.Line, Msg: err.Error()}
	}
	merged := FormatLabels(MergeLabels(have, set, remove))
	l := lines[valNode.Line-1]
	start := valNode.Column - 1
	end, err := scalarEnd(l, start, valNode.Style)
	if err != nil {
		return nil, &EditError{File: file, Line: valNode.Line, Msg: err.Error()}
	}
	repl := strconv.Quote(merged)
	if valNode.Style&yaml.SingleQuotedStyle != 0 {
		repl = "'" + strings.ReplaceAll(merged, "'", "''") + "'"
	}
	lines[valNode.Line-1] = l[:start] + repl + l[end:]
	return []byte(strings.Join(lines, "")), nil
}

// kubeadmTarget is the document of content (the kubeadm config file) whose
// labels change: its JoinConfiguration, or else its InitConfiguration,
// with its apiVersion, which must be kubeadm's.
func kubeadmTarget(file string, content []byte) (*yaml.Node, string, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var target *yaml.Node
	var apiVersion string
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return nil, "", fmt.Errorf("%s: %v", file, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m := doc.Content[0]
		kind := scalar(m, "kind")
		if kind == "JoinConfiguration" || kind == "InitConfiguration" && target == nil {
			target, apiVersion = m, scalar(m, "apiVersion")
		}
	}
	if target == nil {
		return nil, "", fmt.Errorf("%s: no JoinConfiguration or InitConfiguration document", file)
	}
	if !strings.HasPrefix(apiVersion, "kubeadm.k8s.io/") {
		return nil, "", fmt.Errorf("%s: apiVersion %q is not kubeadm.k8s.io/*", file, apiVersion)
	}
	return target, apiVersion, nil
}

// nodeLabelsValue is the node-labels value of kubeletExtraArgs (args: a
// map in v1beta3, a list of {name, value} in v1beta4); nil for none.
func nodeLabelsValue(args *yaml.Node) *yaml.Node {
	if args.Kind == yaml.MappingNode {
		return value(args, "node-labels")
	}
	var v *yaml.Node
	for _, item := range args.Content {
		if scalar(item, "name") == "node-labels" {
			v = value(item, "value")
		}
	}
	return v
}

// addNodeLabels is lines with a node-labels entry of labels added to
// kubeletExtraArgs (args) as its new first entry, before the first line of
// the existing ones.
func addNodeLabels(lines []string, args *yaml.Node, labels string) []byte {
	first := args.Content[0].Line - 1
	col := args.Content[0].Column - 1
	var add string
	if args.Kind == yaml.MappingNode {
		add = strings.Repeat(" ", col) + "node-labels: " + strconv.Quote(labels) + "\n"
	} else {
		dash := strings.IndexByte(lines[first], '-')
		add = strings.Repeat(" ", dash) + "- name: node-labels\n" + strings.Repeat(" ", col) + "value: " + strconv.Quote(labels) + "\n"
	}
	return []byte(strings.Join(insert(lines, first-1, add), ""))
}

// scalarEnd finds where the scalar starting at start on line l ends.
func scalarEnd(l string, start int, style yaml.Style) (int, error) {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(l); i++ {
			if l[i] == '\\' {
				i++
				continue
			}
			if l[i] == '"' {
				return i + 1, nil
			}
		}
	case style&yaml.SingleQuotedStyle != 0:
		for i := start + 1; i < len(l); i++ {
			if l[i] == '\'' {
				if i+1 < len(l) && l[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
	default:
		end := len(strings.TrimRight(l, "\r\n"))
		if i := strings.Index(l[start:], " #"); i >= 0 {
			end = start + i
		}
		return start + len(strings.TrimRight(l[start:end], " \t")), nil
	}
	return 0, fmt.Errorf("the quoted node-labels value goes on past its line")
}

func nodeRegistrationBlock(list bool, labels string) string {
	return "nodeRegistration:\n" + kubeletExtraArgsBlockIndented(list, labels, 2)
}

func kubeletExtraArgsBlock(list bool, labels string) string {
	return kubeletExtraArgsBlockIndented(list, labels, 0)
}

func kubeletExtraArgsBlockIndented(list bool, labels string, ind int) string {
	p := strings.Repeat(" ", ind)
	if list {
		return p + "kubeletExtraArgs:\n" + p + "  - name: node-labels\n" + p + "    value: " + strconv.Quote(labels) + "\n"
	}
	return p + "kubeletExtraArgs:\n" + p + "  node-labels: " + strconv.Quote(labels) + "\n"
}

// insertAfter inserts block (indented by col) after line index at.
func insertAfter(lines []string, _ *yaml.Node, col, at int, block string) ([]byte, error) {
	var b strings.Builder
	for _, l := range strings.SplitAfter(block, "\n") {
		if l != "" {
			b.WriteString(strings.Repeat(" ", col) + l)
		}
	}
	return []byte(strings.Join(insert(lines, at, b.String()), "")), nil
}

// insert puts text after line index at (0-based), adding a newline to that
// line if it has none.
func insert(lines []string, at int, text string) []string {
	out := append([]string{}, lines[:at+1]...)
	if !strings.HasSuffix(out[at], "\n") {
		out[at] += "\n"
	}
	out = append(out, text)
	return append(out, lines[at+1:]...)
}

func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	if v := value(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

func keyLine(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1].Line - 1
		}
	}
	return 0
}
