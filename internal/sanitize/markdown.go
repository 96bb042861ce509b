package sanitize

import "strings"

// mdEscaper escapes what GitHub-flavoured Markdown gives a meaning inline:
// backslash escapes for emphasis, code, links and images (their brackets:
// parentheses and "!" mean nothing without them), tables, strikethrough,
// math, headings; entities for <, > and &, so that no raw HTML (nor an
// entity of one's own) passes.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"|", `\|`, "~", `\~`, "$", `\$`, "#", `\#`,
	"<", "&lt;", ">", "&gt;", "&", "&amp;",
)

// Markdown is s as Markdown text on one line, shown as it is wherever it
// is placed (a paragraph, a list item, a table cell, emphasis): Terminal's
// form (one line: a field cannot start a block of its own), trimmed, its
// Markdown metacharacters escaped, and a start that would open a block
// (a list item "- ", "+ ", "1. ", a setext "=") escaped too.
func Markdown(s string) string {
	s = mdEscaper.Replace(Terminal(strings.TrimSpace(s)))
	return escapeBlockStart(s)
}

// escapeBlockStart backslash-escapes the character with which s would
// open a list ("- ", "+ ", "12. ", "12) "), a thematic break ("---") or a
// setext underline ("===") at the start of a line: "10.0.0.1" is left alone.
func escapeBlockStart(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '-', '+', '=':
		return `\` + s
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 && i < len(s) && (s[i] == '.' || s[i] == ')') && (i+1 == len(s) || s[i+1] == ' ') {
		return s[:i] + `\` + s[i:]
	}
	return s
}

// MarkdownCode is s for the inside of a Markdown code span: Terminal's form
// (one line), backticks (which would end the span) as "'".
func MarkdownCode(s string) string {
	return strings.ReplaceAll(Terminal(s), "`", "'")
}
