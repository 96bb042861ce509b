package fleet

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeELF writes a static ELF executable header for machine at p (what
// LoadBinary reads: the header, no program headers), tagged so that two
// fakes of one machine differ.
func fakeELF(t *testing.T, p string, m elf.Machine, tag string) *Binary {
	t.Helper()
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(m), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	require.NoError(t, binary.Write(&buf, binary.LittleEndian, h))
	buf.WriteString(tag)
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o755))
	b, err := LoadBinary(p)
	require.NoError(t, err)
	return b
}

func TestLoadAgentsOnePerArch(t *testing.T) {
	dir := t.TempDir()
	amd := fakeELF(t, filepath.Join(dir, "gpuprep-linux-amd64"), elf.EM_X86_64, "a")
	arm := fakeELF(t, filepath.Join(dir, "gpuprep-linux-arm64"), elf.EM_AARCH64, "b")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), nil, 0o644)) // not an agent: ignored
	require.Equal(t, "aarch64", arm.Arch)

	bins, err := LoadAgents([]string{dir})
	require.NoError(t, err)
	require.Len(t, bins, 2)
	assert.Equal(t, amd.SHA256, agentFor(bins, "x86_64").SHA256)
	assert.Equal(t, arm.SHA256, agentFor(bins, "aarch64").SHA256)
	assert.Equal(t, arm.SHA256, agentFor(bins, "arm64").SHA256)
	assert.Nil(t, agentFor(bins, "ppc64le"), "no binary for another architecture")

	// files, given one by one, in any order
	bins, err = LoadAgents([]string{arm.Path, amd.Path})
	require.NoError(t, err)
	assert.Equal(t, amd.Path, agentFor(bins, "x86_64").Path)

	other := fakeELF(t, filepath.Join(t.TempDir(), "gpuprep"), elf.EM_X86_64, "c")
	_, err = LoadAgents([]string{dir, other.Path})
	assert.ErrorContains(t, err, "both built for x86_64")

	bad := filepath.Join(t.TempDir(), "gpuprep-linux-arm64")
	fakeELF(t, bad, elf.EM_X86_64, "d")
	_, err = LoadAgents([]string{bad})
	assert.ErrorContains(t, err, "its name says otherwise", "a misnamed file is refused, not sent to arm64 hosts")

	_, err = LoadAgents([]string{t.TempDir()})
	assert.ErrorContains(t, err, "no gpuprep-linux-<arch> file")
}

func TestDefaultAgentsTakesSiblings(t *testing.T) {
	dir := t.TempDir()
	self := fakeELF(t, filepath.Join(dir, "gpuprep"), elf.EM_X86_64, "self")
	arm := fakeELF(t, filepath.Join(dir, "gpuprep-linux-arm64"), elf.EM_AARCH64, "arm")
	fakeELF(t, filepath.Join(dir, "gpuprep-linux-amd64"), elf.EM_X86_64, "older build")

	bins, err := DefaultAgents(self.Path)
	require.NoError(t, err)
	require.Len(t, bins, 2)
	assert.Equal(t, self.SHA256, agentFor(bins, "x86_64").SHA256, "hosts of its own architecture run this binary")
	assert.Equal(t, arm.SHA256, agentFor(bins, "aarch64").SHA256)

	alone := fakeELF(t, filepath.Join(t.TempDir(), "gpuprep"), elf.EM_AARCH64, "alone")
	bins, err = DefaultAgents(alone.Path)
	require.NoError(t, err)
	assert.Equal(t, []*Binary{alone}, bins)

	fakeELF(t, filepath.Join(dir, "gpuprep-linux-riscv64"), elf.EM_AARCH64, "misnamed")
	_, err = DefaultAgents(self.Path)
	assert.ErrorContains(t, err, "its name says otherwise")
}

func TestAgentName(t *testing.T) {
	assert.Equal(t, "gpuprep-linux-amd64", AgentName("x86_64"))
	assert.Equal(t, "gpuprep-linux-arm64", AgentName("aarch64"))
	assert.Equal(t, "gpuprep-linux-mips", AgentName("mips"))
}
