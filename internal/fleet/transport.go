package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Host statuses in the fleet report.
const (
	StatusEvaluated      = "evaluated"
	StatusUnreachable    = "unreachable"
	StatusAuthFailed     = "auth-failed"
	StatusHostKeyUnknown = "host-key-unknown"
	StatusHostKeyChanged = "host-key-changed"
	StatusTimeout        = "timeout"
	StatusError          = "error"
	StatusCancelled      = "cancelled" // interrupted (Ctrl-C) before or while it ran
)

// HostError is a per-host failure with its report status.
type HostError struct {
	Status string
	Err    error
}

func (e *HostError) Error() string { return e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

func hostErr(status string, format string, a ...any) *HostError {
	return &HostError{Status: status, Err: fmt.Errorf(format, a...)}
}

// StatusOf returns the report status of err (StatusError when unclassified).
func StatusOf(err error) string {
	var he *HostError
	if errors.As(err, &he) {
		return he.Status
	}
	return StatusError
}

// Transport opens verified SSH connections. Host keys are always checked
// against known_hosts; there is no way to turn that off.
type Transport struct {
	// KnownHosts are the known_hosts files read (OpenSSH format: hashed
	// entries, @cert-authority and @revoked lines). Missing files are skipped.
	KnownHosts []string
	// AcceptNew records the key of a host that is in no known_hosts file
	// into KnownHosts[0] (like StrictHostKeyChecking=accept-new). A changed
	// key is refused regardless.
	AcceptNew bool
	// Identities are private key files tried for every host (-i), before
	// the host's own IdentityFiles.
	Identities []string
	// Agent, when set, signs with the keys it holds (from SSH_AUTH_SOCK):
	// for a key file whose key it holds (an encrypted file needs it), and
	// then with its other keys, after all the key files.
	Agent agent.ExtendedAgent
	// SSHConfig resolves jump hosts.
	SSHConfig *SSHConfig
	// ConnectTimeout bounds the TCP connect plus the SSH handshake of each
	// hop (default 10s).
	ConnectTimeout time.Duration

	once     sync.Once
	initErr  error
	check    ssh.HostKeyCallback
	mu       sync.Mutex
	accepted map[string]ssh.PublicKey
	keys     map[string]keyFile
	caLines  map[string]bool                // "file:line" of @cert-authority lines
	revoked  map[string]knownhosts.KnownKey // @revoked keys by their blob
}

type keyFile struct {
	signer ssh.Signer
	pub    ssh.PublicKey // for encrypted keys
	err    error
}

// AgentFromEnv connects to the ssh-agent at SSH_AUTH_SOCK, or returns nil.
func AgentFromEnv() (agent.ExtendedAgent, io.Closer) {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil
	}
	return agent.NewClient(c), c
}

func (t *Transport) init() error {
	t.once.Do(func() {
		var files []string
		data := map[string][]byte{}
		for _, f := range t.KnownHosts {
			if _, err := os.Stat(f); err == nil {
				files = append(files, f)
				data[f], _ = os.ReadFile(f)
			}
		}
		t.check, t.initErr = newCaselessKnownHosts(files, data)
		if t.initErr != nil {
			t.initErr = fmt.Errorf("known_hosts: %v", t.initErr)
		}
		t.caLines = map[string]bool{}
		t.revoked = map[string]knownhosts.KnownKey{}
		for _, f := range files {
			t.readMarkers(f, data[f])
		}
		t.accepted = map[string]ssh.PublicKey{}
		t.keys = map[string]keyFile{}
		if t.ConnectTimeout == 0 {
			t.ConnectTimeout = 10 * time.Second
		}
	})
	return t.initErr
}

// readMarkers notes the @cert-authority and @revoked lines of a
// known_hosts file: knownhosts does not tell an authority from a host key
// among the keys a host is known by, and checks revocation of a
// certificate only once its authority is trusted.
func (t *Transport) readMarkers(file string, data []byte) {
	for i, l := range strings.Split(string(data), "\n") {
		marker, _, key, _, _, err := ssh.ParseKnownHosts([]byte(l))
		switch {
		case err != nil:
		case marker == "cert-authority":
			t.caLines[fmt.Sprintf("%s:%d", file, i+1)] = true
		case marker == "revoked":
			t.revoked[string(plainKey(key).Marshal())] = knownhosts.KnownKey{Key: key, Filename: file, Line: i + 1}
		}
	}
}

