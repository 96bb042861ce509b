package grub

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// paramCase is defaults files (/etc/default/grub, then grub.d drop-ins) and
// what gpuprep must make of them: read as bash and dash read them (line
// 0), or refused with a ParseError naming file:line.
type paramCase struct {
	name  string
	files []string
	file  string // the refusal's file ("" for /etc/default/grub)
	line  int
	msg   string // in the refusal
	// split: bash and dash read the files differently (the refusal's
	// reason)
	split bool
}

// The oracles are bash and dash (grub-mkconfig is a /bin/sh script: dash on
// Debian and Ubuntu, bash on RHEL, Fedora, Arch, SUSE), as XCU 2.6.2
// "Parameter Expansion" specifies the forms.
var paramCases = []paramCase{
	{name: "colon-dash unset", files: []string{`GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:-quiet splash}"`}},
	{name: "colon-dash set", files: []string{"GRUB_CMDLINE_LINUX_DEFAULT=quiet\nGRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT:-splash} iommu=pt\""}},
	{name: "colon-dash empty", files: []string{"X=\nGRUB_CMDLINE_LINUX=${X:-a b}"}},
	{name: "dash empty", files: []string{"X=\nGRUB_CMDLINE_LINUX=\"[${X-a b}]\""}},
	{name: "dash unset cmdline", files: []string{"GRUB_CMDLINE_LINUX=${GRUB_CMDLINE_LINUX_DEFAULT-d}"}},
	{name: "colon-equals assigns", files: []string{"X=\nA=${X:=intel_iommu=on}\nGRUB_CMDLINE_LINUX=\"$X $A\""}},
	{name: "equals keeps empty", files: []string{"X=\nA=${X=intel_iommu=on}\nGRUB_CMDLINE_LINUX=\"[$X][$A]\""}},
	{name: "equals assigns cmdline", files: []string{"A=\"${GRUB_CMDLINE_LINUX=quiet}\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"$A x\""}},
	{name: "colon-plus", files: []string{"X=\nY=y\nGRUB_CMDLINE_LINUX=\"[${X:+a}][${Y:+b}][${X+c}][${GRUB_CMDLINE_LINUX_DEFAULT+d}]\""}},
	{name: "drop-in appends", files: []string{`GRUB_CMDLINE_LINUX_DEFAULT="quiet"`, `GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT }iommu=pt"`}},
	{name: "drop-in appends to empty", files: []string{`GRUB_CMDLINE_LINUX_DEFAULT=""`, `GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT }iommu=pt"`}},
	{name: "nested", files: []string{"Y=\nGRUB_CMDLINE_LINUX=${GRUB_CMDLINE_LINUX:-${Y:-z w}}"}},
	{name: "nested quotes unquoted", files: []string{`GRUB_CMDLINE_LINUX=${GRUB_CMDLINE_LINUX:-"a b"'c d'}`}},
	{name: "nested quotes in double quotes", files: []string{`GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:-a"}"b}"`}},
	{name: "escapes", files: []string{`GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:-a\}b\$c\d}" GRUB_CMDLINE_LINUX_DEFAULT=${GRUB_CMDLINE_LINUX_DEFAULT:-x\ y\}}`}},
	{name: "unchosen word not expanded", files: []string{"X=x\nGRUB_CMDLINE_LINUX=${X:-$UNKNOWN}"}},
	{name: "unchosen assignment not made", files: []string{"X=\nA=${X:+${Y:=y}}\nB=${X-${GRUB_CMDLINE_LINUX:=z}}\nGRUB_CMDLINE_LINUX_DEFAULT=\"[$A][$B][${GRUB_CMDLINE_LINUX+set}]\""}},
	{name: "chosen word assigns", files: []string{"X=x\nA=${X:+${GRUB_CMDLINE_LINUX:=y}}\nGRUB_CMDLINE_LINUX_DEFAULT=\"[$A][$GRUB_CMDLINE_LINUX]\""}},

	// refused
	{name: "environment", files: []string{"GRUB_CMDLINE_LINUX=${FOO:-quiet}"}, line: 1, msg: "$FOO is set by no defaults file"},
	{name: "environment plus", files: []string{"\nGRUB_CMDLINE_LINUX=\"${FOO:+a}\""}, line: 2, msg: "environment"},
	{name: "prefix removal", files: []string{"X=ab\nGRUB_CMDLINE_LINUX=${X#a}"}, line: 2, msg: "does not evaluate"},
	{name: "length", files: []string{"X=ab\nGRUB_CMDLINE_LINUX=${#X}"}, line: 2, msg: "does not evaluate"},
	{name: "substring", files: []string{"X=ab\nGRUB_CMDLINE_LINUX=${X:1}"}, line: 2, msg: "does not evaluate"},
	{name: "error form", files: []string{"X=ab\nGRUB_CMDLINE_LINUX=${X:?}"}, line: 2, msg: "does not evaluate"},
	{name: "tilde", files: []string{"GRUB_CMDLINE_LINUX=${GRUB_CMDLINE_LINUX:-~}"}, line: 1, msg: "tilde"},
	{name: "command substitution", files: []string{"GRUB_CMDLINE_LINUX=${GRUB_CMDLINE_LINUX:-$(echo a)}"}, line: 1, msg: "command substitution"},
	{name: "single quote in double quotes", files: []string{`GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:-'}'}"`}, line: 1, msg: "single quote", split: true},
	{name: "backslash in quotes in double quotes", files: []string{`GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:-"\a"}"`}, line: 1, msg: "backslash", split: true},
	{name: "backslash in quotes", files: []string{`GRUB_CMDLINE_LINUX=${GRUB_CMDLINE_LINUX:-"\}"}`}, line: 1, msg: "backslash", split: true},
	{name: "assigned by a null command", files: []string{"X=\n: ${X:=iommu=pt}\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "/etc/default/grub:2"},
	{name: "assigned by a prefix", files: []string{"X=\nA=${X:=iommu=pt} true\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "/etc/default/grub:2"},
	{name: "assigned in arithmetic", files: []string{"X=1\n: $((X=5))\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "/etc/default/grub:2"},
	{name: "incremented", files: []string{"X=1\n: $((X++))\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "/etc/default/grub:2"},
	{name: "arithmetic in a value", files: []string{"X=1\nA=$((X+=4))\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "arithmetic"},
	{name: "loop variable", files: []string{"X=quiet\nfor X in iommu=pt; do :; done\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "/etc/default/grub:2"},
	{name: "here-document", files: []string{"X=quiet\n: <<EOF\nGRUB_CMDLINE_LINUX=bad\nEOF"}, line: 2, msg: "here-document"},
	{name: "drop-in refers to the environment", files: []string{`GRUB_CMDLINE_LINUX_DEFAULT="quiet"`, `GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} ${EXTRA:-iommu=pt}"`}, file: "/etc/default/grub.d/b.cfg", line: 1, msg: "$EXTRA"},
}

// bashOnly are read by bash only (the append is a command named "X+=2" in
// dash): refused, as which shell sources the files is the node's.
var bashOnly = []paramCase{
	{name: "append", files: []string{"X=1\nX+=2\nGRUB_CMDLINE_LINUX=$X"}, line: 3, msg: "/etc/default/grub:2"},
}

func paramFiles(c paramCase) []File {
	var files []File
	for i, d := range c.files {
		p := DefaultsFile
		if i > 0 {
			p = "/etc/default/grub.d/" + string(rune('a'+i)) + ".cfg"
		}
		files = append(files, File{p, []byte(d + "\n")})
	}
	return files
}

func TestParamExpansionOracle(t *testing.T) {
	needBash(t)
	if _, err := exec.LookPath("dash"); err != nil {
		t.Skip("dash not installed")
	}
	for _, c := range append(paramCases, bashOnly...) {
		t.Run(c.name, func(t *testing.T) {
			files := paramFiles(c)
			got, err := Evaluate(files)
			b, berr := bashSource(t, files)
			d, derr := dashSource(t, files)
			if c.line == 0 {
				require.NoError(t, err)
				require.NoError(t, berr)
				require.NoError(t, derr)
				require.Equal(t, b, got, "bash")
				require.Equal(t, d, got, "dash")
				return
			}
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "not refused: %+v, %v (bash: %+v)", got, err, b)
			want := c.file
			if want == "" {
				want = DefaultsFile
			}
			require.Equal(t, want, pe.File)
			require.Equal(t, c.line, pe.Line, "%v", err)
			require.Contains(t, pe.Msg, c.msg)
			if c.split {
				require.True(t, berr != nil || derr != nil || b != d, "bash and dash agree: %+v", b)
			}
		})
	}
}

// The editor appends after a ${NAME:-word} and refuses to delete inside
// its word (which the value holds only while NAME is unset or empty).
func TestEditParamExpansion(t *testing.T) {
	needBash(t)
	files := []File{{DefaultsFile, []byte("GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT:-quiet iommu=off}\"\n")}}
	req := Request{Ensure: params("iommu=pt")}
	_, err := EditFiles(files, req)
	var pe *ParseError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, 1, pe.Line)
	require.Contains(t, pe.Msg, "${NAME:-word}")

	req = Request{Ensure: params("intel_iommu=on")}
	ed, err := EditFiles(files, req)
	require.NoError(t, err)
	checkEdit(t, files, req, ed)
	require.True(t, strings.Contains(string(ed.Changes[0].New), "iommu=off} intel_iommu=on\""), "%s", ed.Changes[0].New)
}
