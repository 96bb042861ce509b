// Package sanitize makes strings that come from hosts (their reports, their
// inventory entries, what they printed) safe for the places gpuprep writes
// them: a terminal, Markdown, a YAML comment. Each place has one function,
// used wherever a host string goes there.
package sanitize

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Terminal is s as one line a terminal shows as it is: every control a
// terminal (or a Unicode text renderer) acts on is shown escaped instead —
// C0 controls (ESC, CR, NUL, …; newline and tab too: one line, table
// columns kept) and DEL as \xHH (\n, \r, \t), C1 controls (U+0080–U+009F,
// among them the 8-bit CSI and OSC) as \uHHHH, the Unicode bidi overrides,
// embeddings, isolates and marks, the other invisible characters (see
// invisible: the zero-width ones, U+FEFF, the soft hyphen, …) and the line
// and paragraph separators as \uHHHH (\UHHHHHHHH past the BMP), and bytes
// that are not UTF-8 as \xHH. Backslashes are left as
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
	case r < 0xad: // printable ASCII and Latin-1
		return false
	case r == utf8.RuneError:
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return invisible(r)
}

// invisible reports whether r is a format character or a filler that a
// terminal shows as nothing (or that acts on the text around it), so that
// two strings that differ look the same: "gpu-1" and "gpu-1\u200b", a
// verdict with a soft hyphen in it. Every format character (Unicode's Cf:
// the bidi marks, embeddings, overrides and isolates, the zero-width
// space, joiners and non-joiner, the word joiner and the invisible
// operators U+2060–U+2064, U+FEFF, the soft hyphen, the tag characters
// that spell hidden ASCII) and the Hangul fillers, letters drawn blank.
func invisible(r rune) bool {
	switch r {
	case 0x115f, 0x1160, 0x3164, 0xffa0: // Hangul fillers
		return true
	}
	return unicode.Is(unicode.Cf, r)
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
