package fleet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh/knownhosts"
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