// Init loads the known_hosts files (Dial does it on first use); it reports
// a malformed file early.
func (t *Transport) Init() error { return t.init() }

// hostKeyCallback verifies a host key. Its error, if any, is also stored in
// *rec so the caller can classify a handshake failure exactly.
func (t *Transport) hostKeyCallback(rec *error) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := t.verify(hostname, remote, key)
		*rec = err
		return err
	}
}

func (t *Transport) verify(hostname string, remote net.Addr, key ssh.PublicKey) error {
	norm := knownhosts.Normalize(hostname)
	if err := t.checkRevoked(norm, key); err != nil {
		return err
	}
	t.mu.Lock()
	prev, ok := t.accepted[norm]
	t.mu.Unlock()
	if ok {
		if sameKey(prev, key) {
			return nil
		}
		return hostErr(StatusHostKeyChanged, "host key for %s changed: the server presents %s %s, not the key accepted earlier in this run; refusing to connect (possible man-in-the-middle)", norm, key.Type(), ssh.FingerprintSHA256(key))
	}
	err := t.check(hostname, remote, key)
	if err == nil {
		return nil
	}
	var why string
	if cert, ok := key.(*ssh.Certificate); ok {
		// Like OpenSSH: a certificate no known authority vouches for (or
		// one that fails its checks) is verified as its plain key, which
		// known_hosts may hold or --accept-new may record.
		why = fmt.Sprintf(" (its certificate was not accepted: %v)", strings.TrimPrefix(err.Error(), "ssh: "))
		key = cert.Key
		if err = t.check(hostname, remote, key); err == nil {
			return nil
		}
	}
	fp := ssh.FingerprintSHA256(key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return hostErr(StatusHostKeyChanged, "host key %s %s for %s is marked @revoked in %s:%d; refusing to connect", key.Type(), fp, norm, re.Revoked.Filename, re.Revoked.Line)
	case errors.As(err, &ke) && len(t.plainKeys(ke.Want)) > 0:
		return hostErr(StatusHostKeyChanged, "HOST KEY CHANGED for %s: the server presents %s %s%s but known_hosts has %s; refusing to connect (possible man-in-the-middle). If the host was reinstalled, remove the old entry (ssh-keygen -R %s) and verify the new key", norm, key.Type(), fp, why, describeKnown(t.plainKeys(ke.Want)), norm)
	case errors.As(err, &ke):
		if !t.AcceptNew {
			return hostErr(StatusHostKeyUnknown, "host key for %s is not in known_hosts: the server presents %s %s%s; verify it and add it (ssh-keyscan / ssh once), or rerun with --accept-new to trust and record first contact", norm, key.Type(), fp, why)
		}
		return t.record(hostname, key)
	default:
		// knownhosts could not read the address: nothing to check it by.
		return hostErr(StatusError, "checking the host key of %q (%s %s)%s: %v", hostname, key.Type(), fp, why, err)
	}
}

// checkRevoked refuses a key marked @revoked, also when it is the key or
// the authority of a certificate: knownhosts checks a certificate's
// revocation only once its authority is trusted, and a revoked key is a
// key that must not be trusted again, not an unknown one.
func (t *Transport) checkRevoked(norm string, key ssh.PublicKey) error {
	candidates := []ssh.PublicKey{plainKey(key)}
	what := "host key"
	if cert, ok := key.(*ssh.Certificate); ok {
		candidates = append(candidates, cert.SignatureKey)
	}
	for i, k := range candidates {
		r, ok := t.revoked[string(k.Marshal())]
		if !ok {
			continue
		}
		if i == 1 {
			what = "certificate authority"
		}
		return hostErr(StatusHostKeyChanged, "%s %s %s of %s is marked @revoked in %s:%d; refusing to connect", what, k.Type(), ssh.FingerprintSHA256(k), norm, r.Filename, r.Line)
	}
	return nil
}

