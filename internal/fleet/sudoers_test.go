package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
	"github.com/gpuprep/gpuprep/internal/testrun"
)

func TestSudoersRuleSyntax(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	line, err := SudoersRule("ops", "/home/ops/.cache/gpuprep", sha)
	require.NoError(t, err)
	assert.Equal(t, "ops ALL=(root) NOPASSWD: sha256:"+sha+" /home/ops/.cache/gpuprep/"+sha+"/gpuprep", line)
	for _, bad := range [][3]string{
		{"ops,root", "/c", sha}, {"ops", "/c d", sha}, {"ops", "/c:d", sha}, {"ops", "rel", sha},
		{"ops", "/c", "abc"}, {"", "/c", sha}, {"ops", "/c=x", sha}, {"-o", "/c", sha},
		// sudoers reads ALL as every user and an upper-case word as a
		// User_Alias (#18 review: an inventory's ansible_user=ALL)
		{"ALL", "/c", sha}, {"ADMINS", "/c", sha}, {"OPS_2", "/c", sha}, {strings.Repeat("u", 33), "/c", sha},
		{"ops", "/home/ops/../../tmp/c", sha}, {"ops", "/c/", sha}, {"ops", "/c/./d", sha},
	} {
		_, err := SudoersRule(bad[0], bad[1], bad[2])
		assert.Error(t, err, "%q", bad)
	}
	for _, good := range []string{"Ops", "ops.admin", "a_b-c", "A1b"} {
		_, err := SudoersRule(good, "/c", sha)
		assert.NoError(t, err, good)
	}
	assert.Equal(t, "/root/.cache/gpuprep", DefaultCacheHome("root"))
	assert.Equal(t, "/home/ops/.cache/gpuprep", DefaultCacheHome("ops"))
}

// The pinned rule with the real sudo: the user runs the binary with that
// digest as root, and sudo refuses the same path once the file changes.
func TestSudoersRuleWithRealSudo(t *testing.T) {
	env := sshdtest.Shared(t, "fleet")
	if !sshdtest.HasSudo() {
		t.Skip("sudo is not installed (Debian package sudo)")
	}
	if _, err := exec.LookPath("visudo"); err != nil {
		t.Skip("no visudo")
	}
	user, uid, gid := env.OtherUser(t, "pinned")
	prog, err := os.ReadFile("/usr/bin/id") // stands in for gpuprep: prints the uid it runs as
	require.NoError(t, err)
	sum := sha256.Sum256(prog)
	sha := hex.EncodeToString(sum[:])
	cache := filepath.Join(env.Dir, "pinned-cache")
	bin := filepath.Join(cache, sha, "gpuprep")
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	require.NoError(t, os.WriteFile(bin, prog, 0o755))

	line, err := SudoersRule(user, cache, sha)
	require.NoError(t, err)
	rule := filepath.Join(t.TempDir(), "rule")
	require.NoError(t, os.WriteFile(rule, []byte(line+"\n"), 0o440))
	out, err := exec.Command("visudo", "-c", "-f", rule).CombinedOutput()
	require.NoError(t, err, "visudo: %s", out)
	installed := testrun.Sudoers + user // swept with the user if this process dies
	require.NoError(t, os.WriteFile(installed, []byte(line+"\n"), 0o440))
	t.Cleanup(func() { assert.NoError(t, os.Remove(installed)) })

	sudo := func() (string, error) {
		out, err := sshdtest.AsUser(uid, gid, "exec sudo -n -- "+bin+" -u")
		return strings.TrimSpace(string(out)), err
	}
	got, err := sudo()
	require.NoError(t, err, got)
	assert.Equal(t, "0", got, "the pinned binary runs as root")

	// The same path, another file (a byte more: id still runs).
	require.NoError(t, os.WriteFile(bin, append(prog, 0), 0o755))
	got, err = sudo()
	assert.Error(t, err, got)
	assert.NotEqual(t, "0", got)
	assert.Contains(t, got, "sudo:")

	// The right file again, replaced by a new inode: it runs.
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.WriteFile(bin, prog, 0o755))
	got, err = sudo()
	require.NoError(t, err, got)
	assert.Equal(t, "0", got)
}
