package grub

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A defaults file with CR LF line endings (testdata/crlf). The shell keeps the
// CR in the value ("quiet\r"; see crlf.go for what grub-mkconfig, GRUB and
// the kernel make of it): appended arguments go inside the quotes, before
// the CR, and every line still ends in CR LF. bash is the oracle
// (checkEdit); TestEditFixturesOracle runs every request on the fixture.
func TestCRLFFixture(t *testing.T) {
	needBash(t)
	files := fixtureFiles(t, "crlf")
	want, err := bashSource(t, files)
	require.NoError(t, err)
	require.Equal(t, "quiet\r", want.Default) // what bash really sets
	ed, err := EditFiles(files, intelMode)
	require.NoError(t, err)
	checkEdit(t, files, intelMode, ed)
	require.Equal(t, "quiet intel_iommu=on iommu=pt\r", ed.After.Default)
	out := string(ed.Changes[0].New)
	require.Contains(t, out, "\r\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt\"\r\nGRUB_CMDLINE_LINUX=\"\"\r\n")
	requireCRLF(t, out)
}

// requireCRLF asserts every line of s ends in CR LF and no CR is elsewhere.
func requireCRLF(t *testing.T, s string) {
	t.Helper()
	require.Equal(t, strings.Count(s, "\n"), strings.Count(s, "\r\n"), "a line lost its CR:\n%q", s)
	require.Equal(t, strings.Count(s, "\r"), strings.Count(s, "\r\n"), "a CR is inside a line:\n%q", s)
}

// Every shape of assignment, written with CR LF line endings: the edit keeps
// the CR last on its line, and bash reads the result as intended.
func TestCRLFShapes(t *testing.T) {
	needBash(t)
	for name, c := range map[string]struct{ in, want string }{
		"double-quoted": {"GRUB_CMDLINE_LINUX=\"ro\"\r\n", "GRUB_CMDLINE_LINUX=\"ro iommu=pt\"\r\n"},
		"single-quoted": {"GRUB_CMDLINE_LINUX='ro'\r\n", "GRUB_CMDLINE_LINUX='ro iommu=pt'\r\n"},
		"empty-quotes":  {"GRUB_CMDLINE_LINUX=\"\"\r\n", "GRUB_CMDLINE_LINUX=\"iommu=pt\"\r\n"},
		"unquoted":      {"GRUB_CMDLINE_LINUX=ro\r\n", "GRUB_CMDLINE_LINUX=\"ro iommu=pt\"\r\n"},
		"empty":         {"GRUB_CMDLINE_LINUX=\r\n", "GRUB_CMDLINE_LINUX=iommu=pt\r\n"},
		"expansion":     {"X=ro\r\nGRUB_CMDLINE_LINUX=$X\r\n", "X=ro\r\nGRUB_CMDLINE_LINUX=$X\" iommu=pt\"\r\n"},
		"no-final-eol":  {"GRUB_CMDLINE_LINUX=\"ro\"\r", "GRUB_CMDLINE_LINUX=\"ro iommu=pt\"\r"},
		"not-set":       {"GRUB_TIMEOUT=5\r\n", "GRUB_TIMEOUT=5\r\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\r\n"},
		"removal":       {"GRUB_CMDLINE_LINUX=\"ro iommu=off\"\r\n", "GRUB_CMDLINE_LINUX=\"ro iommu=pt\"\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			files := []File{{DefaultsFile, []byte(c.in)}}
			ed, err := EditFiles(files, amdMode)
			require.NoError(t, err)
			checkEdit(t, files, amdMode, ed)
			require.Len(t, ed.Changes, 1)
			require.Equal(t, c.want, string(ed.Changes[0].New))
		})
	}
}
