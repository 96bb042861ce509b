// Package sanitize makes strings that come from hosts (their reports, their
// inventory entries, what they printed) safe for the places gpuprep writes
// them: a terminal, Markdown, a YAML comment. Each place has one function,
// used wherever a host string goes there.
package sanitize

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Terminal is s as one line a terminal shows as it is: every control a
// terminal (or a Unicode text renderer) acts on is shown escaped instead —
// C0 controls (ESC, CR, NUL, …; newline and tab too: one line, table
// columns kept) and DEL as \xHH (\n, \r, \t), C1 controls (U+0080–U+009F,
// among them the 8-bit CSI and OSC) as \uHHHH, the Unicode bidi overrides,
// embeddings, isolates and marks and the line and paragraph separators as
// \uHHHH, and bytes that are not UTF-8 as \xHH. Backslashes are left as
// they are: the escaped form is for reading, not for parsing back.
func Terminal(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	return escape(s, unsafeRune)
}

// escape is s with each rune for which unsafe holds (and each byte that is
// not UTF-8) shown escaped: \n, \r, \t, \xHH for the other C0 controls,
// DEL and such bytes, \uHHHH (\UHHHHHHHH past the BMP) for the rest.
func escape(s string, unsafe func(rune) bool) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafe(r) || r == utf8.RuneError:
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports whether r is shown escaped; utf8.RuneError stands for
// a byte that is not UTF-8 as well (ContainsFunc passes it for one).
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r < 0xa0: // C0, DEL, C1 (NEL among them)
		return true
	case r == utf8.RuneError:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // Arabic letter mark, LRM, RLM
		return true
	case r >= 0x202a && r <= 0x202e: // bidi embeddings and overrides
		return true
	case r >= 0x2066 && r <= 0x2069: // bidi isolates
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

// Lines is Terminal on each line of s, its newlines kept: for a message of
// several lines (an error), each shown as it is.
func Lines(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Terminal(l)
	}
	return strings.Join(lines, "\n")
}
