package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
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

// fakeAgent writes the ELF header of a static executable for machine (what
// fleet reads of an agent binary) and returns its SHA-256.
func fakeAgent(t *testing.T, p string, m elf.Machine) string {
	t.Helper()
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(m), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	require.NoError(t, binary.Write(&buf, binary.LittleEndian, h))
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o755))
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// With a binary per architecture (repeated --agent-binary, or a directory
// such as make dist's), each user gets a rule per architecture's digest.
func TestFleetSudoersPerArch(t *testing.T) {
	dir := t.TempDir()
	amd := fakeAgent(t, filepath.Join(dir, "gpuprep-linux-amd64"), elf.EM_X86_64)
	arm := fakeAgent(t, filepath.Join(dir, "gpuprep-linux-arm64"), elf.EM_AARCH64)
	want := "# x86_64 hosts\nops ALL=(root) NOPASSWD: sha256:" + amd + " /home/ops/.cache/gpuprep/" + amd + "/gpuprep\n" +
		"# aarch64 hosts\nops ALL=(root) NOPASSWD: sha256:" + arm + " /home/ops/.cache/gpuprep/" + arm + "/gpuprep\n"
	for _, args := range [][]string{
		{"--agent-binary", filepath.Join(dir, "gpuprep-linux-amd64"), "--agent-binary", filepath.Join(dir, "gpuprep-linux-arm64")},
		{"--agent-binary", dir},
	} {
		code, out, stderr := runCLI(append([]string{"fleet", "sudoers", "--user", "ops"}, args...)...)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, out, "# gpuprep "+amd+" ("+filepath.Join(dir, "gpuprep-linux-amd64")+", x86_64)\n", args)
		assert.Contains(t, out, "# gpuprep "+arm+" ("+filepath.Join(dir, "gpuprep-linux-arm64")+", aarch64)\n", args)
		assert.True(t, strings.HasSuffix(out, want), "%q:\n%s", args, out)
	}

	code, out, stderr := runCLI("fleet", "sudoers", "-i", "../../internal/fleet/testdata/hosts.ini", "--ssh-config", "none", "--agent-binary", dir)
	require.Equal(t, 0, code, stderr)
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			f := strings.Fields(l)
			rules = append(rules, f[0]+" "+f[3][len("sha256:"):])
		}
	}
	assert.Equal(t, []string{"jump " + amd, "jump " + arm, "ops " + amd, "ops " + arm, "fleet " + amd, "fleet " + arm}, rules)

	// two binaries for one architecture: which would a host get?
	again := filepath.Join(t.TempDir(), "gpuprep")
	fakeAgent(t, again, elf.EM_X86_64)
	code, _, stderr = runCLI("fleet", "sudoers", "--user", "ops", "--agent-binary", dir, "--agent-binary", again)
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "both built for x86_64")
}
