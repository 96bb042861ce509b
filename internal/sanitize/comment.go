package sanitize

import "strings"

// Comment is s as the text of one YAML comment line: Terminal's form (no
// line break of any kind — newline, CR, NEL, U+2028, U+2029 — can end the
// comment and start YAML of its own; no control character), trimmed.
func Comment(s string) string {
	return Terminal(strings.TrimSpace(s))
}
