package kargs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// A command-line file larger than any kernel keeps (a hostile snapshot's
// /proc/cmdline) is refused, naming the file, before it is parsed; one of a
// real size reads as host.Root reads it.
func TestReadFileBoundsACommandLine(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proc"), 0o755))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)

	line := "BOOT_IMAGE=/vmlinuz ro intel_iommu=on " + strings.Repeat("a ", 1000)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proc/cmdline"), []byte(line+"\n"), 0o644))
	got, err := kargs.ReadString(root, "/proc/cmdline")
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(line), got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "proc/cmdline"), []byte(strings.Repeat("a ", kargs.MaxFile/2+1)), 0o644))
	_, err = kargs.ReadFile(root, "/proc/cmdline")
	require.ErrorContains(t, err, "/proc/cmdline")
	require.ErrorContains(t, err, "more than a kernel command line can be")
}
