package grub

import (
	"fmt"
	"strings"
)

// This file is the editor's view of the defaults files: a stricter reader of
// the same shell subset as defaults.go that also remembers, for every byte of
// a variable's value, which source bytes produced it. That provenance is
// what lets Edit delete an argument where it was written (also when it
// reaches the value through $VAR or a self-append in a grub.d file) and
// append to the assignment that wins, leaving every other byte alone.

// File is one defaults file: its host path and content.
type File struct {
	Path string
	Data []byte
}

// chr is one byte of a value and the source bytes [s,e) of segment seg
// that produced it.
type chr struct {
	c    byte
	seg  int
	s, e int
	// param: written in the word of a ${NAME:-word} (or another of the
	// forms paramexp.go evaluates), which the editor does not edit.
	param bool
}

// segment is one quoting region of an assignment's value word: a
// double-quoted or single-quoted string, or a run of unquoted text.
type segment struct {
	file   int
	assign int  // index into shellState.assigns
	quote  byte // '"', '\'' or 0 (unquoted)
	open   int  // offset of the opening quote (quoted) or of the first byte
	close  int  // offset of the closing quote (quoted) or just past the last byte
}

// assignment is one NAME=value in a file.
type assignment struct {
	name       string
	file       int
	line       int // line the statement starts on (1-based)
	endLine    int // line the value word ends on
	wordStart  int // offset of the value word (just after '=')
	wordEnd    int // offset just past the value word
	segs       []int
	val        []chr
	opaque     string // why the value cannot be known; "" when it can
	valueEnd   int    // where text appended to the value goes: wordEnd, or before a CR ending the line (see crlf.go)
	plainWord  bool   // the word (up to valueEnd) is one unquoted run of bytes that need no quoting
	lastQuoted bool   // the word ends (at valueEnd) with a quoted segment, segs[endSeg]: its closing quote at valueEnd-1
	endSeg     int    // index into segs of that segment
}

// variable is a variable's current value while sourcing.
type variable struct {
	val    []chr
	opaque string
	assign int // the assignment that set it last; -1 when unknown
}

type shellState struct {
	files   []File
	segs    []segment
	assigns []*assignment
	vars    map[string]*variable
	// copied is how many value bytes $VAR references have copied so far
	// (bounded by maxCopied).
	copied int
	// spans are the line ranges of the statements that assign a
	// GRUB_CMDLINE variable, per file (for the byte-identity checks).
	spans map[int][][2]int
	// journal, while a statement is read as assignments, records what
	// setVar replaced, so that it can be undone (assignments).
	journal *[]savedVar
	// depth is the nesting of ${...} words being expanded (paramexp.go).
	depth int
}

// savedVar is a variable's value before setVar replaced it (nil: unset).
type savedVar struct {
	name string
	v    *variable
}

// setVar sets variable name, in the journal when one is kept.
func (st *shellState) setVar(name string, v *variable) {
	if st.journal != nil {
		*st.journal = append(*st.journal, savedVar{name, st.vars[name]})
	}
	st.vars[name] = v
}

// cmdlineVars are the variables whose values make up the Linux command line.
var cmdlineVars = []string{"GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"}

func isCmdlineVar(n string) bool { return n == cmdlineVars[0] || n == cmdlineVars[1] }

// sourceFiles interprets files in order, as grub-mkconfig sources them.
func sourceFiles(files []File) (*shellState, error) {
	st := &shellState{files: files, vars: map[string]*variable{}, spans: map[int][][2]int{}}
	for i := range files {
		if err := st.sourceFile(i); err != nil {
			return st, err
		}
	}
	return st, nil
}

// value returns a cmdline variable's final value, or a ParseError when it
// cannot be known.
func (st *shellState) value(name string) (string, *variable, error) {
	v := st.vars[name]
	if v == nil {
		return "", nil, nil
	}
	if v.opaque != "" {
		return "", v, st.opaqueErr(name, v)
	}
	return chrString(v.val), v, nil
}

func (st *shellState) opaqueErr(name string, v *variable) error {
	e := &ParseError{Msg: name + ": " + v.opaque}
	if v.assign >= 0 {
		a := st.assigns[v.assign]
		e.File, e.Line = st.files[a.file].Path, a.line
	}
	return e
}

func chrString(cs []chr) string {
	b := make([]byte, len(cs))
	for i, c := range cs {
		b[i] = c.c
	}
	return string(b)
}

