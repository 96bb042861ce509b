package grub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Where the newline of a GRUB_CMDLINE value is written is what the refusal
// names: in a drop-in, in the variable a $VAR reference copies it from, in
// single quotes. A backslash-newline (removed by the shell) is no newline;
// bash is the oracle for which values hold one.
func TestNewlineRefusalNamesWhereItIsWritten(t *testing.T) {
	needBash(t)
	const dropin = "/etc/default/grub.d/50-serial.cfg"
	for name, c := range map[string]struct {
		files      []File
		file       string
		line       int
		hasNewline bool
		says       string
	}{
		"drop-in": {[]File{
			{DefaultsFile, []byte("GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n")},
			{dropin, []byte("# serial console\nGRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT console=ttyS0\n console=tty0\"\n")},
		}, dropin, 2, true, "GRUB_CMDLINE_LINUX_DEFAULT's value goes on past the end of this line"},
		"from-a-variable": {[]File{
			{DefaultsFile, []byte("A=1\nSERIAL='console=ttyS0\nconsole=tty0'\nGRUB_CMDLINE_LINUX=\"ro $SERIAL\"\n")},
		}, DefaultsFile, 2, true, "GRUB_CMDLINE_LINUX's value holds a newline, copied from SERIAL, whose value goes on past the end of this line"},
		"default-after-linux": {[]File{
			{DefaultsFile, []byte("GRUB_CMDLINE_LINUX=\"ro\"\nGRUB_CMDLINE_LINUX_DEFAULT='quiet\n\nsplash'\n")},
		}, DefaultsFile, 2, true, `GRUB_CMDLINE_LINUX_DEFAULT's value goes on past the end of this line (a newline inside the quotes). grub-mkconfig copies the newline into grub.cfg, where GRUB ends the linux command at it: the kernel gets the arguments before it ("ro quiet")`},
		"backslash-continued": {[]File{
			{DefaultsFile, []byte("GRUB_CMDLINE_LINUX=\"ro \\\nquiet\"\nGRUB_CMDLINE_LINUX_DEFAULT=splash\\\n\n")},
		}, "", 0, false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := bashSource(t, c.files)
			require.NoError(t, err)
			require.Equal(t, c.hasNewline, linuxLine(want) != firstLineOf(linuxLine(want)), "bash: %q", want)
			ed, err := EditFiles(c.files, intelMode)
			_, cerr := Evaluate(c.files)
			if !c.hasNewline {
				require.NoError(t, err)
				require.NoError(t, cerr)
				checkEdit(t, c.files, intelMode, ed)
				return
			}
			for _, err := range []error{err, cerr} {
				var pe *ParseError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, c.file, pe.File)
				require.Equal(t, c.line, pe.Line)
				require.Contains(t, pe.Msg, c.says)
			}
		})
	}
}

func firstLineOf(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
