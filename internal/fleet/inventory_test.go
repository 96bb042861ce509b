package fleet

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func byName(t *testing.T, inv *Inventory) map[string]*Host {
	t.Helper()
	m := map[string]*Host{}
	for _, h := range inv.Hosts {
		m[h.Name] = h
	}
	return m
}

func TestOwnFormat(t *testing.T) {
	inv, err := Load("testdata/gpuprep.yaml")
	require.NoError(t, err)
	assert.Equal(t, "gpuprep", inv.Format)
	require.Len(t, inv.Hosts, 3)
	h := byName(t, inv)
	assert.Equal(t, &Host{Name: "gpu-01", Address: "10.0.0.11", User: "ops", Mode: "vm-passthrough",
		Groups: []string{"fleet", "rack-a"}, Vars: map[string]string{"gpuprep_root": "/"}, Source: "testdata/gpuprep.yaml:11"}, h["gpu-01"])
	g2 := h["gpu-02"]
	assert.Equal(t, 2222, g2.Port)
	assert.Equal(t, "admin", g2.User)
	assert.Equal(t, "container", g2.Mode)
	assert.Equal(t, "jumper@bastion.example:2200", g2.Jump)
	assert.Equal(t, "/srv/snap", g2.Var("gpuprep_root"))
	assert.Equal(t, "10.0.0.12:2222", g2.Target())
	g3 := h["gpu-03.example"]
	assert.Equal(t, "gpu-03.example", g3.Address)
	assert.Equal(t, "ops", g3.User)
}

