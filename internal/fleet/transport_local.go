package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// LocalTarget is what a local host (Host.Local) is shown as where an SSH
// host shows host:port: in dry runs, plans and reports.
const LocalTarget = "local"

// Local runs gpuprep for the hosts whose ansible_connection is local: on
// this machine itself, without SSH, as Ansible's local connection plugin
// runs a task on the controller (lib/ansible/plugins/connection/local.py,
// ansible/ansible v2.14.0: it ignores ansible_host, ansible_port and
// ansible_user, and runs as the user running ansible). Commands go
// through the one runner (argv, never a shell), with the rule the SSH
// path keeps: not root, and without NoSudo, gpuprep runs under sudo -n
// (a password prompt would hang a fleet run), and a sudo refusal is that
// host's error, saying what to do.
type Local struct {
	// Runner runs the commands (nil: host.ExecRunner{}, which finds sudo
	// in the system directories, never through $PATH).
	Runner host.StreamRunner
	// Euid is the user gpuprep fleet runs as (nil: os.Geteuid).
	Euid func() int
}

func (l *Local) runner() host.StreamRunner {
	if l == nil || l.Runner == nil {
		return host.ExecRunner{}
	}
	return l.Runner
}

func (l *Local) euid() int {
	if l == nil || l.Euid == nil {
		return os.Geteuid()
	}
	return l.Euid()
}

// localArch is this machine's architecture as uname -m names it (the
// names Binary.Arch holds).
func localArch() string { return unameArch(runtime.GOARCH) }

// RunLocal runs the gpuprep built for this machine's architecture with
// args, on this machine, as Exec.Run does on a host: the binary is hashed
// again first (a file changed since it was loaded is refused, as a cached
// copy that no longer matches would be on a host), the files a command
// needs (Exec.Files) are named by their own absolute paths, stdout is
// bounded by MaxStdout, and sudo -n is used when not root (see Local).
func (e *Exec) RunLocal(ctx context.Context, l *Local, h *Host, args []string) (Output, error) {
	bin := agentFor(e.agents(), localArch())
	if bin == nil {
		return Output{}, fmt.Errorf("this machine is %s but no gpuprep given is built for it (%s): give one for %s with --agent-binary", localArch(), archList(e.agents()), localArch())
	}
	if err := sameHash(bin.Path, bin.SHA256); err != nil {
		return Output{}, err
	}
	args, err := e.localFileArgs(args)
	if err != nil {
		return Output{}, err
	}
	path, err := filepath.Abs(bin.Path)
	if err != nil {
		return Output{}, err
	}
	argv := append([]string{path}, args...)
	sudo := l.euid() != 0 && !e.NoSudo
	if sudo {
		argv = append([]string{"sudo", "-n", "--"}, argv...)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &boundedBuffer{max: e.maxStdout(), over: cancel}
	errb := &limitedBuffer{max: 64 << 10}
	code, err := l.runner().RunStreams(cctx, out, errb, argv...)
	o := Output{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: code}
	switch {
	case out.overflow:
		return o, &OutputLimitError{Host: h.Name + " (" + LocalTarget + ")", Limit: e.maxStdout()}
	case ctx.Err() != nil:
		return o, ctx.Err()
	case err != nil:
		return o, err
	}
	if sudo {
		if msg := sudoProblem(o); msg != "" {
			return o, fmt.Errorf("sudo -n (as %s, on this machine): %s: allow %s to run %s without a password (NOPASSWD; gpuprep fleet sudoers prints the rule pinning this binary by its SHA-256), run gpuprep fleet as root, or pass --no-sudo", localUser(), msg, localUser(), path)
		}
	}
	return o, nil
}

// localFileArgs is args with each file's reference (Exec.Files) replaced
// by the file's absolute path, each file hashed again first; an argument
// with a NUL byte (which no argv can carry) is refused.
func (e *Exec) localFileArgs(args []string) ([]string, error) {
	args = slices.Clone(args)
	for _, f := range e.filesIn(args) {
		if err := sameHash(f.Path, f.SHA256); err != nil {
			return nil, err
		}
		p, err := filepath.Abs(f.Path)
		if err != nil {
			return nil, err
		}
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], f.Ref(), p)
		}
	}
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("argument %q contains a NUL byte", a)
		}
	}
	return args, nil
}

// sameHash refuses a local file whose SHA-256 is no longer sha.
func sameHash(p, sha string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := hashOpenFile(f)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if sum != sha {
		return errors.New(p + ": changed since gpuprep fleet read it (SHA-256 " + sum + ", not " + sha + "); refusing to run it")
	}
	return nil
}

// oneLocal is Runner.one for a local host: no connection to make or
// retry; the command's bound, cancellation and judging are the SSH path's.
func (r *Runner) oneLocal(ctx context.Context, h *Host, args []string, res *Result) *Result {
	res.Attempts = 1
	return r.finishRun(ctx, res, h, func(ctx context.Context) (Output, error) { return r.Exec.RunLocal(ctx, r.Local, h, args) })
}
