package vfio

import (
	"regexp"
	"strings"
	"sync"
)

// Shell-syntax configuration files (dracut.conf, mkinitcpio.conf): the
// generator sources them with bash, so a variable's value is the result of
// every assignment in order: NAME=… sets it, NAME+=… appends to it. gpuprep
// reads the plain forms guides and packages write, on one line or spanning
// lines inside quotes or parentheses:
//
//	force_drivers+=" vfio_pci vfio vfio_iommu_type1 "
//	MODULES=(vfio_pci vfio vfio_iommu_type1)
//
// A line that names the variable in any other way (inside an if, with a
// command substitution) is reported as unread, never guessed at.

// shellWord is one word of a variable's value and the assignment it came
// from.
type shellWord struct {
	word string
	line int    // 1-based line of its assignment
	text string // the assignment's first line
	file string
}

// shellVar is a variable's words after every assignment of a sequence of
// files, and the lines that name it in a form gpuprep does not read.
type shellVar struct {
	words  []shellWord
	unread []shellWord // word is empty; line, text and file say where
}

var assignRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)(\+?=)(.*)$`)
})

// assign reads the assignments to name in one file's lines into v.
func (v *shellVar) assign(file string, lines []string, name string) {
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		m := assignRe().FindStringSubmatch(l)
		if m == nil || m[1] != name {
			if strings.Contains(l, name) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				v.unread = append(v.unread, shellWord{line: i + 1, text: l, file: file})
			}
			continue
		}
		start := i
		body, last, ok := shellValue(lines, i, m[3])
		i = last
		if !ok {
			v.unread = append(v.unread, shellWord{line: start + 1, text: l, file: file})
			continue
		}
		if m[2] == "=" {
			v.words = nil
		}
		for _, w := range strings.Fields(body) {
			w = strings.Trim(w, `"'`)
			if w != "" {
				v.words = append(v.words, shellWord{word: w, line: start + 1, text: l, file: file})
			}
		}
	}
}

// shellValue is the value val assigned on line i of lines, up to its
// closing character on a later line for a quoted or parenthesised one:
// last is the line it ends on; ok is false for a value gpuprep does not
// read (an expansion, quotes or several words unquoted, text after the
// closing character, or none).
func shellValue(lines []string, i int, val string) (body string, last int, ok bool) {
	closer := valueCloser(val)
	if closer == "" {
		body = stripComment(val)
		return body, i, !strings.ContainsAny(body, "$`\"'") && len(strings.Fields(body)) <= 1
	}
	// a value that spans lines up to its closing character: each line
	// looked at once (a hostile file without one stays linear)
	parts := []string{stripArrayComments(val[1:], closer)}
	for !strings.Contains(parts[len(parts)-1], closer) && i+1 < len(lines) {
		i++
		parts = append(parts, stripArrayComments(lines[i], closer))
	}
	body = strings.Join(parts, "\n")
	end := strings.Index(body, closer)
	if end < 0 || strings.ContainsAny(body[:end], "$`") || strings.TrimSpace(stripComment(body[end+1:])) != "" {
		return "", i, false
	}
	return body[:end], i, true
}

// valueCloser is the character that closes a value opening with "(" or a
// quote, "" for one that opens with neither.
func valueCloser(val string) string {
	switch {
	case strings.HasPrefix(val, "("):
		return ")"
	case strings.HasPrefix(val, `"`):
		return `"`
	case strings.HasPrefix(val, "'"):
		return "'"
	}
	return ""
}

// stripComment drops a trailing " # comment".
func stripComment(s string) string {
	if strings.HasPrefix(s, "#") {
		return ""
	}
	if i := strings.Index(s, " #"); i >= 0 {
		return s[:i]
	}
	if i := strings.Index(s, "\t#"); i >= 0 {
		return s[:i]
	}
	return s
}

// stripArrayComments drops, in an array body, the comments that run from a
// word beginning with # to the end of its line (bash ignores them there);
// in a quoted value (closer not ")") it returns s as it is.
func stripArrayComments(s, closer string) string {
	if closer != ")" && closer != "" {
		return s
	}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		out = append(out, stripComment(l))
	}
	return strings.Join(out, "\n")
}
