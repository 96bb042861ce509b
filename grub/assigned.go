package grub

import "strings"

// A statement gpuprep does not follow (an if, a loop, a command) can still
// set variables in the shell that sources the defaults files:
//
//	X=1 cmd, f() { X=1; }    an assignment word
//	: ${X:=d}, ${X=d}        a default assigned (XCU 2.6.2)
//	X+=d                     bash's append (a command named "X+=d" in dash)
//	: $((X=1)), $((X++))     an arithmetic assignment (XCU 2.6.4)
//	for X in ...; select X   the loop variable
//
// assignedNames lists the names such a statement may set, erring on the
// side of too many: each becomes unknown, never guessed.
func assignedNames(stmt string) []string {
	var out []string
	for i := 0; i < len(stmt); {
		if !isNameStart(stmt[i]) || i > 0 && isNameChar(stmt[i-1]) {
			i++
			continue
		}
		j := i
		for j < len(stmt) && isNameChar(stmt[j]) {
			j++
		}
		name := stmt[i:j]
		if setsName(stmt[:i], stmt[j:]) {
			out = append(out, name)
		}
		i = j
	}
	return out
}

// setsName reports whether a name between before and after is set there.
func setsName(before, after string) bool {
	rest := after
	for _, op := range []string{"<<", ">>", ":", "+", "-", "*", "/", "%", "&", "|", "^"} {
		if strings.HasPrefix(after, op+"=") {
			rest = after[len(op):]
			break
		}
	}
	switch {
	case strings.HasPrefix(rest, "="),
		strings.HasPrefix(after, "++"), strings.HasPrefix(after, "--"),
		strings.HasSuffix(before, "++"), strings.HasSuffix(before, "--"):
		return true
	}
	f := strings.Fields(strings.NewReplacer(";", " ", "&", " ", "|", " ", "(", " ").Replace(before))
	return len(f) > 0 && (f[len(f)-1] == "for" || f[len(f)-1] == "select") && strings.TrimRight(before, " \t") != before
}

// parenBody is s from its "$(" up to the ')' that closes it (all of s
// where none does).
func parenBody(s string) string {
	if k := parenEnd(s); k > 0 {
		return s[:k]
	}
	return s
}

// parenEnd is the length of s's "$(...)" up to and with the ')' that
// closes it, or 0 where none does.
func parenEnd(s string) int {
	depth := 0
	for k := 1; k < len(s); k++ {
		switch s[k] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return k + 1
			}
		}
	}
	return 0
}
