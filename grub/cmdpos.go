package grub

import "strings"

// commandNames are the words of a shell statement that bash runs as
// command names: the first word of each simple command, after the leading
// assignments and redirections, with quotes removed ('.' and "source" run
// the builtins as . and source do). A simple command starts at the
// statement's start and after each control operator (; & && || | |& ;; ;&
// ;;& and the parentheses of a subshell or a case pattern), and after the
// reserved words that precede a command (! { then do else elif if while
// until time coproc), as bash's parser takes them (parse.y:
// command_token_position, reserved_word_acceptable; bash(1), "SHELL
// GRAMMAR"). Not command names: the words of a for/select/case head up to
// "in" (and "do"), case patterns after "in", the name after "function",
// the insides of [[ ]] and (( )), and what a $(...), `...` or <(...)
// inside a word runs (a subshell: it cannot change the variables of the
// files being read). A ')' always starts a command position here: a
// statement is one line, and a case pattern's ')' on a line of its own
// cannot be told from a subshell's (after a subshell's ')' bash accepts no
// command word, so nothing it runs is missed; a case pattern spelled like
// a builtin on a line without its "case" is refused too).
func commandNames(stmt string) []string {
	var out []string
	s := &cmdScanner{text: stmt}
	cmdPos := true
	skip := "" // reading a head up to this word ("in", "do")
	patterns := false
	redirTarget := false
	for {
		tok, op, ok := s.next()
		if !ok {
			return out
		}
		if op {
			redirTarget = false
			switch tok {
			case "<", ">", ">>", "<>", ">|", "<&", ">&", "&>", "&>>", "<<<":
				redirTarget = true
				continue
			case ")":
				patterns = false
			case ";;", ";&", ";;&":
				if skip == "" {
					patterns = true
				}
			}
			if skip == "do" && (tok == ";" || tok == "\n") {
				skip = "" // for x in a b; do: the head ends, "do" follows
			}
			cmdPos = true
			continue
		}
		if redirTarget {
			redirTarget = false
			continue
		}
		if isRedirWord(tok) {
			continue // 2>/dev/null, >file: the command name may follow
		}
		w := unquoteShell(tok)
		switch {
		case skip != "":
			if w == skip {
				if skip == "in" && patterns {
					skip = "" // case X in: patterns follow
				} else {
					skip = ""
					cmdPos = true
				}
			}
			continue
		case patterns:
			if w == "esac" {
				patterns, cmdPos = false, false
			}
			continue
		case !cmdPos:
			continue
		case isAssignmentWord(tok):
			continue // A=1 cmd: cmd is the command name
		}
		switch w {
		case "!", "{", "then", "do", "else", "elif", "if", "while", "until", "time", "coproc":
			continue
		case "}", "fi", "done", "esac":
			cmdPos = false
			continue
		case "for", "select":
			skip = "do"
			continue
		case "case":
			skip, patterns = "in", true
			continue
		case "function":
			s.word() // its name
			continue
		case "[[":
			s.skipTo("]]")
			cmdPos = false
			continue
		}
		out = append(out, w)
		cmdPos = false
	}
}

// isAssignmentWord: NAME=… or NAME+=… (or NAME[…]=…), unquoted before '='.
func isAssignmentWord(w string) bool {
	i := 0
	for i < len(w) && isNameChar(w[i]) {
		i++
	}
	if i == 0 || w[0] >= '0' && w[0] <= '9' {
		return false
	}
	if i < len(w) && w[i] == '[' {
		if k := strings.IndexByte(w[i:], ']'); k > 0 {
			i += k + 1
		}
	}
	return strings.HasPrefix(w[i:], "=") || strings.HasPrefix(w[i:], "+=")
}

// isRedirWord: a redirection written as one word with its target
// ("2>/dev/null", ">out", "2>&1").
func isRedirWord(w string) bool {
	i := 0
	for i < len(w) && w[i] >= '0' && w[i] <= '9' {
		i++
	}
	if i < len(w) && w[i] == '{' { // {fd}>file
		if k := strings.IndexByte(w[i:], '}'); k > 0 {
			i += k + 1
		}
	}
	return i < len(w) && (w[i] == '<' || w[i] == '>')
}

