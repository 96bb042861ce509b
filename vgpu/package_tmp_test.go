package vgpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
)

// The private copy's directory is made only where nobody else can rename
// it away: a TMPDIR writable by others and not sticky, or one inside a
// directory another user owns, is refused before any query runs.
func TestPackageCopyRefusesAnUnsafeTMPDIR(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nvidia-vgpu.deb")
	require.NoError(t, os.WriteFile(p, []byte("!<arch>\npackage"), 0o644))

	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o777))
	t.Setenv("TMPDIR", open)
	fr := &host.FakeRunner{Strict: true}
	_, err := inspectPackage(context.Background(), p, FormatDeb, fr)
	require.ErrorContains(t, err, "open is writable by its group or by others")
	require.Empty(t, fr.Calls)

	require.NoError(t, os.Chmod(open, 0o777|os.ModeSticky))
	_, err = inspectPackage(context.Background(), p, FormatDeb, fr)
	require.ErrorContains(t, err, "reading the package (dpkg-deb -f) failed", "root's and sticky, as /tmp: the queries run")

	if os.Geteuid() == 0 {
		theirs := filepath.Join(t.TempDir(), "home")
		require.NoError(t, os.MkdirAll(filepath.Join(theirs, "tmp"), 0o755))
		require.NoError(t, os.Chown(theirs, 1000, 1000))
		t.Setenv("TMPDIR", filepath.Join(theirs, "tmp"))
		_, err = inspectPackage(context.Background(), p, FormatDeb, fr)
		require.ErrorContains(t, err, "belongs to uid 1000")
	}
	entries, err := os.ReadDir(open)
	require.NoError(t, err)
	require.Empty(t, entries, "the copies are removed")
}
