package change

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Between says the file's before and after the one way every planner and
// writer reads them: Created for a file not there, Removed for new nil,
// Pending only where applying changes something, and the diff plan shows.
func TestBetween(t *testing.T) {
	for _, c := range []struct {
		name             string
		f                File
		created, removed bool
		pending          bool
		diff             string
	}{
		{"new file", Between("/etc/x", nil, false, []byte("a\n")), true, false, true, "--- /dev/null\n+++ b/etc/x\n@@ -0,0 +1 @@\n+a\n"},
		{"edit", Edit("/etc/x", []byte("a\n"), []byte("b\n")), false, false, true, "--- a/etc/x\n+++ b/etc/x\n@@ -1 +1 @@\n-a\n+b\n"},
		{"as it should be", Edit("/etc/x", []byte("a\n"), []byte("a\n")), false, false, false, ""},
		{"empty file made", Between("/etc/x", nil, false, []byte{}), true, false, true, "--- /dev/null\n+++ b/etc/x\n"},
		{"remove", Between("/etc/x", []byte("a\n"), true, nil), false, true, true, "--- a/etc/x\n+++ b/etc/x\n@@ -1 +0,0 @@\n-a\n"},
		{"nothing to remove", Between("/etc/x", nil, false, nil), true, true, false, "--- /dev/null\n+++ b/etc/x\n"},
	} {
		require.Equal(t, c.created, c.f.Created, c.name)
		require.Equal(t, c.removed, c.f.Removed, c.name)
		require.Equal(t, c.pending, c.f.Pending(), c.name)
		require.Equal(t, c.diff, c.f.Diff, c.name)
	}
	require.Nil(t, Between("/etc/x", []byte("stale"), false, nil).Old, "a file not there has no old content")
	require.EqualValues(t, 0o644, File{}.Perm())
	require.EqualValues(t, 0o755, File{Mode: 0o755}.Perm())
}
