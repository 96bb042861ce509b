package fleet

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// With a binary per architecture, a host runs the one built for the
// architecture it reports, on the full path and on the warm one, and the
// others are never copied to it; with none for it, the host is refused and
// the message says what to give.
func TestSSHPicksBinaryByArch(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.15")
	sshdtest.Trust(t, r.kh, false, s)
	local, err := LoadBinary(r.bin.Path)
	require.NoError(t, err)
	other := elf.EM_AARCH64
	if local.Arch == "aarch64" {
		other = elf.EM_X86_64
	}
	foreign := fakeELF(t, filepath.Join(t.TempDir(), "gpuprep-foreign"), other, "never run")
	cache := filepath.Join(r.env.Home[r.env.User], ".cache", "gpuprep")
	require.NoError(t, os.RemoveAll(filepath.Join(cache, r.bin.SHA256)))

	run := r.runner(r.transport())
	run.Exec = &Exec{Binaries: []*Binary{foreign, r.bin}} // the foreign one first
	h := []*Host{r.host("arch", s, r.env.User)}
	var stamped os.FileInfo
	for _, pass := range []string{"full path", "warm path"} {
		res := run.Run(context.Background(), h)
		require.Equal(t, StatusEvaluated, res[0].Status, "%s: %v", pass, res[0].Err)
		assert.Contains(t, string(res[0].Output.Stdout), `"kind": "ReadinessReport"`, pass)
		st, err := os.Stat(filepath.Join(cache, r.bin.SHA256, stampName))
		require.NoError(t, err, "%s: the host's own binary is cached and stamped", pass)
		if stamped != nil {
			assert.True(t, os.SameFile(stamped, st), "the warm run took the one-session path (the full path stamps anew)")
		}
		stamped = st
		_, err = os.Stat(filepath.Join(cache, foreign.SHA256))
		assert.True(t, os.IsNotExist(err), "%s: the %s binary is never copied to a %s host", pass, foreign.Arch, local.Arch)
	}

	run.Exec = &Exec{Binaries: []*Binary{foreign}}
	res := run.Run(context.Background(), h)
	require.NotEqual(t, StatusEvaluated, res[0].Status)
	assert.Contains(t, res[0].Err, "no gpuprep given is built for it")
	assert.Contains(t, res[0].Err, AgentName(local.Arch))
}
