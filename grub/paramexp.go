package grub

import (
	"cmp"
	"fmt"
	"strings"
)

// Parameter expansions with a default, as POSIX sh (XCU 2.6.2) and bash
// evaluate them, and dash (Debian's and Ubuntu's /bin/sh, which sources the
// defaults files for grub-mkconfig) alike:
//
//	${X:-w}  w where X is unset or empty, else $X
//	${X-w}   w where X is unset, else $X
//	${X:=w}  as ${X:-w}, and X is set to w where w is used
//	${X=w}   as ${X-w}, and X is set to w where w is used
//	${X:+w}  w where X is set and not empty, else nothing
//	${X+w}   w where X is set, else nothing
//
// The word w is expanded only where it is used. gpuprep knows X unset only
// for the GRUB_CMDLINE variables (grub-mkconfig's environment could hold
// any other); a variable it does not know makes the value unknown, and so
// does anything in w it does not evaluate (a tilde, a backslash inside
// quotes inside the braces, which bash and dash read differently). What
// it cannot even delimit (a command substitution inside the braces, a
// single quote inside braces inside double quotes, where dash ends the
// expansion at the first '}' and bash does not) is an error: the rest of
// the line would be read differently by the two shells.

// maxParamDepth bounds the nesting of ${...} inside ${...}.
const maxParamDepth = 32

// paramOps are the operators evaluated, longest first.
var paramOps = []string{":-", ":=", ":+", "-", "=", "+"}

// braceFrame is a level of braceEnd's scan: the braces of a ${ (dq: they
// are inside double quotes), or a "..." within them (quoted).
type braceFrame struct{ quoted, dq bool }

// braceEnd is the length of the ${...} at the start of s (s[0:2] is "${"),
// its closing brace included. inDQ: the expansion is inside double quotes.
func braceEnd(s string, inDQ bool) (int, error) {
	stack := []braceFrame{{dq: inDQ}}
	for i := 2; i < len(s); {
		n, push, pop, err := braceStep(s, i, stack[len(stack)-1])
		switch {
		case err != nil:
			return 0, err
		case push != nil && len(stack) >= maxParamDepth:
			return 0, fmt.Errorf("${...} nested more than %d deep", maxParamDepth)
		case push != nil:
			stack = append(stack, *push)
		case pop:
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return n, nil
			}
		}
		i = n
	}
	return 0, fmt.Errorf("unterminated ${")
}

// braceStep reads the byte (or escape, or quoted string) at s[i] in frame
// f: where the scan goes on, and the frame it opens or whether it closes f.
func braceStep(s string, i int, f braceFrame) (next int, push *braceFrame, pop bool, err error) {
	c := s[i]
	switch {
	case c == '\\':
		return i + 2, nil, false, nil
	case c == '`' || strings.HasPrefix(s[i:], "$("):
		return 0, nil, false, fmt.Errorf("a command substitution inside ${...}: gpuprep does not read it")
	case strings.HasPrefix(s[i:], "${"):
		return i + 2, &braceFrame{dq: f.dq || f.quoted}, false, nil
	case f.quoted:
		return i + 1, nil, c == '"', nil
	case c == '"':
		return i + 1, &braceFrame{quoted: true}, false, nil
	case c == '\'' && f.dq:
		return 0, nil, false, fmt.Errorf("a single quote inside ${...} inside double quotes: dash ends the expansion at the first '}', bash does not")
	case c == '\'':
		k := strings.IndexByte(s[i+1:], '\'')
		if k < 0 {
			return 0, nil, false, fmt.Errorf("unterminated single quote")
		}
		return i + k + 2, nil, false, nil
	}
	return i + 1, nil, c == '}', nil
}

// splitParam splits the inside of ${...} into a name, an operator of
// paramOps (or "") and the word; ok is false where it is not NAME, or NAME
// followed by one of paramOps.
func splitParam(body string) (name, op, word string, ok bool) {
	k := 0
	for k < len(body) && isNameChar(body[k]) {
		k++
	}
	name = body[:k]
	if !isName(name) {
		return "", "", "", false
	}
	if k == len(body) {
		return name, "", "", true
	}
	for _, o := range paramOps {
		if strings.HasPrefix(body[k:], o) {
			return name, o, body[k+len(o):], true
		}
	}
	return "", "", "", false
}

