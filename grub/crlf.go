package grub

import "bytes"

// Files saved with CR LF line endings (written on Windows, or by an editor
// set to DOS line endings) end each line with "\r\n". The shell that sources
// them (grub-mkconfig is a /bin/sh script: dash on Debian and Ubuntu, bash
// elsewhere) ends a line at the LF only, so the CR is one more byte of the
// line, unquoted: GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"<CR> sets
// "quiet splash<CR>". grub-mkconfig pastes that into the linux line
// (util/grub.d/10_linux.in: "linux ${rel_dirname}/${basename}
// root=${linux_root_device_thisversion} ro ${args}"), GRUB's lexer keeps
// the CR in the word (grub-core/script/yylex.l: BLANK is [ \t], CHAR all
// but [{}|&$;<> \t\n'"\\]), and the kernel takes it for a blank
// (lib/cmdline.c, next_arg: "if (isspace(args[i]) && !in_quote) break").
// So a CR separates arguments (isArgBlank), and text appended to a value
// goes before a CR that ends its line: inside the quotes, the CR after the
// closing quote, as the file's other lines have it.

// isArgBlank reports whether the kernel ends an argument at c: a blank, a
// tab, a newline or a CR.
func isArgBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// valueEnd is where text appended to the value word text[a.wordStart:a.wordEnd]
// goes: before the CR of a CR LF line end (the word's last byte, in an
// unquoted segment, with a LF or the end of the file after it), else at the
// word's end.
func valueEnd(text string, a *assignment, segs []segment) int {
	e := a.wordEnd
	if e > a.wordStart && text[e-1] == '\r' && (e == len(text) || text[e] == '\n') &&
		len(segs) > 0 && segs[len(segs)-1].quote == 0 {
		return e - 1
	}
	return e
}

// lineEnding is the file's line ending: "\r\n" where its first line ends so,
// else "\n".
func lineEnding(data []byte) string {
	if i := bytes.IndexByte(data, '\n'); i > 0 && data[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}