// unsupportedBuiltins can change variables in ways the subset cannot follow.
var unsupportedBuiltins = map[string]bool{
	".": true, "source": true, "eval": true, "unset": true, "read": true, "set": true, "declare": true,
	"typeset": true, "readonly": true, "local": true, "mapfile": true, "readarray": true, "let": true,
	"getopts": true, "alias": true, "exec": true, "cd": true, "printf": true, "shift": true, "trap": true,
	"return": true, "exit": true, "builtin": true, "command": true, "enable": true,
}

var blockOpen = map[string]bool{"if": true, "case": true, "for": true, "while": true, "until": true, "select": true, "{": true, "function": true}
var blockClose = map[string]bool{"fi": true, "esac": true, "done": true, "}": true}

func (st *shellState) sourceFile(fi int) error {
	text := string(st.files[fi].Data)
	path := st.files[fi].Path
	line := 1
	depth := 0
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t':
			i++
			continue
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			continue
		}
		start, startLine := i, line
		// Try a statement made only of assignments (optionally after export).
		if depth == 0 {
			n, lines, ok, err := st.assignments(fi, text, i, line)
			if err != nil {
				return err
			}
			if ok {
				i += n
				line += lines
				continue
			}
		}
		// Anything else: find where it ends, and refuse it when it could
		// change what gpuprep reads.
		end, lines, err := statementEnd(text, start)
		if err != nil {
			return &ParseError{path, startLine, err.Error()}
		}
		stmt := text[start:end]
		words := strings.FieldsFunc(stmt, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == ';' })
		if strings.Contains(stmt, "GRUB_CMDLINE_LINUX") {
			return &ParseError{path, startLine, fmt.Sprintf("unsupported shell statement touches the kernel command line: %q", firstLine(stmt))}
		}
		if strings.Contains(stmt, "<<") {
			// the lines after it are the document's, not statements
			return &ParseError{path, startLine, fmt.Sprintf("unsupported shell statement %q: a here-document (or a shift)", firstLine(stmt))}
		}
		for _, c := range commandNames(stmt) {
			if unsupportedBuiltins[c] {
				return &ParseError{path, startLine, fmt.Sprintf("unsupported shell statement %q: it runs %s, which could change any variable", firstLine(stmt), c)}
			}
		}
		for _, w := range words {
			switch {
			case blockOpen[w]:
				depth++
			case blockClose[w]:
				depth--
			}
		}
		if depth < 0 {
			depth = 0
		}
		// Variables such statements may set are no longer known.
		for _, n := range assignedNames(stmt) {
			st.vars[n] = &variable{opaque: fmt.Sprintf("set by a statement gpuprep does not follow (%s:%d)", path, startLine), assign: -1}
		}
		i = end
		line += lines
	}
	if depth > 0 {
		return &ParseError{path, line, "unterminated compound statement"}
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if k := strings.IndexByte(s, '\n'); k >= 0 {
		return s[:k] + " …"
	}
	return s
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

// statementEnd finds the end of the statement at text[i:]: the first
// unquoted newline (or ';' ... we keep the whole line), honouring quotes,
// backslashes and $(...) nesting. It returns the end offset and the
// newlines crossed before it.
func statementEnd(text string, i int) (int, int, error) {
	lines := 0
	depth := 0
	for i < len(text) {
		c := text[i]
		switch c {
		case '\\':
			if i+1 < len(text) && text[i+1] == '\n' {
				lines++
			}
			i = min(i+2, len(text))
			continue
		case '\'':
			k := strings.IndexByte(text[i+1:], '\'')
			if k < 0 {
				return 0, 0, fmt.Errorf("unterminated single quote")
			}
			lines += strings.Count(text[i+1:i+1+k], "\n")
			i += k + 2
			continue
		case '"':
			j := i + 1
			for j < len(text) && text[j] != '"' {
				if text[j] == '\\' {
					j++
				}
				if j < len(text) && text[j] == '\n' {
					lines++
				}
				j++
			}
			if j >= len(text) {
				return 0, 0, fmt.Errorf("unterminated double quote")
			}
			i = j + 1
			continue
		case '`':
			k := strings.IndexByte(text[i+1:], '`')
			if k < 0 {
				return 0, 0, fmt.Errorf("unterminated backquote")
			}
			lines += strings.Count(text[i+1:i+1+k], "\n")
			i += k + 2
			continue
		case '(':
			depth++
		case ')':
			depth--
		case '\n':
			if depth <= 0 {
				return i, lines, nil
			}
			lines++
		}
		i++
	}
	return i, lines, nil
}

// assignments reads a statement made only of NAME=value words (optionally
// after "export", which may also list bare names) at text[i:]. ok is false
// when the statement is something else; nothing is recorded then.
func (st *shellState) assignments(fi int, text string, i, line int) (n, lines int, ok bool, err error) {
	path := st.files[fi].Path
	start := i
	// Assignments take effect left to right (A=1 B=$A sees the new A), so
	// each is committed as it is read and undone if the statement turns out
	// to be something else (A=1 cmd).
	nAssigns, nSegs := len(st.assigns), len(st.segs)
	var undo []savedVar
	st.journal = &undo
	defer func() { st.journal = nil }()
	rollback := func() {
		for k := len(undo) - 1; k >= 0; k-- {
			if undo[k].v == nil {
				delete(st.vars, undo[k].name)
			} else {
				st.vars[undo[k].name] = undo[k].v
			}
		}
		st.assigns, st.segs = st.assigns[:nAssigns], st.segs[:nSegs]
	}
	var got []*assignment
	exported := false
	first := true
	for {
		// one word
		j := i
		for j < len(text) && isNameChar(text[j]) {
			j++
		}
		word := text[i:j]
		if first && word == "export" && j < len(text) && (text[j] == ' ' || text[j] == '\t') {
			exported = true
			first = false
			i = j
			for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
				i++
			}
			continue
		}
		first = false
		switch {
		case isName(word) && j < len(text) && text[j] == '=':
			ai := len(st.assigns)
			a := &assignment{name: word, file: fi, line: line + lines, wordStart: j + 1}
			v, segs, k, nl, e := st.word(fi, text, j+1, ai)
			if e != nil {
				rollback()
				return 0, 0, false, &ParseError{path, line + lines, word + ": " + e.Error()}
			}
			a.wordEnd = j + 1 + k
			a.val, a.opaque = v.val, v.opaque
			lines += nl
			a.endLine = line + lines
			for _, s := range segs {
				s.assign = ai
				a.segs = append(a.segs, len(st.segs))
				st.segs = append(st.segs, s)
			}
			for k := range a.val {
				if c := &a.val[k]; c.seg < 0 {
					c.seg = a.segs[-c.seg-1]
				}
			}
			a.valueEnd = valueEnd(text, a, segs)
			a.plainWord, a.lastQuoted, a.endSeg = wordShape(text, a, segs)
			st.assigns = append(st.assigns, a)
			st.setVar(word, &variable{val: a.val, opaque: a.opaque, assign: ai})
			got = append(got, a)
			i = a.wordEnd
		case exported && isName(word) && (j >= len(text) || strings.IndexByte(" \t\n;#", text[j]) >= 0):
			i = j // export NAME: no change to the value
		default:
			rollback()
			return 0, 0, false, nil
		}
		// after a word: blanks, then the end of the statement or another word
		for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
			i++
		}
		end := i >= len(text) || text[i] == '\n' || text[i] == '#' || text[i] == ';' && (i+1 >= len(text) || text[i+1] != ';')
		if end {
			if i < len(text) && text[i] == ';' {
				i++
			}
			break
		}
		if !isNameStart(text[i]) {
			rollback()
			return 0, 0, false, nil
		}
	}
	if len(got) == 0 {
		return 0, 0, false, nil
	}
	for _, a := range got {
		if isCmdlineVar(a.name) {
			st.spans[fi] = append(st.spans[fi], [2]int{a.line, a.endLine})
		}
	}
	return i - start, lines, true, nil
}

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// wordShape says whether the word, up to a.valueEnd, is one unquoted run of
// bytes that are safe without quotes (or empty), and whether it ends there
// with a quoted segment (and which).
func wordShape(text string, a *assignment, segs []segment) (plain, lastQuoted bool, endSeg int) {
	w := text[a.wordStart:a.valueEnd]
	if a.opaque == "" && unquotedSafe(w) {
		plain = true
	}
	endSeg = len(segs) - 1
	if endSeg >= 0 && segs[endSeg].open >= a.valueEnd { // the CR's own segment
		endSeg--
	}
	if endSeg >= 0 {
		l := segs[endSeg]
		lastQuoted = l.quote != 0 && l.close == a.valueEnd-1
	}
	return
}

