package grub

import (
	"fmt"
	"strings"
)

// A GRUB_CMDLINE value that holds a newline — a quoted value continued on
// the next physical line without a backslash:
//
//	GRUB_CMDLINE_LINUX="console=tty0
//	    console=ttyS0,115200n8"
//
// — is read by the shell with the newline in it. grub-mkconfig pastes the
// value into a here-document (util/grub.d/10_linux.in, linux_entry:
// "linux ${rel_dirname}/${basename} root=${linux_root_device_thisversion}
// ro ${args}", args being "${GRUB_CMDLINE_LINUX}
// ${GRUB_CMDLINE_LINUX_DEFAULT}"), so grub.cfg gets the newline too, and
// GRUB's script lexer ends the linux command at it
// (grub-core/script/yylex.l: "\n" is GRUB_PARSER_TOKEN_NEWLINE). The kernel
// gets what comes before the first newline; each later line is run as a
// GRUB command of its own, which fails. An argument appended there (at the
// end of the value, or to GRUB_CMDLINE_LINUX_DEFAULT, which comes after it)
// would never reach the kernel, and the words after the newline are not in
// effect although the file lists them.
//
// gpuprep neither edits nor judges such a value: joining the lines would
// also give the kernel, at the next boot, arguments it has never had (a
// net.ifnames=0 there renames the network interfaces), which is the
// admin's call. A backslash before the newline (inside double quotes or
// unquoted) is a line continuation the shell removes: that shape has no
// newline in the value and is fine.

// newlineErr is a ParseError naming where the value of variable name has
// its first newline, or nil when it has none; the linux line has the
// arguments ahead before the value.
func newlineErr(st *shellState, name string, v *variable, ahead []string) error {
	if v == nil {
		return nil
	}
	for k, c := range v.val {
		if c.c != '\n' {
			continue
		}
		sg := st.segs[c.seg]
		f := st.files[sg.file]
		before := strings.Join(append(ahead, Words(chrString(v.val[:k]))...), " ")
		what := name + "'s value goes on past the end of this line (a newline inside the quotes)"
		if from := st.assigns[sg.assign].name; from != name {
			what = fmt.Sprintf("%s's value holds a newline, copied from %s, whose value goes on past the end of this line", name, from)
		}
		return &ParseError{f.Path, lineAt(f.Data, c.s), fmt.Sprintf(
			"%s. grub-mkconfig copies the newline into grub.cfg, where GRUB ends the linux command at it: the kernel gets the arguments before it (%q) and no argument after it, not even one gpuprep would add. Put the value on one line (knowing that the kernel then gets the arguments of the following lines too) or end the line with a backslash inside the quotes, then run gpuprep again",
			what, before)}
	}
	return nil
}

// cmdlineNewlineErr is newlineErr for both GRUB_CMDLINE variables.
func cmdlineNewlineErr(st *shellState) error {
	var ahead []string // GRUB_CMDLINE_LINUX comes first on the linux line
	for _, n := range cmdlineVars {
		v := st.vars[n]
		if err := newlineErr(st, n, v, ahead); err != nil {
			return err
		}
		if v != nil {
			ahead = append(ahead, Words(chrString(v.val))...)
		}
	}
	return nil
}