// describeKnown lists known keys with their type, fingerprint and place.
func describeKnown(want []knownhosts.KnownKey) string {
	var known []string
	for _, w := range want {
		known = append(known, fmt.Sprintf("%s %s (%s:%d)", w.Key.Type(), ssh.FingerprintSHA256(w.Key), w.Filename, w.Line))
	}
	return strings.Join(known, ", ")
}

// plainKey is the key a certificate certifies, or key itself.
func plainKey(key ssh.PublicKey) ssh.PublicKey {
	if cert, ok := key.(*ssh.Certificate); ok {
		return cert.Key
	}
	return key
}

// sameKey compares the plain keys: a key recorded in this run after its
// certificate was not accepted is the same key when the certificate is
// presented again.
func sameKey(a, b ssh.PublicKey) bool {
	return bytes.Equal(plainKey(a).Marshal(), plainKey(b).Marshal())
}

// record trusts key for hostname (host:port) from now on and appends it
// to KnownHosts[0].
func (t *Transport) record(hostname string, key ssh.PublicKey) error {
	norm := knownhosts.Normalize(hostname)
	if err := recordable(hostname); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, ok := t.accepted[norm]; ok {
		if sameKey(prev, key) {
			return nil
		}
		return hostErr(StatusHostKeyChanged, "host key for %s changed during this run; refusing to connect", norm)
	}
	if len(t.KnownHosts) == 0 {
		return hostErr(StatusHostKeyUnknown, "host key for %s is unknown and there is no known_hosts file to record it in", norm)
	}
	file := t.KnownHosts[0]
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return hostErr(StatusError, "recording host key: %v", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return hostErr(StatusError, "recording host key: %v", err)
	}
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{norm}, key))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return hostErr(StatusError, "recording host key: %v", err)
	}
	t.accepted[norm] = key
	return nil
}

// knownHostsSyntax are the characters known_hosts reads as patterns
// (*, ?, !), lists (,), the bracketed [host]:port form or field
// separators (whitespace).
const knownHostsSyntax = ",*?![]"

// recordable refuses a host name that known_hosts would not read back as
// that one host: a name such as "a,*" would be recorded as a pattern list
// trusting the key for every host. The inventory rejects such addresses
// too; the recorder must never depend on that.
func recordable(hostname string) error {
	host, _, err := net.SplitHostPort(hostname)
	if err != nil {
		return hostErr(StatusError, "refusing to record the host key of %q in known_hosts: not a host:port address (%v)", hostname, err)
	}
	if why := unrecordable(host); why != "" {
		return hostErr(StatusError, "refusing to record the host key of %q in known_hosts: %s; fix the host's address in the inventory", host, why)
	}
	return nil
}

// unrecordable says why known_hosts would misread host, or "".
func unrecordable(host string) string {
	bad := func(r rune) bool {
		return strings.ContainsRune(knownHostsSyntax, r) || unicode.IsSpace(r) || unicode.IsControl(r)
	}
	switch i := strings.IndexFunc(host, bad); {
	case host == "":
		return "the address is empty"
	case i >= 0:
		return fmt.Sprintf("the address contains %q, which known_hosts reads as a pattern or separator (any of %s or whitespace)", []rune(host[i:])[0], knownHostsSyntax)
	case strings.ContainsRune("#|@", rune(host[0])):
		return fmt.Sprintf("known_hosts reads a line starting with %q as a comment, a hashed name or a marker", host[0])
	}
	return ""
}

// plainKeys drops the @cert-authority keys that knownhosts lists among
// the keys a host is known by.
func (t *Transport) plainKeys(want []knownhosts.KnownKey) []knownhosts.KnownKey {
	var out []knownhosts.KnownKey
	for _, w := range want {
		if !t.caLines[fmt.Sprintf("%s:%d", w.Filename, w.Line)] {
			out = append(out, w)
		}
	}
	return out
}

var certAlgos = []string{
	ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
	ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01, ssh.CertAlgoRSAv01,
}