// unquotedSafe reports whether s needs no quoting in a shell word.
func unquotedSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isNameChar(c) || strings.IndexByte("=,.:/+@%-", c) >= 0) {
			return false
		}
	}
	return true
}

// word reads one assignment value at text[i:]. Bytes that come from this
// word carry provisional segment ids -1, -2, ... (its own segments, in
// order), fixed up on commit; bytes that come from $VAR keep theirs.
func (st *shellState) word(fi int, text string, i, assign int) (v *variable, segs []segment, n, lines int, err error) {
	v = &variable{assign: assign}
	start := i
	// the unquoted run being built
	run := -1
	opaque := func(why string) {
		if v.opaque == "" {
			v.opaque = why
		}
	}
	closeRun := func() {
		if run >= 0 {
			segs[run].close = i
			run = -1
		}
	}
	openRun := func() int {
		if run < 0 {
			segs = append(segs, segment{file: fi, open: i})
			run = len(segs) - 1
		}
		return -run - 1
	}
	for i < len(text) {
		if len(v.val) > maxValue {
			return nil, nil, 0, 0, errValueTooLong(len(v.val))
		}
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ';':
			closeRun()
			if len(v.val) > maxValue {
				return nil, nil, 0, 0, errValueTooLong(len(v.val))
			}
			return v, segs, i - start, lines, nil
		case strings.IndexByte("&|<>()", c) >= 0:
			return nil, nil, 0, 0, fmt.Errorf("unsupported shell syntax %q in an assignment", string(c))
		case c == '\'':
			closeRun()
			k := strings.IndexByte(text[i+1:], '\'')
			if k < 0 {
				return nil, nil, 0, 0, fmt.Errorf("unterminated single quote")
			}
			segs = append(segs, segment{file: fi, quote: '\'', open: i, close: i + 1 + k})
			id := -len(segs)
			for p := i + 1; p < i+1+k; p++ {
				v.val = append(v.val, chr{text[p], id, p, p + 1, false})
			}
			lines += strings.Count(text[i+1:i+1+k], "\n")
			i += k + 2
		case c == '"':
			closeRun()
			segs = append(segs, segment{file: fi, quote: '"', open: i})
			me := len(segs) - 1
			id := -len(segs)
			i++
			closed := false
			for i < len(text) {
				if len(v.val) > maxValue {
					return nil, nil, 0, 0, errValueTooLong(len(v.val))
				}
				c := text[i]
				if c == '"' {
					closed = true
					segs[me].close = i
					i++
					break
				}
				if c == '\\' && i+1 < len(text) {
					switch text[i+1] {
					case '"', '\\', '$', '`':
						v.val = append(v.val, chr{text[i+1], id, i, i + 2, false})
						i += 2
						continue
					case '\n':
						lines++
						i += 2
						continue
					}
				}
				if c == '$' || c == '`' {
					k, why, e := st.expand(text[i:], i, true, id, v)
					if e != nil {
						return nil, nil, 0, 0, e
					}
					if why != "" {
						opaque(why)
					}
					if k == 0 { // a lone '$'
						v.val = append(v.val, chr{'$', id, i, i + 1, false})
						i++
						continue
					}
					lines += strings.Count(text[i:i+k], "\n")
					i += k
					continue
				}
				if c == '\n' {
					lines++
				}
				v.val = append(v.val, chr{c, id, i, i + 1, false})
				i++
			}
			if !closed {
				return nil, nil, 0, 0, fmt.Errorf("unterminated double quote")
			}
		case c == '\\':
			if i+1 >= len(text) {
				id := openRun()
				v.val = append(v.val, chr{'\\', id, i, i + 1, false})
				i++
				continue
			}
			if text[i+1] == '\n' {
				lines++
				i += 2
				continue
			}
			id := openRun()
			v.val = append(v.val, chr{text[i+1], id, i, i + 2, false})
			i += 2
		case c == '$' || c == '`':
			if c == '$' && i+1 < len(text) && (text[i+1] == '\'' || text[i+1] == '"') {
				return nil, nil, 0, 0, fmt.Errorf("unsupported bash quoting $%c...%c", text[i+1], text[i+1])
			}
			id := 0
			if c == '$' && i+1 < len(text) && text[i+1] == '{' {
				closeRun() // a run of its own: a ${X:-word}'s word has its bytes
				id = openRun()
			}
			k, why, e := st.expand(text[i:], i, false, id, v)
			if e != nil {
				return nil, nil, 0, 0, e
			}
			if why != "" {
				opaque(why)
			}
			if k == 0 {
				id := openRun()
				v.val = append(v.val, chr{'$', id, i, i + 1, false})
				i++
				continue
			}
			if id == 0 {
				closeRun()
			}
			lines += strings.Count(text[i:i+k], "\n")
			i += k
			closeRun() // the ${...}'s own run
		case c == '~' && (i == start || text[i-1] == ':'):
			opaque("tilde expansion")
			id := openRun()
			v.val = append(v.val, chr{c, id, i, i + 1, false})
			i++
		default:
			id := openRun()
			v.val = append(v.val, chr{c, id, i, i + 1, false})
			i++
		}
	}
	closeRun()
	if len(v.val) > maxValue {
		return nil, nil, 0, 0, errValueTooLong(len(v.val))
	}
	return v, segs, i - start, lines, nil
}

