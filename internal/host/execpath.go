package host

import (
	"os"
	"os/exec"
	"strings"
)

// Programs a command names without a slash are looked up in binDirs (the
// directories of sudo's default secure_path and of a root login shell),
// never in $PATH: gpuprep runs as root, and under sudo without secure_path
// (or over SSH with a user's environment) $PATH is the caller's, whose
// ~/bin would otherwise run as root. /usr/local is in: it is root-owned on
// any system root can trust at all, and sites install their tools there.
//
// lookProgram returns the first dirs/name that is an executable regular
// file, or exec.ErrNotFound (as exec.LookPath reports it, so that callers
// telling "not installed" apart keep working).
func lookProgram(name string, dirs []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range dirs {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// childEnv is this process's environment with PATH replaced by dirs: what
// a command runs (a shell script's own commands, an installer's) is found
// where its own name was.
func childEnv(dirs []string) []string {
	env := []string{"PATH=" + strings.Join(dirs, ":")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}