// knownKeyAlgorithms returns the host key algorithms to offer for
// hostport: first those of the keys known_hosts holds for it (certificates
// first when an authority covers it), so that the server presents a key we
// can check (a server with an ed25519 and an RSA key whose RSA key alone
// is recorded must not look "changed"); then all the others, so that a
// server with none of those keys still presents one and verify tells a
// changed key (or an unknown one, when only an authority covers the host)
// instead of the negotiation failing. Nil: nothing recorded: defaults.
func (t *Transport) knownKeyAlgorithms(hostport string) []string {
	err := t.check(hostport, dummyAddr{}, probeKey{})
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algos []string
	if len(t.plainKeys(ke.Want)) < len(ke.Want) {
		algos = append(algos, certAlgos...)
	}
	for _, w := range t.plainKeys(ke.Want) {
		switch w.Key.Type() {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, w.Key.Type())
		}
	}
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		if !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	return algos
}

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "0.0.0.0:0" }

// probeKey is a key no host has: checking it yields the recorded keys.
type probeKey struct{}

func (probeKey) Type() string                            { return "gpuprep-probe" }
func (probeKey) Marshal() []byte                         { return []byte("gpuprep-probe") }
func (probeKey) Verify(_ []byte, _ *ssh.Signature) error { return errors.New("probe") }

// offer is what a hop authenticates with.
type offer struct {
	signers []ssh.Signer
	agent   int // how many of them are the agent's other keys
	// agentFirst: the agent's keys come before the key files (ssh's
	// default files, offered after the agent's keys).
	agentFirst bool
	note       string // keys that could not be used (encrypted and not in the agent)
}

// signers returns the keys to offer: the key files (in order) first, each
// through the agent's signer when the agent holds the same key (how an
// encrypted file is used), then the agent's other keys. sshd ends the
// login after MaxAuthTries (6) rejected keys: offering an agent's many
// keys first would never reach the host's own key. (OpenSSH too prefers
// the configured keys the agent holds to its others, but tries a file the
// agent does not hold last, where MaxAuthTries can cut it off.)
//
// defaults are ssh's default key files, used when no key file is named
// (no --identity, IdentityFile or inventory key, and no IdentityFile
// none): offered as ssh offers them, after the agent's keys.
func (t *Transport) signers(files, defaults []string) offer {
	var o offer
	agentSigners := t.agentSigners()
	inAgent := map[string]ssh.Signer{}
	for _, s := range agentSigners {
		inAgent[string(s.PublicKey().Marshal())] = s
	}
	seen := map[string]bool{}
	add := func(s ssh.Signer) bool {
		k := string(s.PublicKey().Marshal())
		if seen[k] {
			return false
		}
		seen[k] = true
		o.signers = append(o.signers, s)
		return true
	}
	var notes []string
	addFiles := func(files []string) {
		for _, f := range files {
			k := t.loadKey(f)
			pub := k.pub
			if k.signer != nil {
				pub = k.signer.PublicKey()
			}
			switch {
			case pub != nil && inAgent[string(pub.Marshal())] != nil:
				add(inAgent[string(pub.Marshal())])
			case k.signer != nil:
				add(k.signer)
			case k.pub != nil:
				notes = append(notes, fmt.Sprintf("key %s is encrypted (passphrase-protected) and ssh-agent does not hold it: run ssh-add %s (gpuprep never asks for passphrases)", f, f))
			case k.err != nil && !os.IsNotExist(errors.Unwrap(k.err)):
				notes = append(notes, k.err.Error())
			}
		}
	}
	addFiles(files)
	for _, s := range agentSigners {
		if add(s) {
			o.agent++
		}
	}
	o.agentFirst = len(files) == 0
	addFiles(defaults)
	o.note = strings.Join(notes, "; ")
	return o
}

// agentSigners are the agent's keys (none without an agent, or when it
// does not answer).
func (t *Transport) agentSigners() []ssh.Signer {
	if t.Agent == nil {
		return nil
	}
	s, err := t.Agent.Signers()
	if err != nil {
		return nil
	}
	return s
}

