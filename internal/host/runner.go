package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Runner runs a command given as argv. No implementation passes anything
// through a shell, so values from inventories or flags cannot inject commands.
type Runner interface {
	// Run runs argv and returns its standard output. A non-zero exit is an
	// error that carries the command's standard error.
	Run(ctx context.Context, argv ...string) ([]byte, error)
}

// ErrNoCommands is returned by NoRunner: commands are not run against a
// host root that is not the live system, since they would see the wrong host.
var ErrNoCommands = errors.New("commands are not run against a host root that is not /")

// ExecRunner runs commands on this machine. A program named without a
// slash is found in the system directories, never through $PATH, and every
// command gets those as its PATH (see lookProgram).
type ExecRunner struct {
	// Dirs, when not nil, replaces the system directories: for tests
	// that run fake tools, never set by gpuprep itself.
	Dirs []string
}

func (e ExecRunner) dirs() []string {
	if e.Dirs != nil {
		return e.Dirs
	}
	return binDirs
}

// Run implements Runner.
func (e ExecRunner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("run: empty command")
	}
	prog, err := lookProgram(argv[0], e.dirs())
	if err != nil {
		return nil, fmt.Errorf("%s: %w (looked in %s; $PATH is not used)", argv[0], err, strings.Join(e.dirs(), ":"))
	}
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = childEnv(e.dirs())
	// In a process group of its own: a Ctrl-C on the terminal reaches
	// gpuprep, which finishes the change in progress (an initramfs being
	// written, an installer), and not the command in the middle of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return out, fmt.Errorf("%s: %w: %s", argv[0], err, msg)
		}
		return out, fmt.Errorf("%s: %w", argv[0], err)
	}
	return out, nil
}

// NoRunner refuses every command.
type NoRunner struct{}

// Run implements Runner.
func (NoRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), ErrNoCommands)
}

// DefaultRunner is the runner that fits root: commands run only on the live host.
func DefaultRunner(r *Root) Runner {
	if r.IsLive() {
		return ExecRunner{}
	}
	return NoRunner{}
}

// ChrootRunner runs commands inside a host root that is not "/" (a scratch
// install, a mounted node disk), as `chroot DIR argv...`.
type ChrootRunner struct{ Dir string }

// Run implements Runner.
func (c ChrootRunner) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return ExecRunner{}.Run(ctx, append([]string{"chroot", c.Dir}, argv...)...)
}

// FakeRunner records commands and answers them from Responses (keyed by the
// command line joined with spaces); unknown commands succeed with no output
// unless Strict is set. For unit tests.
type FakeRunner struct {
	Calls     [][]string
	Responses map[string]FakeResponse
	Strict    bool
}

// FakeResponse is a canned answer.
type FakeResponse struct {
	Out []byte
	Err error
}

// Run implements Runner.
func (f *FakeRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	f.Calls = append(f.Calls, append([]string(nil), argv...))
	if r, ok := f.Responses[strings.Join(argv, " ")]; ok {
		return r.Out, r.Err
	}
	if f.Strict {
		return nil, fmt.Errorf("%s: no canned response", strings.Join(argv, " "))
	}
	return nil, nil
}

// ShellQuote shows argv as a shell command line, for people: dry runs,
// plans and logs. (Commands themselves are never run through a shell.)
func ShellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>()*?[]#~!{}") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

// OutputTail is the end of a failed command's output for an error message:
// "" when it printed nothing, else a new line and at most its last 2000
// bytes.
func OutputTail(out []byte) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		i := len(s) - 2000
		for i < len(s) && !utf8.RuneStart(s[i]) { // not inside a character
			i++
		}
		s = "…" + s[i:]
	}
	return "\n" + s
}
