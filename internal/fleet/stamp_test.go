package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// safeTempDir is a temporary directory in a place the stamp's check of the
// cache's path trusts (t.TempDir's /tmp is writable by all).
func safeTempDir(t *testing.T) string {
	t.Helper()
	dir, err := sshdtest.SafeTempDir("gpuprep-stamp-")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(dir)) })
	return dir
}

// fakeExe is a running executable whose file, standing in for
// /proc/self/exe, is exe.
func fakeExe(t *testing.T) (exe string, s self) {
	t.Helper()
	exe = filepath.Join(safeTempDir(t), "gpuprep")
	require.NoError(t, os.WriteFile(exe, []byte("binary"), 0o700))
	return exe, self{exe: exe}
}

func TestStampWriteAndCheck(t *testing.T) {
	exe, s := fakeExe(t)
	stamp := filepath.Join(filepath.Dir(exe), stampName)
	var errb bytes.Buffer

	// No stamp: the run stops with NotStampedRC and says why.
	rest, code, done := s.agentArgs([]string{StampFlag, stamp, "check", "-o", "json"}, &errb)
	assert.True(t, done)
	assert.Equal(t, NotStampedRC, code)
	assert.Nil(t, rest)
	assert.Equal(t, notStampedMsg+"\n", errb.String())

	_, code, done = s.agentArgs([]string{StampWriteFlag, stamp}, &errb)
	require.True(t, done)
	require.Equal(t, 0, code, errb.String())
	data, err := os.ReadFile(stamp)
	require.NoError(t, err)
	assert.Regexp(t, `^gpuprep-stamp/1 ino=\d+ size=6 mtime=\d+\.\d{9} ctime=\d+\.\d{9}\n$`, string(data))
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(stamp), ".stamp.tmp.*"))
	assert.Empty(t, left)

	// Stamped: the subcommand's arguments are left to run, after the marker.
	errb.Reset()
	rest, code, done = s.agentArgs([]string{StampFlag, stamp, "check", "-o", "json"}, &errb)
	assert.False(t, done)
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"check", "-o", "json"}, rest)
	assert.Equal(t, StampedMarker, errb.String())

	// A chmod (ctime only) and a same-size rewrite with the old times put
	// back both break the stamp.
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.Chmod(exe, 0o700))
	assert.False(t, s.checkStamp(stamp), "ctime changed")
	require.NoError(t, s.writeStamp(stamp))
	assert.True(t, s.checkStamp(stamp))
	fi, err := os.Stat(exe)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.WriteFile(exe, []byte("BINARY"), 0o700))
	require.NoError(t, os.Chtimes(exe, fi.ModTime(), fi.ModTime()))
	assert.False(t, s.checkStamp(stamp), "content changed, mtime restored")
	// A replacement (new inode).
	require.NoError(t, s.writeStamp(stamp))
	require.NoError(t, os.WriteFile(exe+".new", []byte("binary"), 0o700))
	require.NoError(t, os.Rename(exe+".new", exe))
	assert.False(t, s.checkStamp(stamp), "replaced")
}

// The stamp flag writes only the stamp beside the running binary: run as
// root under a sudoers rule, it would otherwise replace any file with a
// stamp (found by the #18 review).
func TestStampWriteOnlyBesideTheBinary(t *testing.T) {
	exe, s := fakeExe(t)
	other := safeTempDir(t)
	victim := filepath.Join(other, "shadow")
	require.NoError(t, os.WriteFile(victim, []byte("root:x:0:0\n"), 0o600))
	for _, file := range []string{victim, filepath.Join(other, stampName), filepath.Join(filepath.Dir(exe), "shadow")} {
		var errb bytes.Buffer
		_, code, done := s.agentArgs([]string{StampWriteFlag, file}, &errb)
		require.True(t, done)
		require.Equal(t, 1, code, file)
		require.Contains(t, errb.String(), "is not the stamp beside this binary")
		require.NoFileExists(t, filepath.Join(other, stampName))
	}
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "root:x:0:0\n", string(data))
	require.NoFileExists(t, filepath.Join(filepath.Dir(exe), "shadow"))
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

