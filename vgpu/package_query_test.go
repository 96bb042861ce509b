package vgpu_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
)

// copyQueries answers dpkg-deb's and rpm's queries whatever the package's
// path, keyed by the command with FILE for it, and checks that the file
// queried is not the user's file but a private copy (in a 0700 directory of
// ours) holding want, the user's package as it was. swap, when set, runs
// after the first query (the user's file changing between the reads).
type copyQueries struct {
	t         *testing.T
	user      string
	want      []byte
	responses map[string]host.FakeResponse
	swap      func()
	calls     []string
	copies    []string
}

func (c *copyQueries) Run(_ context.Context, argv ...string) ([]byte, error) {
	c.t.Helper()
	key := append([]string(nil), argv...)
	for i, a := range argv {
		if !filepath.IsAbs(a) {
			continue
		}
		require.NotEqual(c.t, c.user, a, "queried the user's file, not a private copy")
		got, err := os.ReadFile(a)
		require.NoError(c.t, err)
		require.Equal(c.t, c.want, got, "the copy holds the package as it was")
		st, err := os.Stat(filepath.Dir(a))
		require.NoError(c.t, err)
		require.Equal(c.t, os.FileMode(0o700), st.Mode().Perm(), "the copy's directory is private")
		require.Equal(c.t, uint32(os.Geteuid()), st.Sys().(*syscall.Stat_t).Uid)
		c.copies = append(c.copies, a)
		key[i] = "FILE"
	}
	c.calls = append(c.calls, strings.Join(key, " "))
	if c.swap != nil && len(c.calls) == 1 {
		c.swap()
	}
	r, ok := c.responses[strings.Join(key, " ")]
	if !ok {
		return nil, fmt.Errorf("%q: not answered", key)
	}
	if r.Err != nil { // as dpkg-deb's and rpm's own errors do, naming the file read
		return r.Out, fmt.Errorf("%s: %w", strings.Join(argv, " "), r.Err)
	}
	return r.Out, nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var debQueries = map[string]host.FakeResponse{
	"dpkg-deb -f FILE Package Version Architecture": {Out: []byte("Package: nvidia-vgpu-ubuntu-550\nVersion: 550.54.16\nArchitecture: amd64\n")},
	"dpkg-deb -c FILE": {Out: []byte("-rwxr-xr-x root/root 1 2024-01-01 00:00 ./usr/bin/nvidia-vgpu-mgr\n")},
}

// The package is swapped after dpkg-deb read its fields: the checks and
// the hash are all of the one copy that was read first, so the install
// (which hashes the path again into its verified copy) refuses the swapped
// file; the copy is gone once the package is checked.
func TestPackageHashIsOfWhatWasQueried(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nvidia-vgpu.deb")
	checked := []byte("!<arch>\nthe package dpkg-deb checked")
	require.NoError(t, os.WriteFile(p, checked, 0o644))
	c := &copyQueries{t: t, user: p, want: checked, responses: debQueries, swap: func() {
		require.NoError(t, os.WriteFile(p, []byte("!<arch>\nSWAPPED, never read by dpkg-deb"), 0o644))
	}}
	d, err := vgpu.InspectDriver(context.Background(), p, c)
	require.NoError(t, err)
	require.Equal(t, []string{"dpkg-deb -f FILE Package Version Architecture", "dpkg-deb -c FILE"}, c.calls)
	require.Equal(t, sha(checked), d.SHA256, "the hash of the bytes dpkg-deb read")
	require.Equal(t, p, d.Path, "the plan names the user's file")
	require.Len(t, c.copies, 2)
	require.Equal(t, c.copies[0], c.copies[1], "both queries read the one copy")
	_, err = os.Stat(filepath.Dir(c.copies[0]))
	require.ErrorIs(t, err, os.ErrNotExist, "the copy is removed")
}

// Errors name the user's file, not the copy.
func TestPackageQueryErrorsNameTheUsersFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nvidia-vgpu.deb")
	body := []byte("!<arch>\nno fields")
	require.NoError(t, os.WriteFile(p, body, 0o644))
	c := &copyQueries{t: t, user: p, want: body, responses: map[string]host.FakeResponse{
		"dpkg-deb -f FILE Package Version Architecture": {Err: errExit2},
	}}
	_, err := vgpu.InspectDriver(context.Background(), p, c)
	require.ErrorContains(t, err, p+": reading the package (dpkg-deb -f) failed: dpkg-deb -f "+p+" Package Version Architecture: exit status 2")
	require.NotContains(t, err.Error(), c.copies[0])
	require.False(t, bytes.Contains([]byte(err.Error()), []byte("gpuprep-package-")))
	require.ErrorIs(t, err, errExit2, "the query's error is still there")
}

var errExit2 = errors.New("exit status 2")
