package fleet

import (
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// pyLiteral is the value Ansible's INI inventory parser makes of a
// variable's text (InventoryModule._parse_value): Python's ast.literal_eval
// where it succeeds, the text as written where it does not. Scalars are
// rendered as the variable reads in a template: a string literal (quotes,
// escapes, prefixes, adjacent literals joined) as its text, an integer in
// any of Python's forms (0x10, 0o17, 0b1, 1_000, with one sign) in decimal,
// a float as Python's repr (1e3 is 1000.0), None as "", True and False as
// such. A list, tuple, dict or set stays as written (gpuprep's variables
// are strings), and so does a string with a \N{name} escape.
func pyLiteral(v string) string {
	s := strings.TrimRight(strings.TrimLeft(v, " \t"), " \t\r\n")
	if s == "" {
		return v
	}
	if str, ok := pyStrings(s); ok {
		return str
	}
	// A # starts a comment (Python's tokenizer): 5 # five is 5.
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = strings.TrimRight(s[:i], " \t")
	}
	if r, ok := pyScalar(s); ok {
		return r
	}
	return v
}

// pyScalar evaluates None, True, False, a number or a string literal, in
// any number of parentheses ((5) is 5; (5,) is a tuple, not read here).
func pyScalar(s string) (string, bool) {
	switch s {
	case "":
		return "", false
	case "None":
		return "", true
	case "True", "False":
		return s, true
	}
	if n, ok := pyNumber(s); ok {
		return n, true
	}
	if len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' {
		inner := strings.Trim(s[1:len(s)-1], " \t")
		if str, ok := pyStrings(inner); ok {
			return str, true
		}
		return pyScalar(inner)
	}
	return "", false
}

var (
	pyDigits   = `[0-9](?:_?[0-9])*`
	pyIntRe    = lazyRegexp(`^(?:0(?:_?0)*|[1-9](?:_?[0-9])*|0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)$`)
	pyFloatRe  = lazyRegexp(`^(?:(?:(?:` + pyDigits + `)?\.` + pyDigits + `|` + pyDigits + `\.)(?:[eE][+-]?` + pyDigits + `)?|` + pyDigits + `[eE][+-]?` + pyDigits + `)$`)
	pyPrefixRe = lazyRegexp(`^(?i:rb|br|r|u|b)?['"]`)
)

// pyNumber evaluates a Python int or float literal with at most one sign.
func pyNumber(s string) (string, bool) {
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = strings.TrimLeft(s[1:], " \t")
	}
	switch {
	case pyIntRe().MatchString(s):
		return pyIntLiteral(s, neg)
	case pyFloatRe().MatchString(s):
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
		if err != nil && !math.IsInf(f, 0) {
			return "", false
		}
		if neg {
			f = -f
		}
		return pyFloatRepr(f), true
	}
	return "", false
}

// pyFloatRepr is Python's repr of a float: the shortest digits that read
// back, fixed-point when the decimal point falls in (-4, 16], else
// d.ddde±XX.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde+XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	decpt := x + 1
	if -4 < decpt && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		}
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if x < 0 {
		es, x = "-", -x
	}
	if x < 10 {
		return sign + m + "e" + es + "0" + strconv.Itoa(x)
	}
	return sign + m + "e" + es + strconv.Itoa(x)
}

// pyStrings evaluates one or more adjacent Python string literals
// ('a' "b" r'c\d' b'e' ”'f”') joined, as literal_eval does; bytes read as
// UTF-8 text (Ansible's to_text). An f-string, a mix of bytes and text, or
// anything after the literals is no literal.
func pyStrings(s string) (string, bool) {
	var out strings.Builder
	kind := "" // "str" or "bytes" once a literal is read
	for s != "" {
		m := pyPrefixRe().FindString(s)
		if m == "" {
			return "", false
		}
		prefix := strings.ToLower(m[:len(m)-1])
		k := "str"
		if strings.Contains(prefix, "b") {
			k = "bytes"
		}
		if kind != "" && kind != k {
			return "", false
		}
		kind = k
		val, rest, ok := pyStringBody(s[len(prefix):], strings.Contains(prefix, "r"), k == "bytes")
		if !ok {
			return "", false
		}
		out.WriteString(val)
		s = strings.TrimLeft(rest, " \t")
		if strings.HasPrefix(s, "#") { // a comment
			break
		}
	}
	if kind == "" || kind == "bytes" && !utf8.ValidString(out.String()) {
		return "", false
	}
	return out.String(), true
}