func TestBadInventoriesNameFileLineField(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"bad-port.yaml", `testdata/bad-port.yaml:7: hosts[1].port: "twenty-two" is not a TCP port`},
		{"bad-field.yaml", `testdata/bad-field.yaml:5: hosts[0].adress: unknown field`}, //nolint:misspell // the misspelt field is the test
		{"bad-mode.yaml", `testdata/bad-mode.yaml:3: hosts[0].mode: "vm-passthru": want container, vm-passthrough or vm-vgpu`},
		{"bad.ini", `testdata/bad.ini:5: ansible_port: host "gpu-01": "22x" is not a TCP port`},
		{"bad-section.ini", `testdata/bad-section.ini:3: section: [rack_a:hostvars]: unknown section type "hostvars"`},
		{"bad-ansible.yaml", `testdata/bad-ansible.yaml:4: gpu.hostz: unknown group field (want hosts, children, vars)`},
		// YAML syntax errors name the mis-indented line (counted by hand: each
		// file's first line says which), as file:line: like the rest
		{"misindented-less.yaml", `testdata/misindented-less.yaml:8: not valid YAML: did not find expected '-' indicator`},
		{"misindented-more.yaml", `testdata/misindented-more.yaml:7: not valid YAML: mapping values are not allowed in this context`},
		{"misindented-ansible.yaml", `testdata/misindented-ansible.yaml:6: not valid YAML: did not find expected key`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", tc.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMoreBadInventories(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"x.yaml", "hosts:\n  - name: a\n  - name: a\n", `x.yaml:3: name: host "a" already defined at x.yaml:2`},
		{"x.yaml", "hosts:\n  - name: a\n    address: '-oProxyCommand=x'\n", `x.yaml:2: address: host "a"`},
		{"x.yaml", "apiVersion: gpuprep/v2\nhosts: []\n", `x.yaml:1: apiVersion: "gpuprep/v2": want gpuprep/v1`},
		{"x.yaml", "hosts: [\n", `x.yaml:1: not valid YAML: did not find expected node content`},
		{"x.yaml", "- a\n- b\n", `x.yaml:1: not an inventory: want a mapping`},
		{"x.ini", "[a]\nh1 ansible_host\n", `x.ini:2: host: host "h1": "ansible_host": want key=value`},
		{"x.ini", "[a:children]\nnope\n", `x.ini:2: a.children: group "nope" is not defined`},
		{"x.ini", "[a:children]\nb\n[b:children]\na\n", `cycle`},
		{"x.ini", "# nothing\n", `x.ini: no hosts`},
		{"x.ini", "h1 ansible_host='unterminated\n", `x.ini:1: host: unterminated ' quote`},
		{"x.ini", "[a] b\nh1\n", `x.ini:1: section: "[a] b": want [group]`},
		{"x.ini", "[a] ; comment\nh1\n", `x.ini:1: section: "[a] ; comment"`},
		{"x.ini", "[a\nh1\n", `x.ini:1: section: "[a": want [group]`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := Parse(tc.name, []byte(tc.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestAnsibleINI(t *testing.T) {
	inv, err := Load("testdata/hosts.ini")
	require.NoError(t, err)
	assert.Equal(t, "ansible-ini", inv.Format)
	h := byName(t, inv)
	require.Len(t, h, 6)
	b := h["bastion.example"]
	assert.Equal(t, "jump", b.User)
	assert.Equal(t, []string{"ungrouped"}, b.Groups)

	a1 := h["gpu-a01"]
	assert.Equal(t, "gpu-a01", a1.Address)
	assert.Equal(t, "ops", a1.User, "host variables win over group variables")
	assert.Equal(t, "vm-passthrough", a1.Mode)
	assert.Equal(t, []string{"gpu", "rack_a"}, a1.Groups)
	assert.Equal(t, "/srv/roots/a b", a1.Var("gpuprep_root"))
	assert.Contains(t, h, "gpu-a03")

	a10 := h["gpu-a10"]
	assert.Equal(t, "10.0.1.10:2201", a10.Target())
	assert.Equal(t, "fleet", a10.User)
	assert.Equal(t, "vm-vgpu", a10.Mode)

	b1 := h["gpu-b01"]
	assert.Equal(t, "10.0.2.1:2222", b1.Target())
	assert.Equal(t, "container", b1.Mode, "the child group's vars win over the parent's")
	assert.Equal(t, "jump@bastion.example", b1.Jump)
}

func TestAnsibleYAML(t *testing.T) {
	inv, err := Load("testdata/hosts.yaml")
	require.NoError(t, err)
	assert.Equal(t, "ansible-yaml", inv.Format)
	h := byName(t, inv)
	require.Len(t, h, 5)
	assert.Equal(t, "10.9.9.9", h["lonely"].Address)
	assert.Equal(t, "fleet", h["lonely"].User)
	assert.Equal(t, "root", h["gpu-a02"].User)
	assert.Equal(t, "vm-passthrough", h["gpu-a01"].Mode)
	assert.Equal(t, []string{"gpu", "rack_a"}, h["gpu-a01"].Groups)
	assert.Equal(t, "container", h["gpu-b02"].Mode)
	assert.Equal(t, "gpu-b02:2222", h["gpu-b02"].Target())
}

func TestExpandRange(t *testing.T) {
	got, err := expandRange("n[08:10]-[a:b]")
	require.NoError(t, err)
	assert.Equal(t, []string{"n08-a", "n08-b", "n09-a", "n09-b", "n10-a", "n10-b"}, got)
	got, err = expandRange("n[1:5:2]")
	require.NoError(t, err)
	assert.Equal(t, []string{"n1", "n3", "n5"}, got)
	got, err = expandRange("n[5:1]")
	require.NoError(t, err)
	assert.Empty(t, got, "a range counting down is no host, as in Ansible")
	got, err = expandRange("n[:2]")
	require.NoError(t, err)
	assert.Equal(t, []string{"n0", "n1", "n2"}, got)
	got, err = expandRange("n[y:B]")
	require.NoError(t, err)
	assert.Equal(t, []string{"ny", "nz", "nA", "nB"}, got)
	got, err = expandRange("n[9223372036854775800:9223372036854775807:4]")
	require.NoError(t, err)
	assert.Equal(t, []string{"n9223372036854775800", "n9223372036854775804"}, got, "no overflow at the int64 edge")
	got, err = expandRange("n[5:1:-2]")
	require.NoError(t, err)
	assert.Equal(t, []string{"n5", "n3"}, got, "Python's range(5, 2, -2)")
	for _, bad := range []string{"n[0:9223372036854775807:4611686018427387904]0[0:99999999]", "n[01:100]", "n[1]", "n[1:2", "n[a:5]", "n[1:5:0]", "n[1:]", "n[1:1000000]"} {
		_, err = expandRange(bad)
		assert.Error(t, err, bad)
	}
}

func TestSelect(t *testing.T) {
	inv, err := Load("testdata/hosts.ini")
	require.NoError(t, err)
	names := func(hs []*Host) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	hs, err := Select(inv.Hosts, "", nil)
	require.NoError(t, err)
	assert.Len(t, hs, 6)
	hs, err = Select(inv.Hosts, "gpu-a0*", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-a01", "gpu-a02", "gpu-a03"}, names(hs))
	hs, err = Select(inv.Hosts, "gpu,!gpu-a0[12]", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-a03", "gpu-a10", "gpu-b01"}, names(hs))
	hs, err = Select(inv.Hosts, "10.0.*", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-a10", "gpu-b01"}, names(hs))
	hs, err = Select(inv.Hosts, "", []string{"rack_b"})
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu-b01"}, names(hs))
	hs, err = Select(inv.Hosts, "gpu:&rack_a", nil)
	require.NoError(t, err)
	assert.Len(t, hs, 4)
	_, err = Select(inv.Hosts, "", []string{"nosuch"})
	assert.ErrorContains(t, err, `--group "nosuch": no host is in that group`)
	_, err = Select(inv.Hosts, "zzz*", nil)
	assert.ErrorContains(t, err, "no host matches")
	_, err = Select(inv.Hosts, "[", nil)
	assert.ErrorContains(t, err, "--limit")
}

func TestSSHConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg, err := LoadSSHConfig("testdata/ssh_config")
	require.NoError(t, err)
	inv, err := Load("testdata/gpuprep.yaml")
	require.NoError(t, err)
	h := byName(t, inv)

	g3 := h["gpu-03.example"]
	g3.User = "" // as if the inventory gave none
	require.NoError(t, cfg.Apply(g3))
	assert.Equal(t, "cfguser", g3.User)
	assert.Equal(t, 2022, g3.Port)
	assert.Equal(t, []string{filepath.Join(home, ".ssh/fleet_ed25519")}, g3.IdentityFiles)
	assert.Equal(t, "bastion-alias", g3.Jump)
	hops, err := ParseJump(g3.Jump, cfg)
	require.NoError(t, err)
	assert.Equal(t, []JumpHop{{User: "jumpuser", Address: "192.0.2.1", Port: 2200}}, hops)

	g1 := h["gpu-01"]
	require.NoError(t, cfg.Apply(g1))
	assert.Equal(t, "ops", g1.User, "the inventory's user wins over ssh_config")
	Defaults(g1)
	assert.Equal(t, 22, g1.Port)

	hops, err = ParseJump("a@h1:2201,[::1]:22", &SSHConfig{})
	require.NoError(t, err)
	assert.Equal(t, "h1", hops[0].Address)
	assert.Equal(t, 2201, hops[0].Port)
	assert.Equal(t, "::1", hops[1].Address)
	_, err = ParseJump("-oProxyCommand=x", &SSHConfig{})
	assert.Error(t, err)

	missing, err := LoadSSHConfig(filepath.Join(home, "nope"))
	require.NoError(t, err)
	require.NoError(t, missing.Apply(&Host{Name: "x", Address: "x"}))
}

func TestLoadBinaryTellsStaticFromDynamic(t *testing.T) {
	static, err := LoadBinary("/usr/bin/busybox") // Debian's busybox-static in deps; skip otherwise
	if err != nil {
		t.Skip("no /usr/bin/busybox")
	}
	dyn, err := LoadBinary("/bin/sh")
	require.NoError(t, err)
	require.True(t, dyn.Dynamic, "/bin/sh is dynamically linked")
	require.False(t, static.Dynamic || static.Arch == "", "busybox-static is static: %+v", static)
}
