package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fleet sudoers prints the digest-pinned rule for the binary given (its
// effect under the real sudo: internal/fleet's TestSudoersRuleWithRealSudo).
func TestFleetSudoers(t *testing.T) {
	elf, err := os.ReadFile("/usr/bin/id") // any ELF stands in for --agent-binary
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "gpuprep")
	require.NoError(t, os.WriteFile(bin, elf, 0o755))
	sum := sha256.Sum256(elf)
	sha := hex.EncodeToString(sum[:])

	code, out, stderr := runCLI("fleet", "sudoers", "--user", "ops", "--agent-binary", bin)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "# gpuprep "+sha+" ("+bin+", ")
	assert.Contains(t, out, "\n# ops may run, as root and without a password, this one gpuprep binary")
	assert.True(t, strings.HasSuffix(out, "\nops ALL=(root) NOPASSWD: sha256:"+sha+" /home/ops/.cache/gpuprep/"+sha+"/gpuprep\n"), out)

	code, out, stderr = runCLI("fleet", "sudoers", "--user", "ops", "--cache-dir", "/srv/gpuprep", "--agent-binary", bin)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "\nops ALL=(root) NOPASSWD: sha256:"+sha+" /srv/gpuprep/"+sha+"/gpuprep\n")

	// From an inventory: a line per login user (and cache directory).
	code, out, stderr = runCLI("fleet", "sudoers", "-i", "../../internal/fleet/testdata/hosts.ini", "--ssh-config", "none", "--agent-binary", bin)
	require.Equal(t, 0, code, stderr)
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			rules = append(rules, strings.Fields(l)[0])
		}
	}
	assert.Equal(t, []string{"jump", "ops", "fleet"}, rules)

	for _, bad := range [][]string{
		{"fleet", "sudoers", "--agent-binary", bin},
		{"fleet", "sudoers", "--user", "a b", "--agent-binary", bin},
		{"fleet", "sudoers", "--user", "ops", "--cache-dir", "/x y", "--agent-binary", bin},
		{"fleet", "sudoers", "--cache-dir", "/x", "-i", "../../internal/fleet/testdata/hosts.ini", "--agent-binary", bin},
	} {
		code, _, stderr = runCLI(bad...)
		assert.Equal(t, exitUsage, code, "%q: %s", bad, stderr)
	}
}
