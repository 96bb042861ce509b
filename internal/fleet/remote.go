package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Quote quotes s for a POSIX shell: always single quotes, with each '
// written as '\”. Nothing inside single quotes is special to sh (no $,
// `, \, newline or glob), so any value stays one literal word.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuoteArgs quotes every argument (see Quote) and joins them with spaces.
// A NUL byte cannot be passed to a remote command and is an error.
func QuoteArgs(argv ...string) (string, error) {
	q := make([]string, len(argv))
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %q contains a NUL byte", a)
		}
		q[i] = Quote(a)
	}
	return strings.Join(q, " "), nil
}

// Binary is the gpuprep executable uploaded to hosts.
type Binary struct {
	Path   string
	SHA256 string // hex
	Arch   string // uname -m of the machines it runs on: x86_64, aarch64, …
	// Dynamic: linked against the C library (a cgo build); it may not run on
	// hosts whose C library differs. CGO_ENABLED=0 builds are static.
	Dynamic bool
}

// LoadBinary hashes an ELF executable (see hashOpenFile) and notes its
// architecture.
func LoadBinary(p string) (*Binary, error) { return loadBinary(p, userHashCache()) }

// loadBinary is LoadBinary with the hash cache c.
func loadBinary(p string, c hashCache) (*Binary, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sum, err := c.hash(f)
	if err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a Linux (ELF) executable: %v", p, err)
	}
	arch := map[elf.Machine]string{
		elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64", elf.EM_386: "i686",
		elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x", elf.EM_RISCV: "riscv64",
	}[ef.Machine]
	if arch == "" {
		arch = ef.Machine.String()
	}
	b := &Binary{Path: p, SHA256: sum, Arch: arch}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			b.Dynamic = true // needs the host's C library (built with cgo)
		}
	}
	return b, nil
}

// Exec is how a host runs gpuprep.
type Exec struct {
	// Binary is the gpuprep hosts run; Binaries, when set, replaces it with
	// one per architecture (at most one each: see LoadAgents), each host
	// getting the one built for the architecture it reports.
	Binary   *Binary
	Binaries []*Binary
	// NoSudo runs gpuprep as the login user even when it is not root.
	NoSudo bool
	// Uploaded is called when the binary was (re-)uploaded to a host.
	Uploaded func(h *Host, reason string)
	// Files are local files commands need on the hosts (a vGPU config, a
	// driver installer), named in the arguments by their Ref: each is
	// uploaded into the host's cache by its SHA-256, like the binary, and
	// its Ref replaced with its path there.
	Files []*File

	// MaxStdout bounds gpuprep's stdout on each host (0: DefaultMaxStdout);
	// a host printing more gets an *OutputLimitError naming it.
	MaxStdout int

	// placedHook, when set (tests), is called once the binary is in place
	// and verified, before it runs: where another user could swap it.
	placedHook func(h *Host, bin string)

	// placed remembers the files (not the binary: it has its stamp)
	// verified on each host during this run (host target + path → the
	// file's identity there: inode, size, modification and change times):
	// a later command on the same host (fleet apply's tries after a reboot)
	// compares the identity instead of hashing a driver installer's hundreds
	// of megabytes again. Any write, replacement or chmod changes it.
	mu     sync.Mutex
	placed map[string]string
}

// wasPlaced returns the identity recorded for dst on h ("" when none).
func (e *Exec) wasPlaced(h *Host, dst string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.placed[h.Target()+"\x00"+dst]
}

func (e *Exec) markPlaced(h *Host, dst, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.placed == nil {
		e.placed = map[string]string{}
	}
	e.placed[h.Target()+"\x00"+dst] = id
}

// identityOf returns dst's identity on the host ("" when it cannot be had).
func identityOf(ctx context.Context, c *ssh.Client, dst string) string {
	o, err := session(ctx, c, `stat -L -c '%i %s %Y %Z' `+Quote(dst), nil)
	if err != nil || o.ExitCode != 0 {
		return ""
	}
	return strings.TrimSpace(string(o.Stdout))
}

// File is a local file to place on hosts (see Exec.Files).
type File struct {
	Path   string
	SHA256 string // hex
}

// LoadFile hashes a local file for Exec.Files (see hashOpenFile).
func LoadFile(p string) (*File, error) { return loadFile(p, userHashCache()) }

