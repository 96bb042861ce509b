// Package grub reads and edits the kernel arguments a bootloader will pass:
// /etc/default/grub and /etc/default/grub.d/*.cfg (sourced by the shell, in
// that order), BLS entries and /etc/kernel/cmdline.
package grub

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
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
	if files != nil {
		c, st, err := evaluate(files)
		if err != nil {
			return nil, err
		}
		file := DefaultsFile
		for _, n := range []string{cmdlineVars[1], cmdlineVars[0]} {
			if v := st.vars[n]; v != nil && v.assign >= 0 && st.assigns[v.assign].file > 0 {
				file = DefaultsFile + " + " + files[st.assigns[v.assign].file].Path
				break
			}
		}
		return &Source{Kind: "grub", File: file, Cmdline: c.String()}, nil
	}
	if b, err := root.ReadString("/etc/kernel/cmdline"); err == nil {
		return &Source{Kind: "kernel-cmdline", File: "/etc/kernel/cmdline", Cmdline: b}, nil
	}
	return nil, nil
}

// blsEntry reads the options of the BLS entry that boots kver.
func blsEntry(root *host.Root, kver string) (*Source, error) {
	entries, _ := root.Glob("/boot/loader/entries/*.conf")
	for _, e := range entries {
		b, err := root.ReadFile(e)
		if err != nil {
			continue
		}
		var linux, options string
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "linux":
				linux = f[1]
			case "options":
				options = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "options"))
			}
		}
		if kver != "" && path.Base(linux) != "vmlinuz-"+kver {
			continue
		}
		if strings.Contains(options, "$kernelopts") {
			env, _ := root.ReadFile("/boot/grub2/grubenv")
			ko := ""
			for _, l := range strings.Split(string(env), "\n") {
				if strings.HasPrefix(l, "kernelopts=") {
					ko = strings.TrimPrefix(l, "kernelopts=")
				}
			}
			options = strings.ReplaceAll(options, "$kernelopts", ko)
		}
		return &Source{Kind: "bls", File: e, Cmdline: options}, nil
	}
	return nil, nil
}
