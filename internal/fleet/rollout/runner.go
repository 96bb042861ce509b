package rollout

import (
	"context"
	"time"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

// Job is one gpuprep command line run on a set of hosts.
type Job struct {
	Args           ArgsFunc
	Parallel       int // hosts at once
	Retries        int // see fleet.Runner
	CommandTimeout time.Duration
	Done           func(r *fleet.Result, done, total int) // as each host finishes; may be nil
}

// Runner runs a Job on hosts and returns each host's result, in the
// hosts' order (as fleet.Runner.Run: when ctx ends, hosts not started
// are StatusCancelled).
type Runner interface {
	Run(ctx context.Context, job Job, hosts []*fleet.Host) []*fleet.Result
}

// SSH runs jobs over SSH with fleet.Runner.
type SSH struct {
	Transport *fleet.Transport
	Exec      *fleet.Exec
}

// Run implements Runner.
func (s SSH) Run(ctx context.Context, job Job, hosts []*fleet.Host) []*fleet.Result {
	r := &fleet.Runner{Transport: s.Transport, Exec: s.Exec, Parallel: job.Parallel, Retries: job.Retries,
		CommandTimeout: job.CommandTimeout, Args: job.Args, Done: job.Done}
	return r.Run(ctx, hosts)
}