func (t *Transport) loadKey(file string) keyFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.keys[file]; ok {
		return k
	}
	if t.keys == nil {
		t.keys = map[string]keyFile{}
	}
	var k keyFile
	data, err := os.ReadFile(file)
	if err != nil {
		k.err = fmt.Errorf("key %s: %w", file, err)
	} else {
		s, err := ssh.ParsePrivateKey(data)
		var pm *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			k.pub = pm.PublicKey
			if k.pub == nil {
				// Old PEM format: the public key is in FILE.pub.
				if pubData, err := os.ReadFile(file + ".pub"); err == nil {
					k.pub, _, _, _, _ = ssh.ParseAuthorizedKey(pubData)
				}
				if k.pub == nil {
					k.err = fmt.Errorf("key %s is encrypted and its public key is unknown: add it to ssh-agent (ssh-add %s)", file, file)
				}
			}
		case err != nil:
			k.err = fmt.Errorf("key %s: %v", file, err)
		default:
			k.signer = s
		}
	}
	t.keys[file] = k
	return k
}

// identityFileList splits the key files named for a hop into those to
// offer before the agent's keys and ssh's default files to offer after
// them: the defaults only when no file is named, as in ssh, where
// IdentityFile none (or any IdentityFile, or -i) also keeps them away.
func identityFileList(named []string) (files, defaults []string) {
	if len(named) == 0 {
		return nil, DefaultIdentities()
	}
	for _, f := range named {
		if !strings.EqualFold(f, NoIdentityFile) {
			files = append(files, f)
		}
	}
	return files, nil
}

// NoIdentityFile in a host's key files (IdentityFile none in ssh_config)
// names no file and keeps ssh's default key files from being offered.
const NoIdentityFile = "none"