// The warm path's script under the real /bin/sh: the binary runs directly
// for root, through sudo -n for anyone else, and never when the cache is
// not as the stamp left it or the architecture differs.
func TestStampedScriptUnderSh(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs the script as root and as nobody")
	}
	arch, err := os.ReadFile("/proc/sys/kernel/arch")
	if err != nil {
		t.Skip("no /proc/sys/kernel/arch (Linux before 6.1)")
	}
	const sha = "0123abcd"
	setup := func(t *testing.T, uid int) (base, bin, stamp, fakes string) {
		top := t.TempDir()
		require.NoError(t, os.Chmod(filepath.Dir(top), 0o755)) // t.TempDir's own parent is 0700
		require.NoError(t, os.Chmod(top, 0o755))
		base = filepath.Join(top, "cache")
		d := filepath.Join(base, sha)
		require.NoError(t, os.MkdirAll(d, 0o755))
		bin, stamp = filepath.Join(d, "gpuprep"), filepath.Join(d, stampName)
		require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho direct \"$@\"\n"), 0o755))
		require.NoError(t, os.WriteFile(stamp, []byte("stamp\n"), 0o644))
		old := time.Now().Add(-time.Hour)
		require.NoError(t, os.Chtimes(bin, old, old))
		fakes = filepath.Join(top, "bin")
		require.NoError(t, os.MkdirAll(fakes, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(fakes, "sudo"), []byte("#!/bin/sh\necho sudo \"$@\"\n"), 0o755))
		for _, p := range []string{base, d, bin, stamp} {
			require.NoError(t, os.Lchown(p, uid, uid))
		}
		return
	}
	run := func(t *testing.T, uid int, base string, fakes, arch string) (string, int) {
		script := stampedScript(Quote(base), []*Binary{{Arch: arch, SHA256: sha}}, "check -o json", false, kernelArchFile)
		argv := []string{"/bin/sh", "-c", script}
		if uid != 0 {
			argv = append([]string{"setpriv", "--reuid", fmt.Sprint(uid), "--regid", fmt.Sprint(uid), "--clear-groups", "--"}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"HOME=/nonexistent", "PATH=" + fakes + ":/usr/bin:/bin"}
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()
	}
	a := strings.TrimSpace(string(arch))
	want := StampFlag + " %s/" + sha + "/" + stampName + " check -o json"

	base, _, _, fakes := setup(t, 0)
	out, rc := run(t, 0, base, fakes, a)
	require.Equal(t, 0, rc, out)
	require.Equal(t, "direct "+fmt.Sprintf(want, base), out, "root runs the binary itself")

	const nobody = 65534
	base, bin, stamp, fakes := setup(t, nobody)
	out, rc = run(t, nobody, base, fakes, a)
	require.Equal(t, 0, rc, out)
	require.Equal(t, "sudo -n -- "+filepath.Join(base, sha, "gpuprep")+" "+fmt.Sprintf(want, base), out, "a user goes through sudo -n")

	out, rc = run(t, nobody, base, fakes, "not-"+a)
	require.Equal(t, NotStampedRC, rc, out)
	require.Equal(t, notStampedMsg, out, "another architecture: never started")

	require.NoError(t, os.Chtimes(bin, time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
	out, rc = run(t, nobody, base, fakes, a)
	require.Equal(t, NotStampedRC, rc, "a binary newer than its stamp is not started: %s", out)
	require.NoError(t, os.Chtimes(bin, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))

	require.NoError(t, os.Lchown(stamp, 0, 0))
	out, rc = run(t, nobody, base, fakes, a)
	require.Equal(t, NotStampedRC, rc, "a stamp someone else owns: %s", out)
}

// failingWriter refuses every write (a stderr whose reader has gone).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("write refused") }

// A stamped binary whose stderr cannot take the marker does not run the
// subcommand: the client, which reads no marker, takes the host as not
// stamped, and the command must not run behind its back.
func TestStampMarkerUnwritable(t *testing.T) {
	exe, s := fakeExe(t)
	stamp := filepath.Join(filepath.Dir(exe), stampName)
	var errb bytes.Buffer
	_, code, done := s.agentArgs([]string{StampWriteFlag, stamp}, &errb)
	require.True(t, done)
	require.Equal(t, 0, code, errb.String())

	rest, code, done := s.agentArgs([]string{StampFlag, stamp, "check"}, failingWriter{})
	assert.True(t, done)
	assert.Equal(t, NotStampedRC, code)
	assert.Nil(t, rest)
}