// expand handles $NAME, ${NAME}, the ${NAME:-word} forms (paramexp.go),
// $(...), $((...)), `...` and special parameters at the start of s (at
// offset off of the file), appending the value's bytes (with their
// provenance; id is the segment of bytes written in a ${NAME:-word}'s
// word) to v. It returns the bytes consumed (0 for a lone '$', which is
// literal) and, when the value cannot be known, why.
func (st *shellState) expand(s string, off int, inDQ bool, id int, v *variable) (int, string, error) {
	if s[0] == '`' {
		for k := 1; k < len(s); k++ {
			if s[k] == '\\' {
				k++
				continue
			}
			if s[k] == '`' {
				return k + 1, "built from a command's output (`...`); gpuprep will not guess its value", nil
			}
		}
		return 0, "", fmt.Errorf("unterminated backquote")
	}
	if len(s) < 2 {
		return 0, "", nil
	}
	switch c := s[1]; {
	case c == '(':
		if len(s) > 2 && s[2] == '(' {
			// $((...)) may assign (X=1, X++), in this shell
			for _, n := range assignedNames(parenBody(s)) {
				st.setVar(n, &variable{opaque: "set in an arithmetic expansion $((...)), which gpuprep does not evaluate", assign: v.assign})
			}
		}
		if k := parenEnd(s); k > 0 {
			return k, "built from a command's output ($(...)); gpuprep will not guess its value", nil
		}
		return 0, "", fmt.Errorf("unterminated $(")
	case c == '{':
		return st.param(s, off, inDQ, id, v)
	case isNameStart(c):
		k := 1
		for k < len(s) && isNameChar(s[k]) {
			k++
		}
		why, err := st.ref(s[1:k], v)
		return k, why, err
	case c >= '0' && c <= '9' || strings.IndexByte("@*#?-$!", c) >= 0:
		return 2, fmt.Sprintf("uses the special parameter $%c", c), nil
	}
	return 0, "", nil
}

