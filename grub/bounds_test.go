package grub

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// requireBounded: reading files is refused with a ParseError naming file
// and line, having allocated less than 64 MiB.
func requireBounded(t *testing.T, files []File, file string, line int) {
	t.Helper()
	var err error
	n := allocated(func() { _, err = Evaluate(files) })
	var pe *ParseError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, file, pe.File)
	require.Equal(t, line, pe.Line, "%v", err)
	require.Less(t, n, uint64(64<<20), "bytes allocated")
	_, err = EditFiles(files, intelMode)
	require.True(t, errors.As(err, &pe), "%v", err)
}

// The file: a variable doubled 39 times. The value passes 64 KiB at
// the 17th doubling (line 19: a comment, A=x, then the doublings).
func TestDoublingBounded(t *testing.T) {
	files := fixtureFiles(t, "hostile/doubling")
	requireBounded(t, files, DefaultsFile, 19)
}

// A 330 KB chain of self-appends in a grub.d file: each line copies the
// whole value, which stays under 64 KiB; line i copies 2(i-1) bytes, so the
// total, n(n-1) after n lines, passes 1 MiB at line 1025.
func TestSelfAppendChainBounded(t *testing.T) {
	chain := strings.Repeat("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX x\"\n", 330_000/43)
	files := []File{{DefaultsFile, []byte("GRUB_CMDLINE_LINUX=\"\"\n")}, {"/etc/default/grub.d/50-chain.cfg", []byte(chain)}}
	requireBounded(t, files, "/etc/default/grub.d/50-chain.cfg", 1025)
}

// A long literal value is refused as soon as it passes 64 KiB.
func TestLiteralValueBounded(t *testing.T) {
	files := []File{{DefaultsFile, []byte("X=1\nGRUB_CMDLINE_LINUX=\"" + strings.Repeat("a ", 1<<20) + "\"\n")}}
	requireBounded(t, files, DefaultsFile, 2)
}

// A defaults file that is not a regular file, or is larger than 1 MiB, is
// refused before it is read.
func TestDefaultsFileBounded(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc/default/grub.d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etc/default/grub"), []byte("GRUB_CMDLINE_LINUX=\"\"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etc/default/grub.d/big.cfg"), bytes.Repeat([]byte("# x\n"), 300<<10), 0o644))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	_, err = ReadFiles(root)
	require.ErrorContains(t, err, "/etc/default/grub.d/big.cfg:1: 1228800 bytes: larger than gpuprep reads (1048576)")

	require.NoError(t, os.Remove(filepath.Join(dir, "etc/default/grub.d/big.cfg")))
	require.NoError(t, os.Remove(filepath.Join(dir, "etc/default/grub")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "etc/default/grub"), 0o644))
	_, err = ReadFiles(root)
	require.ErrorContains(t, err, "/etc/default/grub:1: not a regular file")
}
