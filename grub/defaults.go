// Package grub reads and edits the kernel arguments a bootloader will pass:
// /etc/default/grub and /etc/default/grub.d/*.cfg (sourced by the shell, in
// that order), BLS entries and /etc/kernel/cmdline.
package grub

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Var is a variable assignment found in a defaults file.
type Var struct {
	Name  string
	Value string // after expansion
	File  string
	Line  int // line the assignment starts on
	// Opaque is set when the value could not be known without running a
	// command (`...` or $(...)); Value then holds the raw text.
	Opaque bool
}

// Defaults is the effect of sourcing /etc/default/grub and its grub.d files.
type Defaults struct {
	Vars  map[string]*Var
	Files []string // files read, in order
}

// ParseError names the file and line of text gpuprep will not guess about.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// DefaultsFile is GRUB's main defaults file.
const DefaultsFile = "/etc/default/grub"

// ReadDefaults sources /etc/default/grub, then /etc/default/grub.d/*.cfg in
// name order, as grub-mkconfig does. A missing /etc/default/grub returns
// (nil, nil).
func ReadDefaults(root *host.Root) (*Defaults, error) {
	data, err := root.ReadFile(DefaultsFile)
	if err != nil {
		return nil, nil
	}
	d := &Defaults{Vars: map[string]*Var{}}
	if err := d.source(DefaultsFile, string(data)); err != nil {
		return d, err
	}
	cfgs, _ := root.Glob("/etc/default/grub.d/*.cfg")
	sort.Strings(cfgs)
	for _, f := range cfgs {
		b, err := root.ReadFile(f)
		if err != nil {
			return d, fmt.Errorf("%s: %w", f, err)
		}
		if err := d.source(f, string(b)); err != nil {
			return d, err
		}
	}
	return d, nil
}

// Get returns a variable's value ("" when unset).
func (d *Defaults) Get(name string) string {
	if v := d.Vars[name]; v != nil {
		return v.Value
	}
	return ""
}

// KernelCmdline is what the default menu entry passes to the kernel:
// GRUB_CMDLINE_LINUX then GRUB_CMDLINE_LINUX_DEFAULT. It fails when either
// was built from a command's output.
func (d *Defaults) KernelCmdline() (string, error) {
	var parts []string
	for _, n := range []string{"GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"} {
		v := d.Vars[n]
		if v == nil {
			continue
		}
		if v.Opaque {
			return "", &ParseError{v.File, v.Line, n + " is built from a command's output; gpuprep will not guess its value"}
		}
		parts = append(parts, v.Value)
	}
	return strings.TrimSpace(strings.Join(parts, " ")), nil
}

// source interprets the subset of POSIX shell that defaults files use:
// comments, NAME=value assignments (optionally after "export"), with double,
// single or no quotes, $NAME and ${NAME} expansion, values spanning lines
// inside quotes. Anything else that could change a GRUB_CMDLINE variable is
// refused with the file and line; other statements are ignored when they do
// not mention one.
func (d *Defaults) source(file, text string) error {
	d.Files = append(d.Files, file)
	line := 1
	i := 0
	for i < len(text) {
		// skip blanks and comments
		switch c := text[i]; {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == ';':
			i++
			continue
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			continue
		}
		start := line
		// read the statement's first word
		j := i
		for j < len(text) && isNameChar(text[j]) {
			j++
		}
		word := text[i:j]
		if word == "export" && j < len(text) && (text[j] == ' ' || text[j] == '\t') {
			i = j
			for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
				i++
			}
			continue
		}
		if word == "" || j >= len(text) || text[j] != '=' {
			// not an assignment: skip the line, but refuse it if it could
			// touch the kernel command line
			k := strings.IndexByte(text[i:], '\n')
			if k < 0 {
				k = len(text) - i
			}
			stmt := text[i : i+k]
			if strings.Contains(stmt, "GRUB_CMDLINE_LINUX") {
				return &ParseError{file, start, fmt.Sprintf("unsupported shell statement touches the kernel command line: %q", strings.TrimSpace(stmt))}
			}
			i += k
			continue
		}
		val, opaque, n, lines, err := d.value(text[j+1:])
		if err != nil {
			return &ParseError{file, start, word + ": " + err.Error()}
		}
		d.Vars[word] = &Var{Name: word, Value: val, File: file, Line: start, Opaque: opaque}
		i = j + 1 + n
		line += lines
	}
	return nil
}

func isNameChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// value reads one shell word (the right-hand side of an assignment) and
// returns its expansion, whether it depends on a command, the bytes consumed
// and the newlines crossed.
func (d *Defaults) value(s string) (val string, opaque bool, n, lines int, err error) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ';':
			return b.String(), opaque, i, lines, nil
		case c == '#' && i == 0:
			return "", false, i, lines, nil
		case c == '\'':
			k := strings.IndexByte(s[i+1:], '\'')
			if k < 0 {
				return "", false, 0, 0, fmt.Errorf("unterminated single quote")
			}
			part := s[i+1 : i+1+k]
			lines += strings.Count(part, "\n")
			b.WriteString(part)
			i += k + 2
		case c == '"':
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '"' {
					closed = true
					i++
					break
				}
				if c == '\\' && i+1 < len(s) {
					switch s[i+1] {
					case '"', '\\', '$', '`':
						b.WriteByte(s[i+1])
						i += 2
						continue
					case '\n':
						lines++
						i += 2
						continue
					}
				}
				if c == '$' || c == '`' {
					k, op, e := d.expand(s[i:], &b)
					if e != nil {
						return "", false, 0, 0, e
					}
					opaque = opaque || op
					i += k
					continue
				}
				if c == '\n' {
					lines++
				}
				b.WriteByte(c)
				i++
			}
			if !closed {
				return "", false, 0, 0, fmt.Errorf("unterminated double quote")
			}
		case c == '\\' && i+1 < len(s):
			if s[i+1] == '\n' {
				lines++
			} else {
				b.WriteByte(s[i+1])
			}
			i += 2
		case c == '$' || c == '`':
			k, op, e := d.expand(s[i:], &b)
			if e != nil {
				return "", false, 0, 0, e
			}
			opaque = opaque || op
			i += k
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), opaque, i, lines, nil
}

// expand handles $NAME, ${NAME}, $(...) and `...` at the start of s.
func (d *Defaults) expand(s string, b *strings.Builder) (int, bool, error) {
	if s[0] == '`' {
		k := strings.IndexByte(s[1:], '`')
		if k < 0 {
			return 0, false, fmt.Errorf("unterminated backquote")
		}
		b.WriteString(s[:k+2])
		return k + 2, true, nil
	}
	if len(s) > 1 && s[1] == '(' {
		depth := 0
		for k := 1; k < len(s); k++ {
			switch s[k] {
			case '(':
				depth++
			case ')':
				depth--
				if depth == 0 {
					b.WriteString(s[:k+1])
					return k + 1, true, nil
				}
			}
		}
		return 0, false, fmt.Errorf("unterminated $(")
	}
	if len(s) > 1 && s[1] == '{' {
		k := strings.IndexByte(s, '}')
		if k < 0 {
			return 0, false, fmt.Errorf("unterminated ${")
		}
		name := s[2:k]
		for _, c := range []byte(name) {
			if !isNameChar(c) {
				return 0, false, fmt.Errorf("unsupported parameter expansion ${%s}", name)
			}
		}
		v := d.Vars[name]
		if v != nil {
			b.WriteString(v.Value)
			return k + 1, v.Opaque, nil
		}
		return k + 1, false, nil
	}
	k := 1
	for k < len(s) && isNameChar(s[k]) {
		k++
	}
	if k == 1 {
		b.WriteByte('$')
		return 1, false, nil
	}
	if v := d.Vars[s[1:k]]; v != nil {
		b.WriteString(v.Value)
		return k, v.Opaque, nil
	}
	return k, false, nil
}

// Source says where the kernel arguments for the next boot come from.
type Source struct {
	Kind    string // "grub", "bls", "kernel-cmdline"
	File    string
	Cmdline string
}

// Configured returns the kernel command line the bootloader will use on the
// next boot of kernel kver: a BLS entry for that kernel where the host boots
// through BLS (RHEL, Fedora), else /etc/default/grub (+ grub.d), else
// /etc/kernel/cmdline. It returns nil when none of them is there.
func Configured(root *host.Root, kver string) (*Source, error) {
	if src, err := blsEntry(root, kver); src != nil || err != nil {
		return src, err
	}
	d, err := ReadDefaults(root)
	if err != nil {
		return nil, err
	}
	if d != nil {
		c, err := d.KernelCmdline()
		if err != nil {
			return nil, err
		}
		file := DefaultsFile
		for _, n := range []string{"GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_CMDLINE_LINUX"} {
			if v := d.Vars[n]; v != nil && v.File != DefaultsFile {
				file = DefaultsFile + " + " + v.File
				break
			}
		}
		return &Source{Kind: "grub", File: file, Cmdline: c}, nil
	}
	if b, err := root.ReadString("/etc/kernel/cmdline"); err == nil {
		return &Source{Kind: "kernel-cmdline", File: "/etc/kernel/cmdline", Cmdline: b}, nil
	}
	return nil, nil
}

// blsEntry reads the options of the BLS entry that boots kver.
func blsEntry(root *host.Root, kver string) (*Source, error) {
	entries, _ := root.Glob("/boot/loader/entries/*.conf")
	for _, e := range entries {
		b, err := root.ReadFile(e)
		if err != nil {
			continue
		}
		var linux, options string
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "linux":
				linux = f[1]
			case "options":
				options = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "options"))
			}
		}
		if kver != "" && path.Base(linux) != "vmlinuz-"+kver {
			continue
		}
		if strings.Contains(options, "$kernelopts") {
			env, _ := root.ReadFile("/boot/grub2/grubenv")
			ko := ""
			for _, l := range strings.Split(string(env), "\n") {
				if strings.HasPrefix(l, "kernelopts=") {
					ko = strings.TrimPrefix(l, "kernelopts=")
				}
			}
			options = strings.ReplaceAll(options, "$kernelopts", ko)
		}
		return &Source{Kind: "bls", File: e, Cmdline: options}, nil
	}
	return nil, nil
}