// param evaluates the ${...} at the start of s (s[0] at offset off of the
// file), appending its value to v; the bytes written in the word get the
// segment id. It returns the bytes consumed and, when the value cannot be
// known, why.
func (st *shellState) param(s string, off int, inDQ bool, id int, v *variable) (int, string, error) {
	end, err := braceEnd(s, inDQ)
	if err != nil {
		return 0, "", err
	}
	body := s[2 : end-1]
	name, op, _, ok := splitParam(body)
	if !ok {
		return end, fmt.Sprintf("uses the parameter expansion ${%s}, which gpuprep does not evaluate", body), nil
	}
	if op == "" {
		why, err := st.ref(name, v)
		return end, why, err
	}
	set, empty, why := st.paramState(name)
	assigns := op == ":=" || op == "="
	if why != "" {
		if assigns {
			st.setVar(name, &variable{opaque: fmt.Sprintf("assigned by ${%s} where %s", body, why), assign: v.assign})
		}
		return end, fmt.Sprintf("uses ${%s}, and %s", body, why), nil
	}
	useWord := !set || op[0] == ':' && empty // the - and = forms
	if op == ":+" || op == "+" {
		useWord = !useWord
	}
	switch {
	case useWord:
		why, err := st.paramUseWord(s, off, 2+len(name)+len(op), end-1, inDQ, id, v, name, assigns)
		return end, why, err
	case op == ":+" || op == "+":
		return end, "", nil // nothing
	}
	why, err = st.ref(name, v)
	return end, why, err
}

// paramUseWord appends the expanded word s[from:to] of a ${NAME<op>word}
// to v, assigning it to name where assigns (the := and = forms).
func (st *shellState) paramUseWord(s string, off, from, to int, inDQ bool, id int, v *variable, name string, assigns bool) (string, error) {
	if st.depth >= maxParamDepth {
		return "", fmt.Errorf("${...} nested more than %d deep", maxParamDepth)
	}
	st.depth++
	w := &variable{assign: v.assign}
	err := st.paramWord(s, off, from, to, inDQ, id, w)
	st.depth--
	if err != nil {
		return "", err
	}
	for k := range w.val {
		w.val[k].param = true
	}
	if assigns {
		st.setVar(name, &variable{val: append([]chr(nil), w.val...), opaque: w.opaque, assign: v.assign})
	}
	if err := st.charge(name, len(v.val), len(w.val)); err != nil {
		return "", err
	}
	v.val = append(v.val, w.val...)
	return w.opaque, nil
}

// paramState says whether variable name is set and empty, or why that is
// not known.
func (st *shellState) paramState(name string) (set, empty bool, why string) {
	x := st.vars[name]
	switch {
	case x == nil && isCmdlineVar(name):
		return false, true, "" // grub-mkconfig starts with both unset
	case x == nil:
		return false, false, "$" + name + " is set by no defaults file (its value would come from the environment)"
	case x.opaque != "":
		return false, false, "$" + name + " " + x.opaque
	}
	return true, len(x.val) == 0, ""
}

// paramWord expands the word s[from:to] of a ${NAME<op>word} into w.
func (st *shellState) paramWord(s string, off, from, to int, inDQ bool, id int, w *variable) error {
	lit := func(c byte, p, n int) { w.val = append(w.val, chr{c, id, off + p, off + p + n, false}) }
	opaque := func(why string) {
		w.opaque = cmp.Or(w.opaque, why)
	}
	quoted := false // inside "..." within the braces
	for p := from; p < to; {
		switch c := s[p]; {
		case c == '$':
			k, why, err := st.expand(s[p:], off+p, inDQ || quoted, id, w)
			if err != nil {
				return err
			}
			opaque(why)
			if k == 0 {
				lit('$', p, 1)
				k = 1
			}
			p += k
		case c == '"':
			quoted = !quoted
			p++
		case c == '\\' && quoted:
			opaque("a backslash inside quotes inside ${...}, which bash and dash read differently")
			p += 2
		case c == '\\':
			e, emit, n := paramEscape(s[p:to], inDQ)
			if emit {
				lit(e, p, n)
			}
			p += n
		case c == '\'' && !inDQ && !quoted:
			p = quotedLiteral(s, p, to, lit)
		default:
			if c == '~' {
				opaque("uses a tilde inside ${...}, which gpuprep does not expand")
			}
			lit(c, p, 1)
			p++
		}
	}
	return nil
}

// paramEscape is what a backslash at s[0] (s[1] after it) stands for in a
// ${...}'s word, unquoted there: the next byte (emit, n 2); nothing for a
// line continuation (n 2); where inDQ only $ ` " \ } are escaped, and other
// backslashes stand for themselves (n 1: the next byte is read next).
func paramEscape(s string, inDQ bool) (c byte, emit bool, n int) {
	switch {
	case s[1] == '\n':
		return 0, false, 2
	case !inDQ || strings.IndexByte("$`\"\\}", s[1]) >= 0:
		return s[1], true, 2
	}
	return '\\', true, 1
}

// quotedLiteral adds the bytes of the '...' at s[p] (closed before to, as
// braceEnd found) with lit, and returns the offset after it.
func quotedLiteral(s string, p, to int, lit func(c byte, p, n int)) int {
	k := strings.IndexByte(s[p+1:to], '\'')
	for q := p + 1; q < p+1+k; q++ {
		lit(s[q], q, 1)
	}
	return p + k + 2
}
