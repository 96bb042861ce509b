package fleet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// A host printing more than Exec.MaxStdout is stopped there with an error
// naming it; the coordinator keeps no more than the bound, and the other
// hosts' results are whole.
func TestSSHStdoutBound(t *testing.T) {
	r := newRig(t)
	s := r.env.Start(t, "127.0.0.31")
	sshdtest.Trust(t, r.kh, false, s)
	run := r.runner(r.transport())
	const limit = 4 << 10 // a readiness report is about 20 KiB
	run.Exec.MaxStdout = limit
	check := run.Args
	run.Args = func(h *Host) ([]string, error) {
		if h.Name == "quiet" {
			return []string{"--version"}, nil
		}
		return check(h)
	}
	hosts := []*Host{r.host("chatty", s, r.env.User), r.host("quiet", s, r.env.User)}
	for _, warm := range []string{"cold", "warm"} { // the full path, then the stamped one
		res := run.Run(context.Background(), hosts)
		chatty, quiet := res[0], res[1]
		require.Equal(t, StatusError, chatty.Status, "%s: %s", warm, chatty.Err)
		assert.Contains(t, chatty.Err, "gpuprep on host chatty ("+s.Addr+") printed more than 4096 bytes on stdout", warm)
		assert.LessOrEqual(t, len(chatty.Output.Stdout), limit, warm)
		require.Equal(t, StatusEvaluated, quiet.Status, "%s: %s", warm, quiet.Err)
		assert.Regexp(t, `^gpuprep `, string(quiet.Output.Stdout), warm)
	}
}