// loadFile is LoadFile with the hash cache c.
func loadFile(p string, c hashCache) (*File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	sum, err := c.hash(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &File{Path: p, SHA256: sum}, nil
}

// Ref names the file in a command's arguments, alone or after "=".
func (f *File) Ref() string { return "@gpuprep-file:" + f.SHA256 }

// remoteName is the file's name on the host: its own base name, made safe.
func (f *File) remoteName() string {
	b := []byte(path.Base(filepath.ToSlash(f.Path)))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '+') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte("file"), b...)
	}
	return string(b)
}

// filesIn returns the files whose Ref appears in args.
func (e *Exec) filesIn(args []string) []*File {
	var out []*File
	for _, f := range e.Files {
		for _, a := range args {
			if strings.Contains(a, f.Ref()) {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// Output is what a remote gpuprep run returned.
type Output struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// session runs one command with the default bound on its stdout (see
// sessionMax).
func session(ctx context.Context, c *ssh.Client, cmd string, stdin io.Reader) (Output, error) {
	return sessionMax(ctx, c, cmd, stdin, DefaultMaxStdout)
}

// sessionMax runs one command. On ctx's end the remote command is signalled
// and the session closed. Its stdout is kept up to maxOut bytes: past them
// the command is stopped the same way and the answer is an
// *OutputLimitError; its stderr is cut at 64 KiB.
func sessionMax(ctx context.Context, c *ssh.Client, cmd string, stdin io.Reader, maxOut int) (Output, error) {
	s, err := c.NewSession()
	if err != nil {
		return Output{}, err
	}
	defer s.Close()
	// The closes below only unblock Run, whose error (or the context's,
	// or the buffer's overflow) is the one reported.
	out := &boundedBuffer{max: maxOut, over: func() {
		_ = s.Signal(ssh.SIGTERM)
		_ = s.Close()
	}}
	errb := &limitedBuffer{max: 64 << 10}
	s.Stdout, s.Stderr = out, errb
	if stdin != nil {
		s.Stdin = stdin
	}
	stop := context.AfterFunc(ctx, func() {
		_ = s.Signal(ssh.SIGTERM)
		_ = s.Close()
		_ = c.Close()
	})
	defer stop()
	err = s.Run(cmd)
	o := Output{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	if out.overflow {
		return o, &OutputLimitError{Limit: maxOut}
	}
	if ctx.Err() != nil {
		return o, ctx.Err()
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		o.ExitCode = ee.ExitStatus()
		return o, nil
	}
	return o, err
}

// limitedBuffer keeps the first max bytes written and drops the rest
// (stderr: a diagnosis). Not an embedded bytes.Buffer, whose ReadFrom
// io.Copy would use instead of Write.
type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) Bytes() []byte { return l.buf.Bytes() }

type probe struct {
	uid, arch, home string
}

// probeScript is fixed: no inventory value is part of it.
const probeScript = `printf '%s\n' "$(id -u)" "$(uname -m)" "$HOME"`

func archEqual(a, b string) bool {
	norm := func(s string) string {
		switch s {
		case "amd64":
			return "x86_64"
		case "arm64":
			return "aarch64"
		}
		return s
	}
	return norm(a) == norm(b)
}

// Run makes sure the binary is on the host (uploading it when missing or
// not matching its hash) and runs it with args, under sudo -n when the
// login user is not root. Output past MaxStdout is an error naming h.
func (e *Exec) Run(ctx context.Context, c *ssh.Client, h *Host, args []string) (Output, error) {
	o, err := e.run(ctx, c, h, args)
	var big *OutputLimitError
	if errors.As(err, &big) && big.Host == "" {
		big.Host = h.Name
		if h.Name != h.Target() {
			big.Host += " (" + h.Target() + ")"
		}
	}
	return o, err
}

func (e *Exec) maxStdout() int {
	if e.MaxStdout > 0 {
		return e.MaxStdout
	}
	return DefaultMaxStdout
}

func (e *Exec) run(ctx context.Context, c *ssh.Client, h *Host, args []string) (Output, error) {
	files := e.filesIn(args)
	if len(files) == 0 { // files need the probe's answers (the cache's place)
		if o, ok, err := e.runStamped(ctx, c, h, args); err != nil || ok {
			return o, err
		}
	}
	p, o, err := probeHost(ctx, c)
	if err != nil {
		return o, err
	}
	agent := agentFor(e.agents(), p.arch)
	if agent == nil {
		return o, fmt.Errorf("the host is %s but no gpuprep given is built for it (%s): give one for %s with --agent-binary (make dist builds %s and the others)", p.arch, archList(e.agents()), p.arch, AgentName(p.arch))
	}
	base, err := cacheBase(h, p)
	if err != nil {
		return o, err
	}
	bin, err := e.placeAgent(ctx, c, h, p, agent, base)
	if err != nil {
		return o, err
	}
	args, err = e.placeFiles(ctx, c, h, p, base, files, args)
	if err != nil {
		return o, err
	}
	cmd, err := e.agentCommand(p, bin, agent.SHA256, args)
	if err != nil {
		return o, err
	}
	o, err = sessionMax(ctx, c, cmd, nil, e.maxStdout())
	if err != nil {
		return o, err
	}
	return o, e.agentRunError(o, h, p, bin)
}

// probeHost asks the host for its login user's uid, its machine and HOME.
func probeHost(ctx context.Context, c *ssh.Client) (probe, Output, error) {
	o, err := session(ctx, c, probeScript, nil)
	if err != nil {
		return probe{}, o, fmt.Errorf("probe: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(o.Stdout), "\n"), "\n")
	if o.ExitCode != 0 || len(lines) != 3 {
		return probe{}, o, fmt.Errorf("probe: unexpected answer (exit %d): %q %s", o.ExitCode, o.Stdout, strings.TrimSpace(string(o.Stderr)))
	}
	return probe{uid: lines[0], arch: lines[1], home: lines[2]}, o, nil
}

// cacheBase is the host's cache directory: gpuprep_cache_dir, else
// ~/.cache/gpuprep of the login user; an absolute path either way.
func cacheBase(h *Host, p probe) (string, error) {
	base := h.Var("gpuprep_cache_dir")
	if base == "" {
		if !path.IsAbs(p.home) {
			return "", fmt.Errorf("the login user's HOME (%q) is not an absolute path: set gpuprep_cache_dir", p.home)
		}
		base = path.Join(p.home, ".cache", "gpuprep")
	}
	if !path.IsAbs(base) {
		return "", fmt.Errorf("gpuprep_cache_dir %q is not an absolute path", base)
	}
	return base, nil
}

// placeAgent makes sure the host's cache holds agent (stamped) and returns
// its path there.
func (e *Exec) placeAgent(ctx context.Context, c *ssh.Client, h *Host, p probe, agent *Binary, base string) (string, error) {
	dir := path.Join(base, agent.SHA256)
	bin := path.Join(dir, "gpuprep")
	uploaded, reason, err := e.place(ctx, c, h, p.uid, agent.Path, agent.SHA256, base, dir, bin, true)
	if err != nil {
		return "", err
	}
	if uploaded && e.Uploaded != nil {
		e.Uploaded(h, reason)
	}
	if e.placedHook != nil {
		e.placedHook(h, bin)
	}
	return bin, nil
}

// placeFiles makes sure the host's cache holds files and returns args with
// each file's reference replaced by its path there (args itself unchanged).
func (e *Exec) placeFiles(ctx context.Context, c *ssh.Client, h *Host, p probe, base string, files []*File, args []string) ([]string, error) {
	args = slices.Clone(args)
	for _, f := range files {
		fdir := path.Join(base, "files", f.SHA256)
		dst := path.Join(fdir, f.remoteName())
		if _, _, err := e.place(ctx, c, h, p.uid, f.Path, f.SHA256, path.Join(base, "files"), fdir, dst, false); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], f.Ref(), dst)
		}
	}
	return args, nil
}

// agentCommand is the shell command running bin with args: through sudo
// -n for a login user other than root (unless NoSudo), else through the
// stamp-checking fd exec.
func (e *Exec) agentCommand(p probe, bin, sha string, args []string) (string, error) {
	cmd, err := QuoteArgs(args...)
	if err != nil {
		return "", err
	}
	if e.viaSudo(p) {
		return `exec sudo -n -- ` + Quote(bin) + ` ` + cmd, nil
	}
	return fdExecScript(bin, sha, cmd), nil
}

// viaSudo says whether the agent runs through sudo on the probed host.
func (e *Exec) viaSudo(p probe) bool { return p.uid != "0" && !e.NoSudo }

// agentRunError is what the agent's run says went wrong before gpuprep
// ran: the binary changed under it, or sudo refused.
func (e *Exec) agentRunError(o Output, h *Host, p probe, bin string) error {
	if binaryChanged(o) {
		return errBinaryChanged
	}
	if e.viaSudo(p) {
		if msg := sudoProblem(o); msg != "" {
			return fmt.Errorf("sudo -n (as %s): %s: allow %s to run %s without a password (NOPASSWD; gpuprep fleet sudoers prints the rule pinning this binary by its SHA-256), connect as root, or pass --no-sudo", h.User, msg, h.User, bin)
		}
	}
	return nil
}

func sudoProblem(o Output) string {
	s := string(o.Stderr)
	if o.ExitCode == 127 && strings.Contains(s, "sudo") && len(o.Stdout) == 0 {
		return "sudo is not installed"
	}
	if o.ExitCode != 1 || !strings.HasPrefix(strings.TrimSpace(s), "sudo:") {
		return ""
	}
	for _, m := range []string{"a password is required", "a terminal is required", "not in the sudoers file", "is not allowed to execute", "may not run sudo"} {
		if strings.Contains(s, m) {
			return m
		}
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "sudo:"))
}

// place makes sure dst on the host is the local file src (SHA-256 sha):
// verified by its hash, else uploaded. A file (not the binary, which has
// its stamp) verified on this host earlier in the run is only compared with
// its identity then (see Exec.placed).
// The binary (stamp) is stamped once verified, so that the next run takes
// the one-session path. Before anything, dst and every directory above it
// must be safe (verifyCachePath: root's or the login user uid's, writable
// by no one else), so that no other user can swap it after its check.
func (e *Exec) place(ctx context.Context, c *ssh.Client, h *Host, uid, src, sha, base, dir, dst string, stamp bool) (uploaded bool, reason string, err error) {
	if err := verifyCachePath(ctx, c, dst, uid); err != nil {
		return false, "", err
	}
	if id := e.wasPlaced(h, dst); !stamp && id != "" && identityOf(ctx, c, dst) == id {
		return false, "", nil
	}
	ok, reason, err := e.cached(ctx, c, dst, sha)
	if err != nil {
		return false, "", err
	}
	switch {
	case ok && stamp:
		if _, err := session(ctx, c, stampCmd(dst, dir), nil); err != nil && ctx.Err() != nil {
			return false, "", ctx.Err()
		}
	case !ok:
		if err := e.upload(ctx, c, src, sha, base, dir, dst, stamp); err != nil {
			return false, "", err
		}
	}
	if !stamp { // the binary has its stamp
		e.markPlaced(h, dst, identityOf(ctx, c, dst))
	}
	return !ok, reason, nil
}

// cached reports whether bin exists with the hash sha, via sha256sum on
// the host or, without one, by reading it back.
func (e *Exec) cached(ctx context.Context, c *ssh.Client, bin, sha string) (bool, string, error) {
	q := Quote(bin)
	script := `if [ -f ` + q + ` ]; then if command -v sha256sum >/dev/null 2>&1; then sha256sum < ` + q + `; else echo nohash; fi; else echo missing; fi`
	o, err := session(ctx, c, script, nil)
	if err != nil {
		return false, "", fmt.Errorf("checking the cached copy: %w", err)
	}
	f := strings.Fields(string(o.Stdout))
	if o.ExitCode != 0 || len(f) == 0 {
		return false, "", fmt.Errorf("checking the cached copy: exit %d: %s", o.ExitCode, strings.TrimSpace(string(o.Stderr)))
	}
	sum := f[0]
	switch sum {
	case "missing":
		return false, "not cached", nil
	case "nohash":
		s, err := c.NewSession()
		if err != nil {
			return false, "", err
		}
		defer s.Close()
		r, err := s.StdoutPipe()
		if err != nil {
			return false, "", err
		}
		if err := s.Start("cat " + q); err != nil {
			return false, "", err
		}
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return false, "", err
		}
		_ = s.Wait()
		sum = hex.EncodeToString(h.Sum(nil))
	}
	if sum != sha {
		return false, "cached copy does not match its SHA-256 (" + sum + ")", nil
	}
	return true, "", nil
}

// upload writes the local file src (SHA-256 sha) under a temporary name in
// dir, checks its hash there and links it into place as bin: concurrent
// uploads to a shared home directory never expose a partial file. The
// binary (stamp) records its identity once in place.
func (e *Exec) upload(ctx context.Context, c *ssh.Client, src, sha, base, dir, bin string, stamp bool) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".gpuprep.tmp."+hex.EncodeToString(rnd[:]))
	qb, qd, qt, qbin := Quote(base), Quote(dir), Quote(tmp), Quote(bin)
	mode := "600" // a file for a command to read
	if stamp {
		mode = "700" // the binary
	}
	script := strings.Join([]string{
		`umask 077`,
		`mkdir -p ` + qb,
		`if [ -L ` + qd + ` ] || { [ -e ` + qd + ` ] && [ ! -O ` + qd + ` ]; }; then echo "gpuprep: the cache directory is a symbolic link or belongs to another user" >&2; exit 98; fi`,
		`mkdir -p ` + qd,
		`chmod 700 ` + qd,
		`trap ` + Quote(`rm -f `+qt) + ` EXIT`,
		`trap ` + Quote(`rm -f `+qt+`; exit 1`) + ` HUP INT TERM`,
		// temporary files of uploads killed more than a day ago
		`{ find ` + qd + ` -maxdepth 1 -name '.gpuprep.tmp.*' -mtime +0 -exec rm -f {} + 2>/dev/null || true; }`,
		`cat > ` + qt,
		// the size first: without sha256sum it is the only check (a cut
		// connection ends cat's input early, and cat exits 0)
		`n=$(wc -c < ` + qt + `) && [ "$n" -eq ` + fmt.Sprint(size) + ` ] || { echo "gpuprep: upload incomplete ($n of ` + fmt.Sprint(size) + ` bytes)" >&2; exit 97; }`,
		`if command -v sha256sum >/dev/null 2>&1; then set -- $(sha256sum < ` + qt + `); [ "$1" = ` + Quote(sha) + ` ] || { echo "gpuprep: upload corrupted (sha256 $1)" >&2; exit 97; }; fi`,
		`chmod ` + mode + ` ` + qt,
		// Put it in place with link(2), which never replaces a file: hosts
		// sharing a home upload concurrently, and replacing a binary another
		// host has just started under sudo makes sudo refuse it (sudo
		// compares the inode it matched in sudoers with the one it runs).
		// An existing file is kept when it has the right hash, else replaced.
		`{ ln ` + qt + ` ` + qbin + ` 2>/dev/null || { command -v sha256sum >/dev/null 2>&1 && set -- $(sha256sum < ` + qbin + ` 2>/dev/null) && [ "$1" = ` + Quote(sha) + ` ]; } || mv -f ` + qt + ` ` + qbin + `; }`,
		`rm -f ` + qt,
	}, " && ")
	if stamp {
		script += ` && { ` + stampCmd(bin, dir) + ` || true; }`
	}
	o, err := session(ctx, c, script, f)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if o.ExitCode != 0 {
		return fmt.Errorf("upload to %s failed (exit %d): %s", bin, o.ExitCode, strings.TrimSpace(string(o.Stderr)))
	}
	return nil
}

