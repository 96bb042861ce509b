// Package grub reads and edits the kernel arguments a bootloader will pass:
// /etc/default/grub and /etc/default/grub.d/*.cfg (sourced by the shell, in
// that order), BLS entries and /etc/kernel/cmdline.
package grub

import (
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/kargs"
)

// ParseError names the file and line of text gpuprep will not guess about.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// DefaultsFile is GRUB's main defaults file.
const DefaultsFile = "/etc/default/grub"

func isNameChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Source says where the kernel arguments for the next boot come from.
type Source struct {
	Kind    string // "grub", "bls", "kernel-cmdline"
	File    string
	Cmdline string
	// args are the arguments as the editor sees them, and at where each
	// is written ("file:line"; "" when unknown), for Locate.
	args []kargs.Param
	at   []string
}

// Locate returns where the last argument of the configuration equal to p
// (the same key, "-" and "_" alike, and value) is written, as "file:line";
// the configuration's file when it cannot tell.
func (s *Source) Locate(p kargs.Param) string {
	for i := len(s.args) - 1; i >= 0; i-- {
		a := s.args[i]
		if kargs.Norm(a.Key) == kargs.Norm(p.Key) && a.Value == p.Value && a.HasValue == p.HasValue && s.at[i] != "" {
			return s.at[i]
		}
	}
	return strings.Fields(s.File)[0]
}

// lineAt is the 1-based line of offset off in data.
func lineAt(data []byte, off int) int {
	if off > len(data) {
		off = len(data)
	}
	return 1 + strings.Count(string(data[:off]), "\n")
}

// plainLocated reads the arguments of text (a BLS options line's value, or
// /etc/kernel/cmdline) starting at line, with where each is written.
func plainLocated(file, text string, line int) ([]kargs.Param, []string) {
	var args []kargs.Param
	var at []string
	for _, w := range splitWords(text) {
		args = append(args, kargs.ParseOne(unquoteWord(text[w[0]:w[1]])))
		at = append(at, fmt.Sprintf("%s:%d", file, line+strings.Count(text[:w[0]], "\n")))
	}
	return args, at
}
