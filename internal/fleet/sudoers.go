package fleet

import (
	"fmt"
	"path"
	"strings"
)

// The README's wildcard rule (USER ALL=(root) NOPASSWD:
// /home/USER/.cache/gpuprep/*/gpuprep) lets USER run as root any file USER
// writes at such a path: it grants USER root. A rule with the binary's
// digest (sudoers(5), Digest_Spec: "sha256:" and the hex digest before the
// command) matches only a file with that SHA-256, and sudo then executes
// the very file it hashed (fdexec, by default for commands with a digest),
// so neither USER nor anyone else who can write the cache can get another
// program run as root through it.

// DefaultCacheHome is the cache directory gpuprep uses for user when the
// inventory gives no gpuprep_cache_dir, assuming the usual home directory
// (/root, /home/USER); the hosts' real HOME may differ.
func DefaultCacheHome(user string) string {
	if user == "root" {
		return "/root/.cache/gpuprep"
	}
	return path.Join("/home", user, ".cache", "gpuprep")
}

// SudoersRule is the sudoers line that lets user run, as root and without
// a password, the gpuprep binary with SHA-256 sha (hex) from cacheDir, and
// no other file. The user name and the path are refused when sudoers would
// need them escaped.
func SudoersRule(user, cacheDir, sha string) (string, error) {
	if user == "" || len(user) > 32 || !sudoersWord(user, "._-") || strings.HasPrefix(user, "-") {
		return "", fmt.Errorf("user %q: a sudoers rule is written here only for a plain user name (letters, digits, . _ -, at most 32)", user)
	}
	if aliasLike(user) {
		// sudoers reads ALL as every user and an upper-case word as a
		// User_Alias: the rule would grant root to others
		return "", fmt.Errorf("user %q: sudoers reads it as ALL or a User_Alias, not as one user: refused", user)
	}
	if len(sha) != 64 || !sudoersWord(sha, "") {
		return "", fmt.Errorf("%q is not a SHA-256 in hex", sha)
	}
	if !path.IsAbs(cacheDir) || path.Clean(cacheDir) != cacheDir || !sudoersWord(cacheDir, "/._-+") {
		return "", fmt.Errorf("cache directory %q: a sudoers rule is written here only for a clean absolute path (no . or ..) of letters, digits and / . _ - +", cacheDir)
	}
	bin := path.Join(cacheDir, sha, "gpuprep")
	return fmt.Sprintf("%s ALL=(root) NOPASSWD: sha256:%s %s", user, sha, bin), nil
}

// aliasLike reports whether sudoers would read name as a reserved word or
// an alias (sudoers(5): ALL; an alias NAME is [A-Z][A-Z0-9_]*).
func aliasLike(name string) bool {
	if name[0] < 'A' || name[0] > 'Z' {
		return false
	}
	for _, c := range name {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func sudoersWord(s, extra string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(extra, c)) {
			return false
		}
	}
	return true
}

// SudoersGrant says, for the comment above a rule, what it grants.
const SudoersGrant = `USER may run, as root and without a password, this one gpuprep binary from this path, with any arguments;
sudo hashes the file and runs the descriptor it hashed, and refuses any other file (another build, a file swapped in).
gpuprep as root can change the node (apply, driver installers it is given): grant it to a user you would trust with that.
A new gpuprep build has a new digest: put its line in place before the fleet runs it.`
