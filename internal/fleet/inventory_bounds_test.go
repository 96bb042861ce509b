package fleet

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadHostile(t *testing.T, name string) error {
	t.Helper()
	_, err := Load(filepath.Join("testdata", "hostile", name))
	require.Error(t, err)
	return err
}

// Eleven lines of 10000 hosts each: refused at the line that passes the
// inventory's bound, the 12th (after the [gpu] header).
func TestInventoryHostBound(t *testing.T) {
	err := loadHostile(t, "ranges.ini")
	require.ErrorContains(t, err, "testdata/hostile/ranges.ini:12: ")
	require.ErrorContains(t, err, "the inventory would have 110000 hosts, more than 100000")

	require.ErrorContains(t, loadHostile(t, "nested-ranges.ini"), "testdata/hostile/nested-ranges.ini:2: ")

	// Up to the bound is fine, and linear: a group of 100000 hosts used to
	// take half a minute (a scan of the group per host).
	inv, err := Parse("big.ini", []byte("[gpu]\nn[1:100000]\n"))
	require.NoError(t, err)
	require.Len(t, inv.Hosts, 100000)
	require.Equal(t, []string{"gpu"}, inv.Hosts[99999].Groups)
}

func TestInventoryHostNames(t *testing.T) {
	require.ErrorContains(t, loadHostile(t, "nul-host.ini"), `testdata/hostile/nul-host.ini:3: host: host name "gpu\x0002" holds the control character U+0000`)
	require.ErrorContains(t, loadHostile(t, "nul-host.yaml"), `testdata/hostile/nul-host.yaml:4: `)

	long := strings.Repeat("a", maxHostName+1)
	for file, text := range map[string]string{
		"x.ini":  "[g]\n" + long + " ansible_host=10.0.0.1\n",
		"x.yaml": "all:\n  hosts:\n    " + long + ":\n      ansible_host: 10.0.0.1\n",
		"o.yaml": "hosts:\n  - name: " + long + "\n    address: 10.0.0.1\n",
	} {
		_, err := Parse(file, []byte(text))
		require.ErrorContains(t, err, "host name of 254 bytes: at most 253", file)
	}
	for _, text := range []string{
		"[g]\nh ansible_host=" + long + "\n",              // an address past 253 bytes
		"[g]\nn[1:2]" + strings.Repeat("x", 1<<20) + "\n", // a megabyte pattern, refused before it is expanded
		"[g]\nh\x1b[2Jx ansible_host=10.0.0.1\n",          // a terminal escape
	} {
		_, err := Parse("y.ini", []byte(text))
		require.ErrorContains(t, err, "y.ini:2: ", "%.40q", text)
	}
	// A line separator (INI reads it as a line break, as Python does).
	_, err := Parse("z.yaml", []byte("all:\n  hosts:\n    \"h\\u2028x\":\n      ansible_host: 10.0.0.1\n"))
	require.ErrorContains(t, err, "z.yaml:3: ")
	require.ErrorContains(t, err, "U+2028")
	// Names Ansible users write are fine: dots, dashes, underscores, UTF-8.
	inv, err := Parse("ok.ini", []byte("[g]\ngpu-01.dc_1 ansible_host=10.0.0.1\nnœud ansible_host=10.0.0.2\n"+strings.Repeat("a", maxHostName)+"\n"))
	require.NoError(t, err)
	require.Len(t, inv.Hosts, 3)
}

// Groups that list the group before twice through an alias are 2^29 group
// definitions, mappings that merge the one before twice 2^29 merges;
// reading them stops at maxYAMLWork, naming a line.
func TestInventoryYAMLAliasBound(t *testing.T) {
	err := loadHostile(t, "alias-groups.yaml")
	require.ErrorContains(t, err, "testdata/hostile/alias-groups.yaml:")
	require.ErrorContains(t, err, "YAML aliases make the inventory more than 1000000 groups, host entries and merges to read")
	err = loadHostile(t, "alias-merges.yaml")
	require.ErrorContains(t, err, "testdata/hostile/alias-merges.yaml:")
	require.ErrorContains(t, err, "more than 1000000 groups, host entries and merges")
	// One alias, read once more, is fine.
	inv, err := Parse("a.yaml", []byte("all:\n  children:\n    a: &a\n      hosts:\n        n1:\n    b: *a\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, inv.Hosts[0].Groups)
}
