package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fuzz targets of the inventory readers. Each checks what holds for any
// input they accept:
//
//	go test ./internal/fleet -run '^$' -fuzz FuzzParseInventory -fuzztime 20s

// fuzzSeeds adds every file under testdata (and testdata/hostile) to f, once
// per inventory format.
func fuzzSeeds(f *testing.F, add func(b []byte)) {
	for _, glob := range []string{"testdata/*", "testdata/hostile/*"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				add(b)
			}
		}
	}
}

// inventoryNames are the file names FuzzParseInventory reads its input as:
// Ansible INI, and YAML (gpuprep's own or Ansible's, by content).
var inventoryNames = []string{"f.ini", "f.yaml", "f"}

// FuzzParseInventory: an accepted inventory has 1 to maxInventoryHosts
// hosts, each with a valid name and address and a TCP port; Ansible's
// formats name each host once; and reading it again gives the same hosts.
func FuzzParseInventory(f *testing.F) {
	fuzzSeeds(f, func(b []byte) {
		for k := range inventoryNames {
			f.Add(b, uint8(k))
		}
	})
	// JSON is YAML: an Ansible inventory in JSON (ansible-inventory --list
	// without _meta) reads as the YAML form.
	f.Add([]byte(`{"all": {"children": {"gpu": {"hosts": {"gpu[01:04]": {"ansible_host": "10.0.0.1", "ansible_port": 2222}}, "vars": {"gpuprep_mode": "vm-vgpu"}}}}}`), uint8(2))
	f.Add([]byte(`{"hosts": [{"name": "gpu-1", "address": "10.0.0.1", "port": 22}]}`), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		name := inventoryNames[int(kind)%len(inventoryNames)]
		inv, err := Parse(name, b)
		if err != nil {
			return
		}
		require.NotEmpty(t, inv.Hosts)
		require.LessOrEqual(t, len(inv.Hosts), maxInventoryHosts)
		seen := map[string]bool{}
		for _, h := range inv.Hosts {
			require.Empty(t, hostNameProblem(h.Name), "%q", h.Name)
			require.True(t, validAddress(h.Address), "%q", h.Address)
			require.True(t, h.Port >= 0 && h.Port <= 65535, "%d", h.Port)
			if inv.Format != "gpuprep" {
				require.False(t, seen[h.Name], "host %q twice", h.Name)
			}
			seen[h.Name] = true
		}
		again, err := Parse(name, b)
		require.NoError(t, err)
		require.Equal(t, inv, again)
	})
}

// FuzzExpandRange: a pattern makes at most maxRangeHosts names, none longer
// than the pattern, none holding a range's brackets where the pattern
// holds none, and a pattern without '[' is its one name.
func FuzzExpandRange(f *testing.F) {
	for _, s := range []string{"n[08:10]-[a:b]", "n[1:5:2]", "n[5:1]", "gpu[001:128]", "[a:Z]", "x[:3]", "n[0:99]-[0:99]-[0:99]", "h[1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pat string) {
		if len(pat) > maxHostPattern {
			return // addHosts refuses it before expanding
		}
		names, err := expandRange(pat)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(names), maxRangeHosts+1)
		if !strings.Contains(pat, "[") {
			require.Equal(t, []string{pat}, names)
		}
		for _, n := range names {
			require.LessOrEqual(t, len(n), len(pat), "%q from %q", n, pat)
		}
	})
}

// FuzzPyLiteral: the value read from an INI variable is never much longer
// than its text (a hex or binary integer written in decimal, a float's
// repr), and reading is deterministic.
func FuzzPyLiteral(f *testing.F) {
	for _, s := range []string{"", "'a' 'b'", `r'a\tb'`, "0x10", "1_000", "1e400", "(5)", "None # n", `'\U0001F600'`, "'''tri'ple'''", "123456789012345678901234567890"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := pyLiteral(s)
		require.LessOrEqual(t, len(v), 2*len(s)+24, "%q -> %q", s, v)
		require.Equal(t, v, pyLiteral(s))
	})
}

// FuzzSSHConfig: a config that applies to a host leaves it a valid address
// and port, and applying it again to the same inventory host gives the
// same host. Includes are left out: they would read this machine's files.
func FuzzSSHConfig(f *testing.F) {
	fuzzSeeds(f, func(b []byte) { f.Add(b, "gpu-03.example") })
	f.Add([]byte("Host *\n  HostName %h.corp\n  Port 2222\nMatch host gpu*\n  User x\n"), "gpu-01")
	f.Fuzz(func(t *testing.T, b []byte, alias string) {
		if strings.Contains(strings.ToLower(string(b)), "include") || hostNameProblem(alias) != "" || !validAddress(alias) {
			return
		}
		file, err := parseCfgFile("fuzz_config", b, 0)
		if err != nil {
			return
		}
		cfg := &SSHConfig{root: file}
		h := &Host{Name: alias, Address: alias}
		if err := cfg.Apply(h); err != nil {
			return
		}
		require.True(t, configAddressOK(h.Address), "%q", h.Address)
		require.True(t, h.Port >= 0 && h.Port <= 65535, "%d", h.Port)
		h2 := &Host{Name: alias, Address: alias}
		require.NoError(t, cfg.Apply(h2))
		require.Equal(t, h, h2)
	})
}
