package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// StreamRunner is a Runner that also hands a command's standard output and
// error to writers of the caller's (which may bound them) and its exit
// status apart: what a caller needs that judges the output itself, such
// as gpuprep fleet running gpuprep on the machine it runs on. argv only, no
// shell, as Run.
type StreamRunner interface {
	// RunStreams runs argv and returns its exit status; err is non-nil only
	// when the command could not be started or was killed by a signal.
	RunStreams(ctx context.Context, stdout, stderr io.Writer, argv ...string) (int, error)
}

// streamWaitDelay is how long RunStreams waits, once ctx ended and the
// command was asked to stop (SIGTERM), before it is killed.
const streamWaitDelay = 10 * time.Second

// RunStreams implements StreamRunner, finding the program as Run does. When
// ctx ends the command gets SIGTERM (as a remote one does from the SSH
// session), then SIGKILL after streamWaitDelay.
func (e ExecRunner) RunStreams(ctx context.Context, stdout, stderr io.Writer, argv ...string) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("run: empty command")
	}
	prog, err := lookProgram(argv[0], e.dirs())
	if err != nil {
		return -1, fmt.Errorf("%s: %w (looked in %s; $PATH is not used)", argv[0], err, strings.Join(e.dirs(), ":"))
	}
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = childEnv(e.dirs())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = streamWaitDelay
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode(), nil
	}
	return -1, fmt.Errorf("%s: %w", argv[0], err)
}
