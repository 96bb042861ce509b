package sanitize

import "html"

// HTML is s for the text of raw HTML in Markdown (a <summary>, where
// Markdown is not parsed): Terminal's form, HTML-escaped.
func HTML(s string) string {
	return html.EscapeString(Terminal(s))
}
