package kernelrelease

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

func TestCheck(t *testing.T) {
	// releases the distributions' kernels have (uname -r)
	for _, ok := range []string{"6.1.0-18-amd64", "6.8.0-45-generic", "5.14.0-427.13.1.el9_4.x86_64", "6.8.12-4-pve", "6.9.3-arch1-1", "6.5.6-300.fc39.x86_64", "6.4.0-150600.23.7-default", "6.8.0-1015-nvidia-64k", "6.1.0+"} {
		require.NoError(t, Check(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "../../etc", "6.1/..", "6.1.0/x", "/6.1.0", "6.1\x00x", "6.1 x", "6.1\n", "\t", strings.Repeat("6", 65)} {
		err := Check(bad)
		require.Error(t, err, "%q", bad)
		require.Contains(t, err.Error(), "kernel release ")
	}
}

func TestRunningRefusesAHostileRelease(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "proc/sys/kernel/osrelease")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	for _, c := range []struct{ file, want, err string }{
		{"6.1.0-18-amd64\n", "6.1.0-18-amd64", ""},
		{"../../etc\n", "", `/proc/sys/kernel/osrelease: kernel release "../../etc" refused: it holds a '/'`},
		{"..\n", "", `kernel release ".." refused`},
	} {
		require.NoError(t, os.WriteFile(p, []byte(c.file), 0o644))
		k, err := Running(root)
		require.Equal(t, c.want, k)
		if c.err == "" {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, c.err)
		}
	}
}
