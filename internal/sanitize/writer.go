package sanitize

import (
	"io"
	"strings"
)

// Block is s as lines a terminal shows as they are: Terminal's form, but
// for the newline and the tab, kept (a diff of a host's file stays
// readable: its lines and its indentation).
func Block(s string) string {
	if !strings.ContainsFunc(s, unsafeInBlock) {
		return s
	}
	return escape(s, unsafeInBlock)
}

func unsafeInBlock(r rune) bool { return r != '\n' && r != '\t' && unsafeRune(r) }

// writer passes what is written to it through Block.
type writer struct{ w io.Writer }

// NewWriter is w with every write shown as Block shows it: the one place a
// text renderer (a command's text output, a diff, a note on stderr) writes
// host strings, so that none acts on the terminal. Each write is escaped
// on its own: a character split across two writes is shown as its bytes.
// A newline in a host string is kept: one that could fake a line of its
// own goes through Terminal where it is formatted.
func NewWriter(w io.Writer) io.Writer {
	if _, ok := w.(writer); ok {
		return w
	}
	return writer{w}
}

func (x writer) Write(p []byte) (int, error) {
	s := string(p)
	if !strings.ContainsFunc(s, unsafeInBlock) {
		return x.w.Write(p)
	}
	if _, err := io.WriteString(x.w, escape(s, unsafeInBlock)); err != nil {
		return 0, err
	}
	return len(p), nil
}