// stampCmd has the verified binary record its own identity next to it
// (see StampFlag).
func stampCmd(bin, dir string) string {
	return Quote(bin) + ` ` + StampWriteFlag + ` ` + Quote(path.Join(dir, stampName))
}

// runStamped runs the cached binary in one session, asking it to verify its
// stamp first (see StampFlag): no probe, no hash, no upload. ok is false
// when the binary did not confirm its stamp (none, a mismatch, it could not
// be started, sudo refused); the caller then takes the full path, which
// explains any problem. Only the cache directory (quoted) comes from the
// inventory.
//
// The cache directory, the binary and the stamp must belong to the login
// user (test -O: a shared gpuprep_cache_dir cannot get another user's file
// run). A binary written after its stamp (newer modification time: test
// -nt, a shell builtin) is never started; any other change to it (a write in the
// stamp's own instant, a replacement keeping the time, a chmod) is caught
// by the binary's own check before it does anything. The directories
// above were verified safe before the binary was stamped (verifyCachePath:
// no user but root and the login user can change them since), and the
// binary checks them again itself (checkCacheChain). Without sudo the
// shell runs the file it opened and checked (see fdExecScript).
//
// The script forks nothing before the binary (see stampedScript).
func (e *Exec) runStamped(ctx context.Context, c *ssh.Client, h *Host, args []string) (Output, bool, error) {
	base := `"$HOME"/.cache/gpuprep`
	if v := h.Var("gpuprep_cache_dir"); v != "" {
		if !path.IsAbs(v) {
			return Output{}, false, nil // the full path reports it
		}
		base = Quote(v)
	}
	qargs, err := QuoteArgs(args...)
	if err != nil {
		return Output{}, false, err
	}
	script := stampedScript(base, e.agents(), qargs, e.NoSudo, kernelArchFile)
	o, err := sessionMax(ctx, c, script, nil, e.maxStdout())
	var big *OutputLimitError
	if errors.As(err, &big) {
		return o, true, err // it ran: the full path would run it again
	}
	if err != nil {
		return o, false, err
	}
	// The binary prints the marker before it runs the subcommand; without
	// it the subcommand did not run. Anything may come before it (a sudo
	// warning, a shell's start-up output).
	i := bytes.Index(o.Stderr, []byte(StampedMarker))
	if i < 0 {
		return o, false, nil
	}
	o.Stderr = append(o.Stderr[:i:i], o.Stderr[i+len(StampedMarker):]...)
	return o, true, nil
}

