package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// Two real local users and a real sshd: the login user A's cache directory
// can be written by a second user B (group-writable, as in an NFS home
// shared with a group; or a shared gpuprep_cache_dir). Whatever B plants
// or swaps in, gpuprep refuses the host, naming the path, and runs nothing
// of B's; a safe cache still works, warm path included.
func TestSSHCacheWritableByAnotherUser(t *testing.T) {
	r := newRig(t)
	if !sshdtest.HasSudo() {
		t.Skip("sudo is not installed (Debian package sudo)")
	}
	s := r.env.Start(t, "127.0.0.32")
	sshdtest.Trust(t, r.kh, false, s)
	a := r.env.User
	b, buid, bgid := r.env.OtherUser(t, "intruder")
	home := r.env.Home[a]
	base := filepath.Join(home, ".cache", "gpuprep")
	dir := filepath.Join(base, r.bin.SHA256)
	bin := filepath.Join(dir, "gpuprep")
	// B's program: it leaves a mark of whoever runs it
	mark := filepath.Join(r.env.Dir, "ran-"+b)
	evil := filepath.Join(r.env.Dir, "evil-"+b)
	require.NoError(t, os.WriteFile(evil, []byte("#!/bin/sh\nid -u >> "+mark+"\nexit 0\n"), 0o755))
	require.NoError(t, removeIfThere(mark)) // one an earlier run left
	require.NoError(t, os.Chmod(r.env.Dir, 0o755))
	t.Cleanup(func() { assert.NoError(t, removeIfThere(mark)) })
	asB := func(script string) {
		t.Helper()
		out, err := sshdtest.AsUser(buid, bgid, script)
		require.NoError(t, err, "as %s: %s", b, out)
	}
	groupWritableCache := func() {
		t.Helper()
		require.NoError(t, os.RemoveAll(filepath.Join(home, ".cache")))
		require.NoError(t, os.MkdirAll(base, 0o700))
		require.NoError(t, exec.Command("chown", "-R", fmt.Sprintf("%s:%d", a, bgid), filepath.Join(home, ".cache")).Run())
		require.NoError(t, os.Chmod(filepath.Join(home, ".cache"), 0o755))
		require.NoError(t, os.Chmod(base, 0o770)) // B's group may write it
	}
	// the tests after this one get A's home with no cache, as it was made
	t.Cleanup(func() { assert.NoError(t, os.RemoveAll(filepath.Join(home, ".cache"))) })
	h := r.host("shared", s, a)
	run := r.runner(r.transport())
	run.Parallel = 1
	noMark := func(what string) {
		t.Helper()
		_, err := os.Stat(mark)
		assert.True(t, os.IsNotExist(err), "%s: B's program ran", what)
	}

	// 1. B swaps the binary between its hash and its run (deterministically,
	// at the moment an inotify watch would have told B).
	groupWritableCache()
	run.Exec.placedHook = func(_ *Host, p string) {
		asB(fmt.Sprintf("mv %s %s.old && mkdir %s && cp %s %s", dir, dir, dir, evil, p))
	}
	res := run.Run(context.Background(), []*Host{h})
	noMark("swap between hash and run")
	require.Equal(t, StatusError, res[0].Status, res[0].Err)
	assert.Contains(t, res[0].Err, "refusing to use "+bin)
	assert.Contains(t, res[0].Err, base+" is writable by its group or by others (mode 0770, owner "+a)
	assert.Contains(t, res[0].Err, "set gpuprep_cache_dir to a directory only the login user can write")
	run.Exec.placedHook = nil

	// 2. B plants a copy of the right binary (its hash matches) in a
	// directory of B's own, to swap it at leisure.
	groupWritableCache()
	asB(fmt.Sprintf("mkdir -m 755 %s && cp %s %s && chmod 755 %s", dir, r.bin.Path, bin, bin))
	res = run.Run(context.Background(), []*Host{h})
	noMark("planted copy")
	require.Equal(t, StatusError, res[0].Status, res[0].Err)
	assert.Contains(t, res[0].Err, bin+" belongs to "+b+" (uid "+fmt.Sprint(buid)+"), not to root or the login user")

	// 3. A shared gpuprep_cache_dir anyone may write (/tmp-like).
	shared := filepath.Join(r.env.Dir, "shared-cache")
	require.NoError(t, os.MkdirAll(shared, 0o755))
	require.NoError(t, os.Chmod(shared, os.ModeSticky|0o777))
	hs := r.host("sharedvar", s, a)
	hs.Vars["gpuprep_cache_dir"] = shared
	res = run.Run(context.Background(), []*Host{hs})
	require.Equal(t, StatusError, res[0].Status, res[0].Err)
	assert.Contains(t, res[0].Err, shared+" is writable by its group or by others (mode 1777, owner root (uid 0))")

	// 4. The same home made safe: it works, cold and then warm (the stamped
	// one-session path: the stamp is not rewritten).
	require.NoError(t, os.RemoveAll(filepath.Join(home, ".cache")))
	res = run.Run(context.Background(), []*Host{h})
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	st1, err := os.Stat(filepath.Join(dir, stampName))
	require.NoError(t, err)
	res = run.Run(context.Background(), []*Host{h})
	require.Equal(t, StatusEvaluated, res[0].Status, res[0].Err)
	st2, err := os.Stat(filepath.Join(dir, stampName))
	require.NoError(t, err)
	assert.True(t, os.SameFile(st1, st2), "the warm run took the stamped path")

	// 5. The cache made group-writable after it was stamped (by its owner):
	// the warm binary refuses (its own check of the path), and the full
	// path refuses the host.
	require.NoError(t, exec.Command("chown", fmt.Sprintf("%s:%d", a, bgid), base).Run())
	require.NoError(t, os.Chmod(base, 0o770))
	res = run.Run(context.Background(), []*Host{h})
	require.Equal(t, StatusError, res[0].Status, res[0].Err)
	assert.Contains(t, res[0].Err, base+" is writable by its group or by others (mode 0770")
	noMark("after all")
}
