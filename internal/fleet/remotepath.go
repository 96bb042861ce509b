package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// pathScript prints, NUL-terminated, "UID USER MODE PATH" (MODE: st_mode
// in hex) or "missing - - PATH" for p and each directory above it, lstat
// as stat -c does, then "resolved" and the same for the directory holding
// p as cd -P resolves it (the nearest one that exists), when it differs.
// Only p (quoted) comes from the caller.
func pathScript(p string) string {
	return strings.Join([]string{
		`chain() { x=$1; while :; do if s=$(stat -c '%u %U %f' -- "$x" 2>/dev/null); then printf '%s %s\0' "$s" "$x"; else printf 'missing - - %s\0' "$x"; fi; [ "$x" = / ] && break; x=${x%/*}; [ -n "$x" ] || x=/; done; }`,
		`p=` + Quote(p),
		`chain "$p"`,
		`d=${p%/*}; while [ -n "$d" ] && ! [ -d "$d" ]; do d=${d%/*}; done; [ -n "$d" ] || d=/`,
		`r=$(cd -P -- "$d" 2>/dev/null && pwd -P) || { echo "gpuprep: cannot resolve $d" >&2; exit 96; }`,
		`if [ "$r" != "$d" ]; then printf 'resolved\0'; chain "$r"; fi`,
	}, "\n")
}

// parsePathEntries reads pathScript's answer: the path as given, then the
// resolved one (nil when it was the same).
func parsePathEntries(out []byte) (given, resolved []pathEntry, err error) {
	cur := &given
	for _, rec := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		if string(rec) == "resolved" {
			cur = &resolved
			continue
		}
		f := strings.SplitN(string(rec), " ", 4)
		if len(f) != 4 {
			return nil, nil, fmt.Errorf("unexpected answer %q", rec)
		}
		e := pathEntry{path: f[3]}
		if f[0] == "missing" {
			e.missing = true
		} else {
			uid, err1 := strconv.ParseUint(f[0], 10, 32)
			mode, err2 := strconv.ParseUint(f[2], 16, 32)
			if err1 != nil || err2 != nil {
				return nil, nil, fmt.Errorf("unexpected answer %q", rec)
			}
			e.uid, e.user, e.mode = uint32(uid), f[1], uint32(mode)
		}
		*cur = append(*cur, e)
	}
	if len(given) == 0 {
		return nil, nil, fmt.Errorf("empty answer")
	}
	return given, resolved, nil
}

// verifyPath checks, on the host, that p (a file in the cache, which may
// not exist yet) and every directory above it may be trusted (see
// judgePath): owned by root or the login user uid, writable by no one
// else. Directories that do not exist yet are allowed (gpuprep makes them,
// mode 0700), the resolved path must exist.
func verifyPath(ctx context.Context, c *ssh.Client, p, uid string) error {
	o, err := session(ctx, c, pathScript(p), nil)
	if err != nil {
		return fmt.Errorf("checking %s: %w", p, err)
	}
	if o.ExitCode != 0 {
		return fmt.Errorf("checking %s: exit %d: %s", p, o.ExitCode, strings.TrimSpace(string(o.Stderr)))
	}
	given, resolved, err := parsePathEntries(o.Stdout)
	if err != nil {
		return fmt.Errorf("checking %s: %w", p, err)
	}
	want, err := strconv.ParseUint(uid, 10, 32)
	if err != nil {
		return fmt.Errorf("the login user's uid %q is not a number", uid)
	}
	owners := func(u uint32) bool { return u == 0 || u == uint32(want) }
	if err := judgePath(given, owners, true, true); err != nil {
		return err
	}
	return judgePath(resolved, owners, false, false)
}

// unsafeCacheAdvice is what to do about an unsafe cache path.
const unsafeCacheAdvice = "another user could swap the file between its check and its run as root: " +
	"set gpuprep_cache_dir to a directory only the login user can write (it and every directory above it owned by root or that user, writable by no one else)"

// verifyCachePath is verifyPath, an unsafe path worded for the host's
// error with what to do.
func verifyCachePath(ctx context.Context, c *ssh.Client, file, uid string) error {
	err := verifyPath(ctx, c, file, uid)
	var u *UnsafePathError
	if errors.As(err, &u) {
		return fmt.Errorf("refusing to use %s: %w; %s", path.Clean(file), err, unsafeCacheAdvice)
	}
	return err
}