// kernelArchFile is where stampedScript reads the host's architecture.
const kernelArchFile = "/proc/sys/kernel/arch"

// stampedScript is runStamped's shell script: base is the cache directory
// as shell text (quoted, or "$HOME"/…), bins the binaries by architecture,
// qargs the quoted arguments, archFile where the host's architecture is
// read (kernelArchFile; tests give another file).
//
// It forks nothing before the binary (each fork costs a host about a
// millisecond and a half): the host's architecture (a binary of another
// architecture must never be started: sudo would run it as a shell script)
// is read from /proc/sys/kernel/arch, uname -m's answer as a file (Linux 6.1
// and later; older kernels fork uname), and a case statement (a builtin)
// picks the cache directory of the binary built for it, or none; whether the user is root from
// the shell's effective UID in /proc/self/status, as id -u would say (the
// read builtin: about a hundred one-byte reads, 0.2 ms; owners of files such
// as "/" were wrong in sandboxes and user namespaces). Without /proc, sudo
// -n runs, which root may use too.
func stampedScript(base string, bins []*Binary, qargs string, noSudo bool, archFile string) string {
	qargs = StampFlag + ` "$d"/` + stampName + ` ` + qargs
	// without sudo, the opened file is what is checked and run (see
	// fdExecScript); a shell that cannot open it exits, and the full path
	// takes over
	direct := `exec 3< "$b"; [ -O ` + execFD + ` ] && ! [ ` + execFD + ` -nt "$d"/` + stampName + ` ] || no; exec ` + execFD + ` ` + qargs
	run := direct
	if !noSudo {
		run = strings.Join([]string{
			`u=; { while read -r k _ e _; do [ "$k" = Uid: ] && { u=$e; break; }; done < /proc/self/status; } 2>/dev/null`,
			`if [ "$u" = 0 ]; then ` + direct + `; else exec sudo -n -- "$b" ` + qargs + `; fi`,
		}, "\n")
	}
	return strings.Join([]string{
		`no() { echo ` + Quote(notStampedMsg) + ` >&2; exit ` + fmt.Sprint(NotStampedRC) + `; }`,
		`case "$HOME" in /*) ;; *) no ;; esac`,
		`{ read -r a < ` + Quote(archFile) + `; } 2>/dev/null || a=$(uname -m)`,
		archCase(base, bins),
		`b="$d"/gpuprep`,
		`[ -f "$b" ] && [ -f "$d"/` + stampName + ` ] && [ ! -L "$d" ] && [ -O "$d" ] && [ -O "$b" ] && [ -O "$d"/` + stampName + ` ] && ! [ "$b" -nt "$d"/` + stampName + ` ] || no`,
		run,
	}, "\n")
}

// archCase sets d, in stampedScript, to the cache directory of the binary
// built for the architecture in $a; another architecture stops the script
// (quoted patterns match literally).
func archCase(base string, bins []*Binary) string {
	var b strings.Builder
	b.WriteString(`case "$a" in `)
	for _, bin := range bins {
		b.WriteString(Quote(bin.Arch) + `) d=` + base + `/` + bin.SHA256 + ` ;; `)
	}
	b.WriteString(`*) no ;; esac`)
	return b.String()
}

// agents are the binaries hosts may run (see Exec.Binaries).
func (e *Exec) agents() []*Binary {
	if len(e.Binaries) > 0 {
		return e.Binaries
	}
	return []*Binary{e.Binary}
}
