package grub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

func fixtureFiles(t testing.TB, name string) []File {
	t.Helper()
	r, err := host.NewRoot(filepath.Join("testdata", name))
	require.NoError(t, err)
	files, err := ReadFiles(r)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

func params(s ...string) []kargs.Param {
	var out []kargs.Param
	for _, a := range s {
		out = append(out, kargs.ParseOne(a))
	}
	return out
}

var (
	intelMode = Request{Ensure: params("intel_iommu=on", "iommu=pt")}
	amdMode   = Request{Ensure: params("iommu=pt")}
)

var requests = map[string]Request{
	"intel":        intelMode,
	"amd":          amdMode,
	"remove-iommu": {Remove: []string{"iommu", "intel-iommu", "amd_iommu"}},
	"remove-quiet": {Remove: []string{"quiet", "splash", "acpi_osi"}},
	"mixed":        {Ensure: params("vfio-pci.ids=10de:2335", "nouveau.modeset=0"), Remove: []string{"splash"}},
	"intel-notoff": {Ensure: intelMode.Ensure, NotOff: []string{"intel_iommu", "iommu", "intremap"}},
	"amd-notoff":   {Ensure: amdMode.Ensure, NotOff: []string{"amd_iommu", "iommu", "intremap"}},
}

// TestEditFixturesOracle runs every request on every fixture and checks the
// result with bash.
func TestEditFixturesOracle(t *testing.T) {
	needBash(t)
	ents, err := os.ReadDir("testdata")
	require.NoError(t, err)
	for _, e := range ents {
		name := e.Name()
		if name == "fuzz" || name == "hostile" || name == "nextboot" { // hostile: refused, see bounds_test.go
			continue
		}
		for rn, req := range requests {
			t.Run(name+"/"+rn, func(t *testing.T) {
				files := fixtureFiles(t, name)
				ed, err := EditFiles(files, req)
				if strings.HasPrefix(name, "refused-") {
					var pe *ParseError
					require.ErrorAs(t, err, &pe)
					require.Equal(t, DefaultsFile, pe.File)
					return
				}
				require.NoError(t, err)
				checkEdit(t, files, req, ed)
			})
		}
	}
}

func editOne(t *testing.T, name string, req Request) (*Edit, map[string]string) {
	t.Helper()
	files := fixtureFiles(t, name)
	ed, err := EditFiles(files, req)
	require.NoError(t, err)
	checkEdit(t, files, req, ed)
	out := map[string]string{}
	for _, c := range ed.Changes {
		out[c.Path] = string(c.New)
	}
	return ed, out
}

func TestEditDebian(t *testing.T) {
	needBash(t)
	ed, out := editOne(t, "debian", intelMode)
	require.Equal(t, "GRUB_CMDLINE_LINUX_DEFAULT", ed.Var)
	require.Contains(t, out[DefaultsFile], "\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt\"\nGRUB_CMDLINE_LINUX=\"\"\n")
	require.Equal(t, []string{"intel_iommu=on", "iommu=pt"}, ed.Added)
}

func TestEditUbuntuEditsTheFileThatWins(t *testing.T) {
	needBash(t)
	ed, out := editOne(t, "ubuntu-cloudimg", amdMode)
	require.Len(t, ed.Changes, 1)
	require.Equal(t, "/etc/default/grub.d/kdump-tools.cfg", ed.Changes[0].Path)
	require.Equal(t, `GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT crashkernel=2G-4G:320M,4G-32G:512M,32G-64G:1024M,64G-128G:2048M,128G-:4096M iommu=pt"`+"\n", out["/etc/default/grub.d/kdump-tools.cfg"])
}

func TestEditRHELUsesCmdlineLinux(t *testing.T) {
	needBash(t)
	ed, out := editOne(t, "rhel", intelMode)
	require.Equal(t, "GRUB_CMDLINE_LINUX", ed.Var)
	require.Contains(t, out[DefaultsFile], `rd.lvm.lv=rl/swap intel_iommu=on iommu=pt"`+"\n")
}

func TestEditQuotingStyles(t *testing.T) {
	needBash(t)
	_, out := editOne(t, "single-quotes", intelMode)
	require.Contains(t, out[DefaultsFile], "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash intel_iommu=on iommu=pt'\n")
	_, out = editOne(t, "unquoted", amdMode)
	require.Equal(t, "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=pt\"\nGRUB_CMDLINE_LINUX=\n", out[DefaultsFile])
	_, out = editOne(t, "spaces", intelMode)
	require.Equal(t, `GRUB_CMDLINE_LINUX_DEFAULT="quiet acpi_osi='!Windows 2012' splash intel_iommu=on iommu=pt"`+"\n"+
		`GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 \"acpi_osi=Linux x\" nomodeset"`+"\n", out[DefaultsFile])
	_, out = editOne(t, "spaces", Request{Remove: []string{"acpi_osi"}})
	require.Equal(t, `GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=soft splash"`+"\n"+
		`GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 nomodeset"`+"\n", out[DefaultsFile])
}

// A double-quoted value continued on the next physical lines without a
// backslash (testdata/refused-multiline): the newlines are in the value, and
// grub-mkconfig pastes it into grub.cfg's linux line, which GRUB ends at the
// first (multiline.go). Appending before the closing quote, as gpuprep did,
// gave "console=tty0\n    console=ttyS0,115200n8\n    net.ifnames=0" and
// "quiet splash intel_iommu=on iommu=pt" after it: bash is content, but the
// arguments land on a line of grub.cfg of their own, which GRUB runs as a
// command. gpuprep refuses, naming the line, whatever the request (even a
// removal, or an argument it would find "already there" after the newline).
func TestEditMultiline(t *testing.T) {
	files := fixtureFiles(t, "refused-multiline")
	for rn, req := range requests {
		_, err := EditFiles(files, req)
		var pe *ParseError
		require.ErrorAs(t, err, &pe, rn)
		require.Equal(t, DefaultsFile, pe.File, rn)
		require.Equal(t, 2, pe.Line, rn)
		require.Contains(t, pe.Msg, `GRUB_CMDLINE_LINUX's value goes on past the end of this line`, rn)
	}
	_, err := EditFiles(files, Request{Ensure: params("console=tty0")})
	require.Error(t, err, "console=tty0 is before the newline, but the value still has one")
}

// The same values with each line ended by a backslash inside the quotes
// (testdata/continued), the fix the refusal suggests: the shell removes the
// backslash-newline, the value is one line, and the edit goes in.
func TestEditContinued(t *testing.T) {
	needBash(t)
	ed, out := editOne(t, "continued", intelMode)
	require.Equal(t, `GRUB_TIMEOUT=5
GRUB_CMDLINE_LINUX="console=tty0 \
    console=ttyS0,115200n8 \
    net.ifnames=0"
GRUB_CMDLINE_LINUX_DEFAULT="quiet \
splash intel_iommu=on iommu=pt"
GRUB_TERMINAL=serial
`, out[DefaultsFile])
	require.NotContains(t, linuxLine(ed.After), "\n")
}

func TestEditSelfAppendAndReferences(t *testing.T) {
	needBash(t)
	_, out := editOne(t, "varrefs", intelMode)
	require.Equal(t, `EXTRA="nomodeset"
CONSOLE=ttyS1
GRUB_CMDLINE_LINUX="console=$CONSOLE"
GRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"
GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} amd_iommu=on"
GRUB_CMDLINE_LINUX_DEFAULT=$GRUB_CMDLINE_LINUX_DEFAULT" intel_iommu=on iommu=pt"
`, out[DefaultsFile])
	// an argument that comes from another variable is not edited silently
	_, err := EditFiles(fixtureFiles(t, "varrefs"), Request{Remove: []string{"nomodeset"}})
	require.EqualError(t, err, `/etc/default/grub:1: GRUB_CMDLINE_LINUX_DEFAULT gets "nomodeset" from $EXTRA; gpuprep edits only GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT: edit it by hand`)
}

func TestEditDuplicatesEndUpOnce(t *testing.T) {
	needBash(t)
	ed, out := editOne(t, "duplicates", intelMode)
	require.Equal(t, `GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=off"
GRUB_CMDLINE_LINUX="iommu=1 iommu.passthrough=0 quiet"
GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=nopt iommu=pt splash intel_iommu=on"
`, out[DefaultsFile])
	// iommu=pt was in effect (the last of iommu=1 iommu.passthrough=0
	// iommu=nopt iommu=pt): left alone; intel_iommu was not (off last)
	require.Equal(t, []string{"intel-iommu=on", "intel_iommu=on,sm_off", "intel_iommu=off"}, ed.Removed)
	require.Equal(t, params("iommu=pt"), ed.Satisfied)
}

func TestEditSatisfiedLeftAlone(t *testing.T) {
	needBash(t)
	ed, _ := editOne(t, "configured", intelMode)
	require.Empty(t, ed.Changes)
	require.Len(t, ed.Satisfied, 2)
}

func TestEditNoTrailingNewline(t *testing.T) {
	needBash(t)
	_, out := editOne(t, "no-trailing-newline", amdMode)
	require.Equal(t, "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash iommu=pt\"\nGRUB_CMDLINE_LINUX=\"\"", out[DefaultsFile])
}

func TestEditIndented(t *testing.T) {
	needBash(t)
	_, out := editOne(t, "indented", intelMode)
	require.Equal(t, "\tGRUB_DEFAULT=0\n    GRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt\"   ;  GRUB_TIMEOUT=3\n  export GRUB_CMDLINE_LINUX=\"rd.auto\"\n", out[DefaultsFile])
}

func TestEditRefusals(t *testing.T) {
	for _, tc := range []struct{ file, err string }{
		{"GRUB_CMDLINE_LINUX=\"`cat /x`\"\n", "/etc/default/grub:1: GRUB_CMDLINE_LINUX: built from a command's output (`...`); gpuprep will not guess its value"},
		{"A=1\nGRUB_CMDLINE_LINUX=\"$HOME/x\"\n", "/etc/default/grub:2: GRUB_CMDLINE_LINUX: references $HOME, which no defaults file sets (its value would come from the environment)"},
		{"GRUB_CMDLINE_LINUX=\"${X:-quiet}\"\n", "/etc/default/grub:1: GRUB_CMDLINE_LINUX: uses ${X:-quiet}, and $X is set by no defaults file (its value would come from the environment)"},
		{"X=a\nGRUB_CMDLINE_LINUX=\"${X%a}\"\n", "/etc/default/grub:2: GRUB_CMDLINE_LINUX: uses the parameter expansion ${X%a}, which gpuprep does not evaluate"},
		{"GRUB_CMDLINE_LINUX+=\" quiet\"\n", `/etc/default/grub:1: unsupported shell statement touches the kernel command line: "GRUB_CMDLINE_LINUX+=\" quiet\""`},
		{"X=1\n. /etc/grub.extra\n", `/etc/default/grub:2: unsupported shell statement ". /etc/grub.extra": it runs ., which could change any variable`},
		{"GRUB_CMDLINE_LINUX=\"quiet\n", "/etc/default/grub:1: GRUB_CMDLINE_LINUX: unterminated double quote"},
		{"GRUB_CMDLINE_LINUX=$'a\\tb'\n", "/etc/default/grub:1: GRUB_CMDLINE_LINUX: unsupported bash quoting $'...'"},
		{"GRUB_CMDLINE_LINUX_DEFAULT=\"a\"'iommu=off'\n", `/etc/default/grub:1: GRUB_CMDLINE_LINUX_DEFAULT: the argument "aiommu=off" is put together from several quoted or expanded parts; edit it by hand`},
	} {
		_, err := EditFiles([]File{{DefaultsFile, []byte(tc.file)}}, Request{Ensure: params("iommu=pt"), Remove: []string{"aiommu"}})
		require.EqualError(t, err, tc.err, tc.file)
	}
	// a conditional that does not touch the command line is fine
	files := []File{{DefaultsFile, []byte("if [ -e /x ]; then\n  GRUB_TIMEOUT=1\nfi\nGRUB_CMDLINE_LINUX=\"\"\n")}}
	ed, err := EditFiles(files, amdMode)
	require.NoError(t, err)
	require.Equal(t, "if [ -e /x ]; then\n  GRUB_TIMEOUT=1\nfi\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n", string(ed.Changes[0].New))
	// arguments gpuprep would have to quote are refused
	_, err = EditFiles(files, Request{Ensure: params("acpi_osi=Windows 2012")})
	require.Error(t, err)
}

func TestEditAddsMissingVariable(t *testing.T) {
	needBash(t)
	files := []File{{DefaultsFile, []byte("GRUB_TIMEOUT=5")}}
	ed, err := EditFiles(files, amdMode)
	require.NoError(t, err)
	require.Equal(t, "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n", string(ed.Changes[0].New))
	checkEdit(t, files, amdMode, ed)
}
