// Package grub reads and edits the kernel arguments a bootloader will pass:
// /etc/default/grub and /etc/default/grub.d/*.cfg (sourced by the shell, in
// that order), BLS entries and /etc/kernel/cmdline.
package grub

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
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

// Configured returns the kernel command line the bootloader will use on the
// next boot of kernel kver: a BLS entry for that kernel where the host boots
// through BLS (RHEL, Fedora), else /etc/default/grub (+ grub.d), else
// /etc/kernel/cmdline. It returns nil when none of them is there.
func Configured(root *host.Root, kver string) (*Source, error) {
	if src, err := blsEntry(root, kver); src != nil || err != nil {
		return src, err
	}
	// The same reading as the editor's (checked against bash), so that
	// what check reports configured is what grub would edit.
	files, err := ReadFiles(root)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		c, st, err := evaluate(files)
		if err != nil {
			return nil, err
		}
		file := files[0].Path // /etc/default/grub, or the first drop-in where it is absent
		for _, n := range []string{cmdlineVars[1], cmdlineVars[0]} {
			if v := st.vars[n]; v != nil && v.assign >= 0 && st.assigns[v.assign].file > 0 {
				file = files[0].Path + " + " + files[st.assigns[v.assign].file].Path
				break
			}
		}
		src := &Source{Kind: "grub", File: file, Cmdline: c.String()}
		for _, n := range cmdlineVars {
			v := st.vars[n]
			if v == nil {
				continue
			}
			val := chrString(v.val)
			for _, w := range splitWords(val) {
				src.args = append(src.args, kargs.ParseOne(unquoteWord(val[w[0]:w[1]])))
				ch := v.val[w[0]]
				sg := st.segs[ch.seg]
				src.at = append(src.at, fmt.Sprintf("%s:%d", files[sg.file].Path, lineAt(files[sg.file].Data, ch.s)))
			}
		}
		return src, nil
	}
	if b, err := kargs.ReadString(root, KernelCmdlineFile); err == nil {
		src := &Source{Kind: "kernel-cmdline", File: KernelCmdlineFile, Cmdline: b}
		src.args, src.at = plainLocated(KernelCmdlineFile, b, 1)
		return src, nil
	}
	return nil, nil
}

// blsEntry reads the options of the BLS entry that boots kver.
func blsEntry(root *host.Root, kver string) (*Source, error) {
	entries, _ := root.Glob("/boot/loader/entries/*.conf")
	for _, e := range entries {
		b, err := kargs.ReadFile(root, e)
		if err != nil {
			continue
		}
		var linux, options string
		optLine := 0
		for i, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "linux":
				linux = f[1]
			case "options":
				options = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "options"))
				optLine = i + 1
			}
		}
		if kver != "" && path.Base(linux) != "vmlinuz-"+kver {
			continue
		}
		if strings.Contains(options, "$kernelopts") {
			options = strings.ReplaceAll(options, "$kernelopts", grubenvKernelopts(root))
		}
		src := &Source{Kind: "bls", File: e, Cmdline: options}
		src.args, src.at = plainLocated(e, options, optLine)
		return src, nil
	}
	return nil, nil
}