// ref appends the value of variable name to v, within the expansion bounds
// (bounds.go).
func (st *shellState) ref(name string, v *variable) (string, error) {
	x := st.vars[name]
	if x == nil {
		if isCmdlineVar(name) {
			return "", nil // grub-mkconfig starts with both unset
		}
		return "references $" + name + ", which no defaults file sets (its value would come from the environment)", nil
	}
	if err := st.charge(name, len(v.val), len(x.val)); err != nil {
		return "", err
	}
	v.val = append(v.val, x.val...)
	return x.opaque, nil
}

// splitWords splits a value into the words GRUB's script parser (and then
// the kernel) sees: separated by blanks (isArgBlank) outside quotes; ' and " quote;
// a backslash escapes the next byte. It returns [start,end) offsets.
func splitWords(s string) [][2]int {
	var out [][2]int
	i := 0
	for i < len(s) {
		for i < len(s) && isArgBlank(s[i]) {
			i++
		}
		if i >= len(s) {
			break
		}
		st := i
		var q byte
		for i < len(s) {
			c := s[i]
			if q == 0 && isArgBlank(c) {
				break
			}
			switch {
			case c == '\\' && q != '\'':
				i++
			case q == 0 && (c == '"' || c == '\''):
				q = c
			case c == q:
				q = 0
			}
			i++
		}
		if i > len(s) {
			i = len(s)
		}
		out = append(out, [2]int{st, i})
	}
	return out
}

// unquoteWord removes GRUB-level quoting from one word.
func unquoteWord(w string) string {
	var b strings.Builder
	var q byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c == '\\' && q != '\'' && i+1 < len(w):
			i++
			b.WriteByte(w[i])
		case q == 0 && (c == '"' || c == '\''):
			q = c
		case c == q:
			q = 0
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Words splits a GRUB_CMDLINE value into its arguments as GRUB passes them
// to the kernel (quotes removed).
func Words(s string) []string {
	var out []string
	for _, w := range splitWords(s) {
		out = append(out, s[w[0]:w[1]])
	}
	return out
}
