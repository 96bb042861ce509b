package fleet

import (
	"bytes"
	"errors"
	"strconv"
	"syscall"
)

// Where no sudo stands between the shell and the binary (a root login,
// --no-sudo), the shell opens the binary on file descriptor 3, hashes it
// through that descriptor and executes /proc/self/fd/3: the file the
// kernel runs is the one hashed, whatever happens to its name meanwhile.
// The warm path (stampedScript) executes the opened file the same way and
// the binary compares that file (/proc/self/exe) with its stamp. Under
// sudo this cannot be done (sudo closes the descriptors it did not open;
// a rule names a path): there the file is safe because no user but root
// and the login user can change its path (verifyCachePath), and a sudoers
// rule with the binary's digest (gpuprep fleet sudoers) has sudo itself
// hash the file and execute the descriptor it hashed (sudoers' fdexec).

const (
	// ChangedRC is the exit code of the fd-exec script when the binary's
	// hash, taken through its descriptor, is not the one verified.
	ChangedRC  = 198
	changedMsg = "gpuprep-fleet: the cached binary changed after its check"
	execFD     = "/proc/self/fd/3"
)

// fdExecScript runs bin (SHA-256 sha) with the quoted arguments qargs as
// described above. Without /proc or sha256sum it runs bin by its path.
func fdExecScript(bin, sha, qargs string) string {
	qb := Quote(bin)
	return `if [ -d /proc/self/fd ] && command -v sha256sum >/dev/null 2>&1; then ` +
		`exec 3< ` + qb + `; set -- $(sha256sum <&3); ` +
		`[ "$1" = ` + Quote(sha) + ` ] || { echo ` + Quote(changedMsg) + `" (sha256 $1)" >&2; exit ` + strconv.Itoa(ChangedRC) + `; }; ` +
		`exec ` + execFD + ` ` + qargs + `; fi; exec ` + qb + ` ` + qargs
}

// binaryChanged says whether o is fdExecScript refusing a changed binary.
func binaryChanged(o Output) bool {
	return o.ExitCode == ChangedRC && bytes.Contains(o.Stderr, []byte(changedMsg))
}

var errBinaryChanged = errors.New(changedMsg + " (and before it ran): something is replacing it; see the host's cache directory")

// closeExecFD marks descriptor 3 close-on-exec when it is the running
// binary (it was executed through it): the commands gpuprep starts (a
// driver installer) need no descriptor of it.
func (s self) closeExecFD() {
	var a, b syscall.Stat_t
	if syscall.Fstat(3, &a) != nil || syscall.Stat(s.exe, &b) != nil {
		return
	}
	if a.Dev == b.Dev && a.Ino == b.Ino {
		syscall.CloseOnExec(3)
	}
}
