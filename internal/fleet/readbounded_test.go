package fleet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// An Include of a file that never ends (/dev/zero) is refused after 1 MiB.
func TestSSHConfigIncludeBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	cfg := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(cfg, []byte("Host a\n  HostName 10.0.0.1\nInclude /dev/zero\n"), 0o600))
	_, err := LoadSSHConfig(cfg)
	require.ErrorContains(t, err, cfg+":3: Include: /dev/zero: larger than 1048576 bytes")
	_, err = Load("/dev/zero")
	require.ErrorContains(t, err, "/dev/zero: larger than 67108864 bytes")
}
