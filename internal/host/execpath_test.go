package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeTool writes an executable script dir/name that leaves a marker file
// when it runs, and returns the marker's path.
func fakeTool(t *testing.T, dir, name string) string {
	t.Helper()
	marker := filepath.Join(t.TempDir(), name+".ran")
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n: >"+marker+"\necho fake\n"), 0o755))
	return marker
}

// A caller's $PATH (sudo without secure_path) never decides which program
// runs as root, nor what the program's own commands find.
func TestExecRunnerIgnoresTheCallersPATH(t *testing.T) {
	evil := t.TempDir()
	marker := fakeTool(t, evil, "printf")
	t.Setenv("PATH", evil+":"+os.Getenv("PATH"))

	out, err := ExecRunner{}.Run(t.Context(), "printf", "%s", "real")
	require.NoError(t, err)
	require.Equal(t, "real", string(out))
	require.NoFileExists(t, marker, "the caller's printf ran")

	out, err = ExecRunner{}.Run(t.Context(), "sh", "-c", `echo "$PATH"; printf x`)
	require.NoError(t, err)
	require.Equal(t, ProgramPath()+"\nx", string(out), "the child's PATH is the system one")
	require.NoFileExists(t, marker, "the child found the caller's printf")

	_, err = ExecRunner{}.Run(t.Context(), "gpuprep-no-such-tool")
	require.ErrorIs(t, err, exec.ErrNotFound)
	require.True(t, strings.Contains(err.Error(), ProgramPath()), "%v", err)
}

// Tests that need fake tools name their directories explicitly.
func TestExecRunnerDirsIsTheTestSeam(t *testing.T) {
	fakes := t.TempDir()
	marker := fakeTool(t, fakes, "modprobe")
	out, err := ExecRunner{Dirs: []string{fakes}}.Run(t.Context(), "modprobe", "vfio-pci")
	require.NoError(t, err)
	require.Equal(t, "fake\n", string(out))
	require.FileExists(t, marker)
}
