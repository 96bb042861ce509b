package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// Result is what happened on one host.
type Result struct {
	Host *Host
	// Index is the host's place in the hosts Run was given.
	Index    int
	Status   string // StatusEvaluated once gpuprep ran and answered
	Err      string
	Output   Output
	Attempts int
	Duration time.Duration
	// ConnectionLost: the connection ended under the running command (a
	// reboot, sshd stopped, the network gone): no exit status came.
	ConnectionLost bool
	// CommandTimedOut: the host answered, but the command outlived
	// CommandTimeout.
	CommandTimedOut bool
}

// Runner runs gpuprep on many hosts.
type Runner struct {
	Transport *Transport
	Exec      *Exec
	// Local runs the hosts whose connection is local (Host.Local) on this
	// machine (nil: the defaults of Local).
	Local *Local
	// Parallel is how many hosts are worked on at once (default 32).
	Parallel int
	// Retries is how many more times a connection that failed before the
	// SSH session was up (refused, reset, unreachable) is tried. Auth and
	// host-key failures and timeouts are never retried.
	Retries int
	// Backoff before the first retry (doubled each time; default 500ms).
	Backoff time.Duration
	// CommandTimeout bounds everything after the connection per host (0: none).
	CommandTimeout time.Duration
	// Args returns the gpuprep arguments for a host.
	Args func(h *Host) ([]string, error)
	// Done is called (serialized) as each host finishes. It may take what
	// it needs from r and clear r.Output: Run keeps r, and its output would
	// otherwise be held until every host finished.
	Done func(r *Result, done, total int)
	// Evaluated decides whether an Output counts as evaluated; a non-nil
	// error makes the host's status StatusError with that message.
	Evaluated func(h *Host, o Output) error
	// Remote, when set, runs gpuprep on a host instead of Transport and
	// Exec (a fake fleet, for tests and benchmarks of the coordinator).
	Remote func(ctx context.Context, h *Host, args []string) (Output, error)
}

// Run works through hosts with at most Parallel at once. When ctx ends
// (Ctrl-C), no new host is started, running ones are cancelled, and the
// results of every host, finished or not, are returned in inventory order.
func (r *Runner) Run(ctx context.Context, hosts []*Host) []*Result {
	par := r.Parallel
	if par <= 0 {
		par = 32
	}
	if par > len(hosts) {
		par = len(hosts)
	}
	results := make([]*Result, len(hosts))
	idx := make(chan int)
	var mu sync.Mutex
	done := 0
	finish := func(i int, res *Result) {
		mu.Lock()
		defer mu.Unlock()
		res.Index = i
		results[i] = res
		done++
		if r.Done != nil {
			r.Done(res, done, len(hosts))
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				finish(i, r.one(ctx, hosts[i]))
			}
		}()
	}
feed:
	for i := range hosts {
		select {
		case idx <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(idx)
	wg.Wait()
	for i, res := range results {
		if res == nil {
			results[i] = &Result{Host: hosts[i], Index: i, Status: StatusCancelled, Err: "not started: interrupted"}
		}
	}
	return results
}

func (r *Runner) one(ctx context.Context, h *Host) *Result {
	start := time.Now()
	res := &Result{Host: h}
	defer func() { res.Duration = time.Since(start) }()
	fail := func(err error) *Result { return failed(ctx, res, err) }
	if h.Problem != "" {
		return fail(&HostError{Status: StatusError, Err: errors.New(h.Problem)}) // not contacted
	}
	args, err := r.Args(h)
	if err != nil {
		return fail(err)
	}
	if r.Remote != nil {
		return r.finishRun(ctx, res, h, func(ctx context.Context) (Output, error) { return r.Remote(ctx, h, args) })
	}
	if h.Local {
		return r.oneLocal(ctx, h, args, res)
	}
	backoff := r.Backoff
	if backoff == 0 {
		backoff = 500 * time.Millisecond
	}
	var conn *Conn
	for {
		res.Attempts++
		conn, err = r.Transport.Dial(ctx, h)
		if err == nil {
			break
		}
		if StatusOf(err) != StatusUnreachable || res.Attempts > r.Retries {
			if res.Attempts > 1 {
				err = &HostError{Status: StatusOf(err), Err: fmt.Errorf("%w (after %d attempts)", err, res.Attempts)}
			}
			return fail(err)
		}
		select {
		case <-time.After(backoff):
			backoff *= 2
		case <-ctx.Done():
			return fail(err)
		}
	}
	defer conn.Close()
	return r.finishRun(ctx, res, h, func(cctx context.Context) (Output, error) { return r.Exec.Run(cctx, conn.Client, h, args) })
}

// finishRun runs gpuprep on h (run, under CommandTimeout) and judges what
// came back.
func (r *Runner) finishRun(ctx context.Context, res *Result, h *Host, run func(context.Context) (Output, error)) *Result {
	fail := func(err error) *Result { return failed(ctx, res, err) }
	cctx := ctx
	if r.CommandTimeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, r.CommandTimeout)
		defer cancel()
	}
	out, err := run(cctx)
	res.Output = out
	switch {
	case ctx.Err() != nil:
		return fail(&HostError{Status: StatusCancelled, Err: errors.New("interrupted while running")})
	case cctx.Err() != nil:
		res.CommandTimedOut = true
		return fail(&HostError{Status: StatusTimeout, Err: fmt.Errorf("gpuprep did not finish within %s", r.CommandTimeout)})
	case err != nil:
		res.ConnectionLost = connectionLost(err)
		return fail(err)
	}
	if r.Evaluated != nil {
		if err := r.Evaluated(h, out); err != nil {
			return fail(err)
		}
	}
	res.Status = StatusEvaluated
	return res
}

// failed records err as res's status (cancelled once ctx ended).
func failed(ctx context.Context, res *Result, err error) *Result {
	res.Status, res.Err = StatusOf(err), err.Error()
	if ctx.Err() != nil && res.Status != StatusEvaluated {
		res.Status = StatusCancelled
		res.Err = "interrupted: " + res.Err
	}
	return res
}

// connectionLost says whether err is the SSH connection ending under a
// session: the command's channel closed with no exit status, or the
// connection read EOF, was reset or broke.
func connectionLost(err error) bool {
	var missing *ssh.ExitMissingError
	return errors.As(err, &missing) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