// unquoteShell removes quotes and backslashes from a word as bash's quote
// removal does ($'…' and $"…" taken as their quotes).
func unquoteShell(w string) string {
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c == '\\' && i+1 < len(w):
			i++
			b.WriteByte(w[i])
		case c == '$' && i+1 < len(w) && (w[i+1] == '\'' || w[i+1] == '"'):
		case c == '\'':
			k := strings.IndexByte(w[i+1:], '\'')
			if k < 0 {
				k = len(w) - i - 1
			}
			b.WriteString(w[i+1 : i+1+k])
			i += k + 1
		case c == '"':
			j := i + 1
			for j < len(w) && w[j] != '"' {
				if w[j] == '\\' && j+1 < len(w) && strings.IndexByte("$`\"\\\n", w[j+1]) >= 0 {
					j++
				}
				b.WriteByte(w[j])
				j++
			}
			i = j
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// cmdScanner splits a statement into words and control operators.
type cmdScanner struct {
	text string
	i    int
}

// next is the next token: a word (op false) or an operator (op true; a
// newline is "\n"). ok is false at the end.
func (s *cmdScanner) next() (tok string, op, ok bool) {
	for s.i < len(s.text) {
		c := s.text[s.i]
		switch {
		case c == ' ' || c == '\t':
			s.i++
		case c == '\\' && s.i+1 < len(s.text) && s.text[s.i+1] == '\n':
			s.i += 2 // a line continuation
		case c == '#':
			for s.i < len(s.text) && s.text[s.i] != '\n' {
				s.i++
			}
		default:
			if o := s.operator(); o != "" {
				return o, true, true
			}
			return s.word(), false, true
		}
	}
	return "", false, false
}

// operators, longest first.
var shellOperators = []string{";;&", "&>>", "<<<", ";;", ";&", "&&", "||", "|&", ">>", "<>", ">|", "<&", ">&", "&>", ";", "&", "|", "(", ")", "<", ">", "\n"}

func (s *cmdScanner) operator() string {
	rest := s.text[s.i:]
	if strings.HasPrefix(rest, "((") {
		// an arithmetic command: its words are no commands
		s.i += 2
		s.skipTo("))")
		return ";"
	}
	for _, o := range shellOperators {
		if strings.HasPrefix(rest, o) {
			if (o == "<" || o == ">") && strings.HasPrefix(rest[1:], "(") {
				return "" // <(…) >(…): a word
			}
			s.i += len(o)
			return o
		}
	}
	return ""
}

// word reads one word: up to an unquoted blank or operator character,
// quotes, backslashes, $(…), ${…}, `…` and <(…) taken whole.
func (s *cmdScanner) word() string {
	for s.i < len(s.text) && (s.text[s.i] == ' ' || s.text[s.i] == '\t') {
		s.i++
	}
	start := s.i
	for s.i < len(s.text) {
		c := s.text[s.i]
		switch {
		case c == '&' && s.i > start && (s.text[s.i-1] == '>' || s.text[s.i-1] == '<'):
			s.i++ // 2>&1
		case c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == ')':
			return s.text[start:s.i]
		case c == '(' && s.i > start && (s.text[s.i-1] == '<' || s.text[s.i-1] == '>'):
			s.i = s.closing(s.i+1, ')')
		case c == '(':
			return s.text[start:s.i]
		case (c == '<' || c == '>') && s.i > start && !isRedirPrefix(s.text[start:s.i]):
			return s.text[start:s.i]
		case c == '\\':
			s.i += 2
		case c == '\'':
			if k := strings.IndexByte(s.text[s.i+1:], '\''); k >= 0 {
				s.i += k + 2
			} else {
				s.i = len(s.text)
			}
		case c == '"':
			s.i = s.dquoted(s.i + 1)
		case c == '`':
			s.i = s.backquoted(s.i + 1)
		case c == '$' && s.i+1 < len(s.text) && s.text[s.i+1] == '(':
			s.i = s.closing(s.i+2, ')')
		case c == '$' && s.i+1 < len(s.text) && s.text[s.i+1] == '{':
			s.i = s.closing(s.i+2, '}')
		default:
			s.i++
		}
	}
	if s.i > len(s.text) {
		s.i = len(s.text)
	}
	return s.text[start:s.i]
}

// isRedirPrefix: w (the word so far) is a file descriptor number or
// {name}, so a '<' or '>' after it continues a redirection word.
func isRedirPrefix(w string) bool {
	if strings.HasPrefix(w, "{") && strings.HasSuffix(w, "}") {
		return true
	}
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return strings.ContainsAny(w, "<>")
		}
	}
	return true
}

// dquoted is the offset just past the '"' closing a string opened before i.
func (s *cmdScanner) dquoted(i int) int {
	for i < len(s.text) {
		switch c := s.text[i]; {
		case c == '\\':
			i += 2
		case c == '"':
			return i + 1
		case c == '`':
			i = s.backquoted(i + 1)
		case c == '$' && i+1 < len(s.text) && s.text[i+1] == '(':
			i = s.closing(i+2, ')')
		default:
			i++
		}
	}
	return len(s.text)
}

// backquoted is the offset just past the '`' closing one opened before i.
func (s *cmdScanner) backquoted(i int) int {
	for i < len(s.text) {
		switch s.text[i] {
		case '\\':
			i += 2
		case '`':
			return i + 1
		default:
			i++
		}
	}
	return len(s.text)
}

// closing is the offset just past the close that ends a $( or ${ opened
// before i, nested ones and quoted text skipped.
func (s *cmdScanner) closing(i int, close byte) int {
	open := byte('(')
	if close == '}' {
		open = '{'
	}
	depth := 1
	for i < len(s.text) {
		switch c := s.text[i]; c {
		case '\\':
			i += 2
			continue
		case '\'':
			if k := strings.IndexByte(s.text[i+1:], '\''); k >= 0 {
				i += k + 2
			} else {
				i = len(s.text)
			}
			continue
		case '"':
			i = s.dquoted(i + 1)
			continue
		case '`':
			i = s.backquoted(i + 1)
			continue
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(s.text)
}

// skipTo moves past the next word equal to end ("]]", "))").
func (s *cmdScanner) skipTo(end string) {
	if end == "))" {
		depth := 0
		for s.i < len(s.text) {
			switch s.text[s.i] {
			case '(':
				depth++
			case ')':
				if depth == 0 && strings.HasPrefix(s.text[s.i:], "))") {
					s.i += 2
					return
				}
				depth--
			}
			s.i++
		}
		return
	}
	for {
		tok, _, ok := s.next()
		if !ok || tok == end {
			return
		}
	}
}
