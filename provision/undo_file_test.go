package provision_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
)

// Rollback reads the file and directory lines of older journals (no record
// version, as journal.WriteFile, RemoveFile and MkdirAll wrote them field
// by field before journal.FileRecord; a removal from before "wrote" was
// recorded says only "after":"removed") as it reads those it writes now:
// a file gpuprep created is removed with the directory it made, one it
// edited restored from its backup, one it removed put back, and one whose
// intent was cut off before its backup was made left as it is; each
// line is then recorded undone.
func TestFileRollbackOfOlderJournals(t *testing.T) {
	n := newNode(t, "iommu-off-kernel")
	put := func(p, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(n.dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(n.dir, p), []byte(content), 0o644))
	}
	h := func(s string) string { return journal.Hash([]byte(s)) }
	const bak, saved = ".gpuprep-20260102T030407.000000000Z.bak", ".gpuprep-20260102T030408.000000000Z.bak"
	put("/etc/gpuprep-x/new.conf", "new\n")
	put("/etc/edit.conf", "edited\n")
	put("/etc/edit.conf"+bak, "orig\n")
	put("/etc/gone.conf"+bak, "gone\n")
	put("/etc/killed.conf", "kept\n")
	at := `{"time":"2026-01-02T03:04:07Z",`
	lines := []string{
		at + `"command":"apply","kind":"dir","path":"/etc/gpuprep-x"}`,
		at + `"command":"apply","kind":"file-intent","path":"/etc/gpuprep-x/new.conf","before":"absent","wrote":"` + h("new\n") + `"}`,
		at + `"command":"apply","kind":"file","path":"/etc/gpuprep-x/new.conf","wrote":"` + h("new\n") + `"}`,
		at + `"command":"apply","kind":"file-intent","path":"/etc/edit.conf","backup":"/etc/edit.conf` + bak + `","before":"` + h("orig\n") + `","wrote":"` + h("edited\n") + `"}`,
		at + `"command":"apply","kind":"file","path":"/etc/edit.conf","backup":"/etc/edit.conf` + bak + `","wrote":"` + h("edited\n") + `"}`,
		at + `"command":"vfio unbind","kind":"file","path":"/etc/gone.conf","backup":"/etc/gone.conf` + bak + `","after":"removed"}`,
		at + `"command":"apply","kind":"file-intent","path":"/etc/killed.conf","backup":"/etc/killed.conf` + bak + `","before":"` + h("kept\n") + `","wrote":"` + h("other\n") + `"}`,
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(n.journalPath()), 0o700))
	require.NoError(t, os.WriteFile(n.journalPath(), []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	res := n.rollback(t, provision.RollbackOptions{})
	require.Equal(t, []provision.Undo{ // newest first
		{Kind: "file", Target: "/etc/gone.conf", Action: "restored from /etc/gone.conf" + bak},
		{Kind: "file", Target: "/etc/edit.conf", Action: "restored from /etc/edit.conf" + bak + "; what it held is saved in /etc/edit.conf" + saved, Backup: "/etc/edit.conf" + saved},
		{Kind: "file", Target: "/etc/gpuprep-x/new.conf", Action: "removed (gpuprep created it)"},
		{Kind: "dir", Target: "/etc/gpuprep-x", Action: "removed (gpuprep created it; empty)"},
	}, res.Undone)
	require.NoFileExists(t, filepath.Join(n.dir, "/etc/gpuprep-x/new.conf"))
	require.NoDirExists(t, filepath.Join(n.dir, "/etc/gpuprep-x"))
	require.Equal(t, "orig\n", n.read(t, "/etc/edit.conf"))
	require.Equal(t, "gone\n", n.read(t, "/etc/gone.conf"))
	require.Equal(t, "kept\n", n.read(t, "/etc/killed.conf"))
	es, err := journal.Read(n.env.Root)
	require.NoError(t, err)
	var undone []string
	for _, en := range es[len(lines):] {
		u, ok := en.Undone()
		require.True(t, ok)
		undone = append(undone, u.Kind+" "+u.Path)
	}
	require.Equal(t, []string{"dir /etc/gpuprep-x", "file-intent /etc/gpuprep-x/new.conf", "file /etc/gpuprep-x/new.conf",
		"file-intent /etc/edit.conf", "file /etc/edit.conf", "file /etc/gone.conf", "file-intent /etc/killed.conf"}, undone)
}
