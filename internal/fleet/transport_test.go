package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// --accept-new never writes an address known_hosts would read as a
// pattern or a list ("a,*" would trust the key for every host), whatever
// the inventory let through; plain names and addresses are recorded.
func TestAcceptNewRecordsOnlyPlainAddresses(t *testing.T) {
	kh := filepath.Join(t.TempDir(), "known_hosts")
	tr := &Transport{KnownHosts: []string{kh}, AcceptNew: true}
	require.NoError(t, tr.Init())
	key := mustKey(t)
	for _, addr := range []string{
		"a,*:22", "*:22", "gpu?:22", "!gpu1:22", "[a,b]:2222", "[*]:2222",
		"gpu 1:22", "gpu\t1:22", "gpu\n* ssh-ed25519:22", "#gpu1:22", "|1|gpu1:22", "@revoked:22", ":22",
	} {
		err := tr.verify(addr, dummyAddr{}, key)
		require.Error(t, err, "%q", addr)
		assert.Equal(t, StatusError, StatusOf(err), "%q: %v", addr, err)
		assert.Contains(t, err.Error(), "refusing to record", "%q", addr)
	}
	// An address knownhosts cannot split is an error, not an unknown host.
	err := tr.verify("gpu]1:22", dummyAddr{}, key)
	assert.Equal(t, StatusError, StatusOf(err), err)
	_, err = os.Stat(kh)
	assert.True(t, os.IsNotExist(err), "nothing recorded")

	for _, addr := range []string{"gpu-1.example.com:22", "10.0.0.1:2222", "[fe80::1%eth0]:22", "[2001:db8::1]:2222"} {
		require.NoError(t, tr.verify(addr, dummyAddr{}, key), addr)
	}
	fresh := &Transport{KnownHosts: []string{kh}}
	require.NoError(t, fresh.Init())
	for _, addr := range []string{"gpu-1.example.com:22", "10.0.0.1:2222", "[fe80::1%eth0]:22", "[2001:db8::1]:2222"} {
		assert.NoError(t, fresh.verify(addr, dummyAddr{}, key), addr)
		assert.Error(t, fresh.verify("other.example.com:22", dummyAddr{}, key), "only %s was recorded", knownhosts.Normalize(addr))
	}
}

// With no key file named, ssh's default key files (those that exist) are
// offered after the agent's keys, as ssh offers them; a named file, or
// IdentityFile none, keeps them away; named files go before the agent's.
func TestKeyOrderDefaultsAfterAgent(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	require.NoError(t, os.Mkdir(filepath.Join(home, ".ssh"), 0o700))
	rsaPub := sshdtest.WriteKey(t, filepath.Join(home, ".ssh", "id_rsa"), "")
	edPub := sshdtest.WriteKey(t, filepath.Join(home, ".ssh", "id_ed25519"), "")
	sshdtest.WriteKey(t, filepath.Join(home, ".ssh", "id_ecdsa"), "sekrit") // encrypted, not in the agent
	named := filepath.Join(t.TempDir(), "named")
	namedPub := sshdtest.WriteKey(t, named, "")
	keyring := agent.NewKeyring()
	addUnrelatedKeys(t, keyring, 2)
	agentKeys, err := keyring.List()
	require.NoError(t, err)
	tr := &Transport{Agent: keyring.(agent.ExtendedAgent)}
	blobs := func(o offer) []string {
		var out []string
		for _, s := range o.signers {
			out = append(out, string(s.PublicKey().Marshal()))
		}
		return out
	}
	blob := func(k interface{ Marshal() []byte }) string { return string(k.Marshal()) }

	o := tr.signers(identityFileList(nil))
	assert.Equal(t, []string{blob(agentKeys[0]), blob(agentKeys[1]), blob(rsaPub), blob(edPub)}, blobs(o),
		"the agent's keys, then ~/.ssh/id_rsa and id_ed25519 (ssh's order)")
	assert.Equal(t, 2, o.agent)
	assert.True(t, o.agentFirst)
	assert.Contains(t, o.note, "id_ecdsa is encrypted", "an unusable default key is explained when nothing works")
	assert.NotContains(t, o.note, "id_ed25519")

	o = tr.signers(identityFileList([]string{named}))
	assert.Equal(t, []string{blob(namedPub), blob(agentKeys[0]), blob(agentKeys[1])}, blobs(o), "a named file first, no defaults")
	assert.False(t, o.agentFirst)

	o = tr.signers(identityFileList([]string{NoIdentityFile}))
	assert.Equal(t, []string{blob(agentKeys[0]), blob(agentKeys[1])}, blobs(o), "IdentityFile none: the agent's keys only")

	tr = &Transport{}
	o = tr.signers(identityFileList(nil))
	assert.Equal(t, []string{blob(rsaPub), blob(edPub)}, blobs(o), "no agent: the default files")
	assert.Equal(t, 0, o.agent)
}

