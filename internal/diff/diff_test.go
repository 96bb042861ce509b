package diff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The oracle is GNU diff -u: same hunks and lines (headers aside).
func TestUnifiedMatchesGNUDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("diff not installed")
	}
	cases := [][2]string{
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"", "new\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n", "1\n2x\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13x\n14\n15\n"},
		{"GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"quiet\"\n", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"quiet intel_iommu=on iommu=pt\"\n"},
		{"x\ny", "x\nz"},
		{"a\nb\nc\nd\n", "a\nd\n"},
		{"a\n", "a\nb\nc\n"},
		{"a\n", "b\n"},
		{"x\na\n", "x\nb\nc\n"},
		{"a\nb\n", "c\n"},
	}
	dir := t.TempDir()
	for i, c := range cases {
		pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		require.NoError(t, os.WriteFile(pa, []byte(c[0]), 0o644))
		require.NoError(t, os.WriteFile(pb, []byte(c[1]), 0o644))
		out, _ := exec.Command("diff", "-u", pa, pb).Output()
		want := strings.SplitN(string(out), "\n", 3)[2]
		got := Unified("/f", []byte(c[0]), []byte(c[1]), true)
		require.Equal(t, want, strings.SplitN(got, "\n", 3)[2], "case %d", i)
	}
	require.Equal(t, "", Unified("/f", []byte("same"), []byte("same"), true))
	require.True(t, strings.HasPrefix(Unified("/etc/x", nil, []byte("a\n"), false), "--- /dev/null\n+++ b/etc/x\n@@ -0,0 +1 @@\n+a\n"))
}