// pyIntLiteral evaluates the Python int literal s (pyIntRe's), negated when neg.
func pyIntLiteral(s string, neg bool) (string, bool) {
	t := strings.ReplaceAll(s, "_", "")
	base := 10
	if len(t) > 1 && t[0] == '0' {
		switch t[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 10 {
			t = t[2:]
		}
	}
	n, ok := new(big.Int).SetString(t, base)
	if !ok {
		return "", false
	}
	if neg {
		n.Neg(n)
	}
	return n.String(), true
}

// pyStringBody reads one quoted literal from s (starting at its quote).
func pyStringBody(s string, raw, bytes bool) (val, rest string, ok bool) {
	q := s[:1]
	if strings.HasPrefix(s, q+q+q) {
		q = q + q + q
	}
	s = s[len(q):]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.HasPrefix(s[i:], q) {
			return b.String(), s[i+len(q):], true
		}
		c := s[i]
		if c == '\n' && len(q) == 1 {
			return "", "", false
		}
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		if raw { // the backslash stays, and keeps the next character from ending the literal
			b.WriteByte(c)
			b.WriteByte(s[i+1])
			i++
			continue
		}
		var ok bool
		if i, ok = pyEscape(&b, s, i+1, bytes); !ok {
			return "", "", false
		}
	}
	return "", "", false
}

// pyControlEscapes are the one-character escapes of a Python literal.
var pyControlEscapes = map[byte]byte{'\\': '\\', '\'': '\'', '"': '"', 'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}

// pyEscape writes to b the escape whose letter is s[i] (after a
// backslash), returning the index of its last character; ok false for one
// not read here (\N{name}) or malformed.
func pyEscape(b *strings.Builder, s string, i int, bytes bool) (last int, ok bool) {
	e := s[i]
	if c, ok := pyControlEscapes[e]; ok {
		b.WriteByte(c)
		return i, true
	}
	switch e {
	case '\n': // a line continuation
	case '0', '1', '2', '3', '4', '5', '6', '7':
		return pyOctalEscape(b, s, i, bytes), true
	case 'x', 'u', 'U':
		return pyHexEscape(b, s, i, bytes)
	case 'N':
		return i, false // \N{name}: not read here (the text stays as written)
	default:
		b.WriteByte('\\')
		b.WriteByte(e)
	}
	return i, true
}

// pyOctalEscape writes the \ooo escape (up to 3 digits) starting at s[i].
func pyOctalEscape(b *strings.Builder, s string, i int, bytes bool) int {
	j := i
	for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
		j++
	}
	n, _ := strconv.ParseUint(s[i:j], 8, 32)
	pyWriteCode(b, n, bytes)
	return j - 1
}

// pyHexEscape writes the \xhh, \uhhhh or \Uhhhhhhhh escape whose letter is
// s[i]; bytes keep \u and \U as written.
func pyHexEscape(b *strings.Builder, s string, i int, bytes bool) (int, bool) {
	e := s[i]
	width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
	if e != 'x' && bytes { // no \u in bytes: kept as written
		b.WriteByte('\\')
		b.WriteByte(e)
		return i, true
	}
	if i+1+width > len(s) {
		return i, false
	}
	n, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32)
	if err != nil || n > utf8.MaxRune {
		return i, false
	}
	pyWriteCode(b, n, bytes)
	return i + width, true
}

// pyWriteCode writes n as a byte (bytes) or as a rune.
func pyWriteCode(b *strings.Builder, n uint64, bytes bool) {
	if bytes {
		b.WriteByte(byte(n))
	} else {
		b.WriteRune(rune(n))
	}
}

// lazyRegexp compiles expr on first use: package-level regexps are
// compiled when any gpuprep command starts, and the fleet's inventory
// parsers are not on the path of the check a fleet run starts on every
// host.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