// DefaultIdentities are the key files ssh tries by default that exist, in
// ssh's order (OpenSSH's security-key, XMSS and DSA defaults are left out:
// gpuprep cannot sign with them).
func DefaultIdentities() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range []string{"id_rsa", "id_ecdsa", "id_ed25519"} {
		p := filepath.Join(home, ".ssh", n)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Conn is an SSH connection to a host, possibly through jump hosts.
type Conn struct {
	*ssh.Client
	hops []*ssh.Client
}

// Close closes the connection and its jump hosts.
func (c *Conn) Close() error {
	err := c.Client.Close()
	for i := len(c.hops) - 1; i >= 0; i-- {
		err = errors.Join(err, c.hops[i].Close())
	}
	return err
}

type hop struct {
	user, addr string
	identities []string
	label      string
}

// Dial connects to h (through its jump hosts), verifying every host key.
func (t *Transport) Dial(ctx context.Context, h *Host) (*Conn, error) {
	if err := t.init(); err != nil {
		return nil, &HostError{Status: StatusError, Err: err}
	}
	var chain []hop
	if h.Jump != "" {
		hops, err := ParseJump(h.Jump, t.SSHConfig)
		if err != nil {
			return nil, &HostError{Status: StatusError, Err: err}
		}
		for _, j := range hops {
			chain = append(chain, hop{user: j.User, addr: joinHostPort(j.Address, j.Port), identities: j.IdentityFiles, label: "jump host " + joinHostPort(j.Address, j.Port)})
		}
	}
	chain = append(chain, hop{user: h.User, addr: h.Target(), identities: h.IdentityFiles})
	conn := &Conn{}
	var via *ssh.Client
	for i, hp := range chain {
		c, err := t.dialHop(ctx, via, hp)
		if err != nil {
			for _, prev := range conn.hops {
				_ = prev.Close() // the dial's error is the one to report; these carried nothing
			}
			if hp.label != "" {
				var he *HostError
				if errors.As(err, &he) {
					return nil, &HostError{Status: he.Status, Err: fmt.Errorf("%s: %w", hp.label, he.Err)}
				}
			}
			return nil, err
		}
		if i < len(chain)-1 {
			conn.hops = append(conn.hops, c)
			via = c
		} else {
			conn.Client = c
		}
	}
	return conn, nil
}

func (t *Transport) dialHop(ctx context.Context, via *ssh.Client, hp hop) (*ssh.Client, error) {
	keys, err := t.hopKeys(hp)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, t.ConnectTimeout)
	defer cancel()
	raw, err := t.dialRaw(ctx, dctx, via, hp)
	if err != nil {
		return nil, err
	}
	var keyErr error
	cfg := &ssh.ClientConfig{
		User:              hp.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(keys.signers...)},
		HostKeyCallback:   t.hostKeyCallback(&keyErr),
		HostKeyAlgorithms: t.knownKeyAlgorithms(hp.addr),
		ClientVersion:     "SSH-2.0-gpuprep",
	}
	// The handshake is bounded by the same deadline; closing the connection
	// unblocks it (a jumped connection has no deadlines of its own).
	stop := context.AfterFunc(dctx, func() { _ = raw.Close() }) // NewClientConn reports the end
	c, chans, reqs, err := ssh.NewClientConn(raw, hp.addr, cfg)
	stopped := stop()
	if err != nil {
		_ = raw.Close() // the handshake's error is the one to report
		return nil, t.handshakeErr(ctx, dctx, hp, keys, keyErr, stopped, err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// hopKeys are the keys offered to hp, or the error saying none is usable.
func (t *Transport) hopKeys(hp hop) (offer, error) {
	keys := t.signers(identityFileList(append(append([]string{}, t.Identities...), hp.identities...)))
	if len(keys.signers) == 0 {
		// fleet's -i is --inventory: name the flag by its long name only
		msg := "no usable key: give one with --identity, a key file in the inventory (identityFile, ansible_ssh_private_key_file), IdentityFile in ssh_config, or ssh-agent (SSH_AUTH_SOCK)"
		if keys.note != "" {
			msg = keys.note
		}
		return keys, hostErr(StatusAuthFailed, "%s", msg)
	}
	return keys, nil
}

// dialRaw opens the TCP connection to hp (through via when set) within
// dctx, its error a HostError saying why not.
func (t *Transport) dialRaw(ctx, dctx context.Context, via *ssh.Client, hp hop) (net.Conn, error) {
	var raw net.Conn
	var err error
	if via == nil {
		var d net.Dialer
		raw, err = d.DialContext(dctx, "tcp", hp.addr)
	} else {
		raw, err = via.DialContext(dctx, "tcp", hp.addr)
	}
	if err == nil {
		return raw, nil
	}
	switch {
	case ctx.Err() != nil:
		return nil, hostErr(StatusCancelled, "cancelled")
	case dctx.Err() != nil || isTimeout(err):
		return nil, hostErr(StatusTimeout, "connect to %s: no answer within %s", hp.addr, t.ConnectTimeout)
	}
	return nil, hostErr(StatusUnreachable, "connect to %s: %v", hp.addr, trimNetErr(err))
}

// handshakeErr is the HostError of a failed SSH handshake with hp: the
// host key's, a cancel, the deadline (stopped false: it closed the
// connection), a login refused, or the connection dropped.
func (t *Transport) handshakeErr(ctx, dctx context.Context, hp hop, keys offer, keyErr error, stopped bool, err error) error {
	switch {
	case keyErr != nil:
		var he *HostError
		if errors.As(keyErr, &he) {
			return he
		}
		return hostErr(StatusError, "%v", keyErr)
	case ctx.Err() != nil:
		return hostErr(StatusCancelled, "cancelled")
	case !stopped || dctx.Err() != nil:
		return hostErr(StatusTimeout, "%s accepted the connection but gave no SSH answer within %s", hp.addr, t.ConnectTimeout)
	}
	return loginErr(hp, keys, err)
}

// loginErr is the HostError of a handshake the server ended: no key
// accepted, too many offered, the connection dropped, or another error.
func loginErr(hp hop, keys offer, err error) error {
	switch {
	case strings.Contains(err.Error(), "unable to authenticate"):
		msg := fmt.Sprintf("%s@%s: the server accepted none of the offered keys", hp.user, hp.addr)
		if keys.note != "" {
			msg += "; " + keys.note
		}
		return hostErr(StatusAuthFailed, "%s", msg)
	case strings.Contains(err.Error(), "Too many authentication failures"):
		return tooManyKeys(hp, keys)
	case isConnDrop(err):
		return hostErr(StatusUnreachable, "%s: connection closed during the SSH handshake: %v", hp.addr, err)
	}
	return hostErr(StatusError, "%s: %v", hp.addr, err)
}

// tooManyKeys explains sshd ending the login after MaxAuthTries rejected
// keys: the right key was never offered, or came too late.
func tooManyKeys(hp hop, keys offer) *HostError {
	order := fmt.Sprintf("%d from key files, then %d more from ssh-agent", len(keys.signers)-keys.agent, keys.agent)
	if keys.agentFirst {
		order = fmt.Sprintf("%d from ssh-agent, then %d from ssh's default key files", keys.agent, len(keys.signers)-keys.agent)
	}
	msg := fmt.Sprintf("%s@%s: the server ended the login after too many rejected keys (sshd MaxAuthTries, 6 by default) before accepting one; %d keys were to be offered (%s): give the host's key with --identity (or IdentityFile), which is offered first, or hold fewer keys in ssh-agent (ssh-add -D, then ssh-add the ones needed)", hp.user, hp.addr, len(keys.signers), order)
	if keys.note != "" {
		msg += "; " + keys.note
	}
	return hostErr(StatusAuthFailed, "%s", msg)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isConnDrop(err error) bool {
	s := err.Error()
	return errors.Is(err, io.EOF) || strings.Contains(s, "EOF") || strings.Contains(s, "connection reset")
}

func trimNetErr(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// newCaselessKnownHosts is knownhosts.New matching host names without
// regard to case, as OpenSSH does (gpuprep looks names up in lower case,
// as ssh does; knownhosts compares patterns as written). A file whose
// plain host patterns have upper-case letters is read from a copy with
// them lower-cased (hashed entries are hashes of lower-case names already);
// the errors name the file itself. data holds each file's content. The
// files and the copies (in $TMPDIR) are the control machine's own, the
// user's known_hosts: os, not host.Root, which is for a node's files.
func newCaselessKnownHosts(files []string, data map[string][]byte) (ssh.HostKeyCallback, error) {
	load := make([]string, 0, len(files))
	orig := map[string]string{}
	for _, f := range files {
		lowered, changed := lowerKnownHostPatterns(data[f])
		if !changed {
			load = append(load, f)
			continue
		}
		tmp, err := os.CreateTemp("", "gpuprep-known_hosts-")
		if err != nil {
			return nil, err
		}
		// knownhosts.New reads the copy at once; one the removal leaves
		// behind holds public host keys only.
		defer func(name string) { _ = os.Remove(name) }(tmp.Name())
		_, werr := tmp.Write(lowered)
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, werr
		}
		load = append(load, tmp.Name())
		orig[tmp.Name()] = f
	}
	check, err := knownhosts.New(load...)
	if err != nil {
		for tmp, f := range orig {
			err = errors.New(strings.ReplaceAll(err.Error(), tmp, f))
		}
		return nil, err
	}
	if len(orig) == 0 {
		return check, nil
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &ke):
			for i, w := range ke.Want {
				if f, ok := orig[w.Filename]; ok {
					ke.Want[i].Filename = f
				}
			}
		case errors.As(err, &re):
			if f, ok := orig[re.Revoked.Filename]; ok {
				re.Revoked.Filename = f
			}
		}
		return err
	}, nil
}

// lowerKnownHostPatterns lower-cases the plain (not hashed) host patterns
// of known_hosts lines, keeping everything else, lines included, as it is.
func lowerKnownHostPatterns(data []byte) ([]byte, bool) {
	lines := strings.SplitAfter(string(data), "\n")
	changed := false
	for i, l := range lines {
		rest := strings.TrimLeft(l, " \t")
		start := len(l) - len(rest)
		if rest == "" || rest[0] == '#' {
			continue
		}
		if rest[0] == '@' { // a marker, then the hosts
			end := strings.IndexAny(rest, " \t")
			if end < 0 {
				continue
			}
			skip := len(rest[end:]) - len(strings.TrimLeft(rest[end:], " \t"))
			start += end + skip
			rest = l[start:]
		}
		if strings.HasPrefix(rest, "|") {
			continue // hashed
		}
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			continue
		}
		if low := strings.ToLower(rest[:end]); low != rest[:end] {
			lines[i] = l[:start] + low + rest[end:]
			changed = true
		}
	}
	return []byte(strings.Join(lines, "")), changed
}
