package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSelectNoMatchSaysTheFlagsGiven: the error names the flags that were
// given, and no empty --group list ("--group []").
func TestSelectNoMatchSaysTheFlagsGiven(t *testing.T) {
	inv, err := Load("testdata/hosts.ini")
	require.NoError(t, err)
	_, err = Select(inv.Hosts, "zzz*", nil)
	require.EqualError(t, err, `no host matches --limit "zzz*"`)
	_, err = Select(inv.Hosts, "gpu-a0*", []string{"rack_b"})
	require.EqualError(t, err, `no host matches --limit "gpu-a0*" and --group rack_b`)

	// an empty --group (--group "$GROUP" with GROUP unset) says so in the
	// user's words: before, it read as a group no host is in
	_, err = Select(inv.Hosts, "", []string{""})
	require.EqualError(t, err, `--group "" names no group (an empty value, an unset variable?): give an inventory group's name, or leave --group out for every host`)
}
