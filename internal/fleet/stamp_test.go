package fleet

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeExe points the stamp code at a file standing in for /proc/self/exe.
func fakeExe(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "gpuprep")
	require.NoError(t, os.WriteFile(exe, []byte("binary"), 0o700))
	old := selfExe
	selfExe = exe
	t.Cleanup(func() { selfExe = old })
	return exe
}

func TestStampWriteAndCheck(t *testing.T) {
	exe := fakeExe(t)
	stamp := filepath.Join(filepath.Dir(exe), stampName)
	var errb bytes.Buffer

	// No stamp: the run stops with NotStampedRC and says why.
	rest, code, done := AgentArgs([]string{StampFlag, stamp, "check", "-o", "json"}, &errb)
	assert.True(t, done)
	assert.Equal(t, NotStampedRC, code)
	assert.Nil(t, rest)
	assert.Equal(t, notStampedMsg+"\n", errb.String())

	_, code, done = AgentArgs([]string{StampWriteFlag, stamp}, &errb)
	require.True(t, done)
	require.Equal(t, 0, code, errb.String())
	data, err := os.ReadFile(stamp)
	require.NoError(t, err)
	assert.Regexp(t, `^gpuprep-stamp/1 ino=\d+ size=6 mtime=\d+\.\d{9} ctime=\d+\.\d{9}\n$`, string(data))
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(stamp), ".stamp.tmp.*"))
	assert.Empty(t, left)

	// Stamped: the subcommand's arguments are left to run, after the marker.
	errb.Reset()
	rest, code, done = AgentArgs([]string{StampFlag, stamp, "check", "-o", "json"}, &errb)
	assert.False(t, done)
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"check", "-o", "json"}, rest)
	assert.Equal(t, StampedMarker, errb.String())

	// A chmod (ctime only) and a same-size rewrite with the old times put
	// back both break the stamp.
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.Chmod(exe, 0o700))
	assert.False(t, checkStamp(stamp), "ctime changed")
	require.NoError(t, WriteStamp(stamp))
	assert.True(t, checkStamp(stamp))
	fi, err := os.Stat(exe)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.WriteFile(exe, []byte("BINARY"), 0o700))
	require.NoError(t, os.Chtimes(exe, fi.ModTime(), fi.ModTime()))
	assert.False(t, checkStamp(stamp), "content changed, mtime restored")
	// A replacement (new inode).
	require.NoError(t, WriteStamp(stamp))
	require.NoError(t, os.WriteFile(exe+".new", []byte("binary"), 0o700))
	require.NoError(t, os.Rename(exe+".new", exe))
	assert.False(t, checkStamp(stamp), "replaced")
}

func TestAgentArgsPassThrough(t *testing.T) {
	var errb bytes.Buffer
	for _, args := range [][]string{nil, {"check"}, {"--root", "/x", "check"}, {StampFlag}} {
		rest, code, done := AgentArgs(args, &errb)
		assert.False(t, done)
		assert.Equal(t, 0, code)
		assert.Equal(t, args, rest)
	}
	assert.Empty(t, errb.String())
}