// A connection that ends under a command is told from other failures by
// the error's type, not its text.
func TestConnectionLost(t *testing.T) {
	for _, err := range []error{
		&ssh.ExitMissingError{}, fmt.Errorf("probe: %w", io.EOF), io.ErrUnexpectedEOF,
		&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		fmt.Errorf("upload: %w", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}),
		net.ErrClosed,
	} {
		assert.True(t, connectionLost(err), "%v", err)
	}
	for _, err := range []error{
		errors.New("EOF"), errors.New("connection reset by peer"), &ssh.ExitError{},
		fmt.Errorf("sudo -n: a password is required"), context.DeadlineExceeded,
	} {
		assert.False(t, connectionLost(err), "%v", err)
	}
}

// known_hosts entries match host names without regard to case, as in
// OpenSSH: a plain entry written in capitals matches the lower-case name
// gpuprep (like ssh) looks up, and a changed key is reported against the
// file itself, not the lower-cased copy it was read from.
func TestKnownHostsMatchWithoutCase(t *testing.T) {
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	key, other := mustKey(t), mustKey(t)
	require.NoError(t, os.WriteFile(kh, []byte("# fleet\n"+
		knownhosts.Line([]string{"GPU1.Example.COM"}, key)+"\n"+
		"@cert-authority *.Rack.Example "+string(ssh.MarshalAuthorizedKey(other))+
		knownhosts.Line([]string{knownhosts.HashHostname("gpu2.example.com")}, key)+"\n"), 0o600))
	before, err := os.ReadFile(kh)
	require.NoError(t, err)
	tr := &Transport{KnownHosts: []string{kh}}
	require.NoError(t, tr.Init())
	assert.NoError(t, tr.verify("gpu1.example.com:22", dummyAddr{}, key))
	assert.NoError(t, tr.verify("gpu2.example.com:22", dummyAddr{}, key), "a hashed entry")
	err = tr.verify("gpu1.example.com:22", dummyAddr{}, other)
	require.Error(t, err)
	assert.Equal(t, StatusHostKeyChanged, StatusOf(err), err.Error())
	assert.Contains(t, err.Error(), kh+":2", "the file and line of the entry")
	after, err := os.ReadFile(kh)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the file itself is not changed")

	low, changed := lowerKnownHostPatterns([]byte("A,B ssh-ed25519 AAAA C\n|1|x= ssh-rsa K\n  @revoked GPU ssh-ed25519 Q\n#X Y\n"))
	assert.True(t, changed)
	assert.Equal(t, "a,b ssh-ed25519 AAAA C\n|1|x= ssh-rsa K\n  @revoked gpu ssh-ed25519 Q\n#X Y\n", string(low))
}

// ssh dials names in lower case and IP addresses as written (an IPv6
// zone is an interface name, which has case).
func TestSSHHostCase(t *testing.T) {
	for in, want := range map[string]string{"GPU-1.Example": "gpu-1.example", "fe80::1%Eth0": "fe80::1%Eth0", "FE80::AB": "FE80::AB", "10.0.0.1": "10.0.0.1"} {
		assert.Equal(t, want, sshHostCase(in), in)
	}
}

// With no key anywhere, the error names the flag by the name fleet gives
// it (-i is fleet's --inventory) and the other places a key may come from;
// nothing is dialled.
func TestNoUsableKeyNamesTheFlags(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	tr := &Transport{KnownHosts: []string{filepath.Join(t.TempDir(), "known_hosts")}, ConnectTimeout: time.Second}
	require.NoError(t, tr.Init())
	_, err := tr.Dial(context.Background(), &Host{Name: "h", Address: "192.0.2.1", Port: 22, User: "u"})
	require.Error(t, err)
	assert.Equal(t, StatusAuthFailed, StatusOf(err), err.Error())
	assert.Contains(t, err.Error(), "give one with --identity, a key file in the inventory")
	assert.NotContains(t, err.Error(), "-i/")
}
