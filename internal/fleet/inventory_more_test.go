package fleet

import (
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An address is written into known_hosts (--accept-new) as a host pattern
// list: ',' '*' '?' '!' '[]' and ':' outside an IPv6 address would let an
// inventory record a key that is then trusted for another host.
func TestInventoryAddressIsHostNameOrIP(t *testing.T) {
	parseErrors(t, []badInventory{
		{"x.ini", "victim ansible_host=victim.corp,x.attacker.example\n",
			`x.ini:1: ansible_host: host "victim": "victim.corp,x.attacker.example" is not a host name or IP address`},
		{"x.ini", "[g]\nv\n[g:vars]\nansible_ssh_host=*.corp\n", `x.ini:4: ansible_ssh_host: host "v": "*.corp"`},
		{"x.ini", "v ansible_host=victim.cor?\n", `x.ini:1: ansible_host: host "v"`},
		{"x.ini", "v ansible_host=!victim.corp\n", `x.ini:1: ansible_host: host "v"`},
		{"x.ini", "v ansible_host=[victim.corp]\n", `x.ini:1: ansible_host: host "v"`},
		{"x.ini", "v ansible_host=victim.corp:22\n", `x.ini:1: ansible_host: host "v"`},
		{"x.ini", "v ansible_host=fe80::1%eth0,x\n", `x.ini:1: ansible_host: host "v"`},
		{"x.ini", "v ansible_host=-oProxyCommand=x\n", `x.ini:1: ansible_host: host "v"`},
		{"x.ini", "[g]\nvictim.corp,x.attacker.example\n", `x.ini:2: address: host "victim.corp,x.attacker.example"`},
		{"x.ini", "a:b:c\n", `x.ini:1: address: host "a:b:c"`},
		{"x.ini", "v gpuprep_jump=j@victim.corp,x*.attacker\n", `x.ini:1: gpuprep_jump: host "v": jump "j@victim.corp,x*.attacker": "x*.attacker" is not a host name or IP address`},
		{"x.yaml", "all:\n  hosts:\n    v:\n      ansible_host: 'victim.corp,x'\n", `x.yaml:4: ansible_host: host "v"`},
		{"x.yaml", "hosts:\n  - name: a\n    address: 'victim.corp,x.attacker.example'\n", `x.yaml:2: address: host "a"`},
		{"x.yaml", "hosts:\n  - name: a\n    address: '[10.0.0.1]'\n", `x.yaml:2: address: host "a"`},
		{"x.yaml", "hosts:\n  - 'gpu[1]'\n", `x.yaml:2: address: host "gpu[1]"`},
		{"x.yaml", "hosts:\n  - name: a\n    jump: 'bastion,[*]:22'\n", `x.yaml:2: jump: host "a"`},
	})
}

func TestInventoryAddressForms(t *testing.T) {
	inv, err := Parse("x.yaml", []byte(`hosts:
  - gpu-01.example
  - db_01
  - {name: v4, address: 10.0.0.1}
  - {name: v6, address: "2001:db8::1"}
  - {name: v6b, address: "[::1]"}
  - {name: zone, address: "fe80::1%eth0"}
  - {name: zoneb, address: "[fe80::1%eth0]"}
  - {name: mapped, address: "::ffff:192.0.2.1"}
  - {name: fqdn, address: host.example., jump: "u@[::1]:2200,ssh://j@bastion-1.example:22,b"}
`))
	require.NoError(t, err)
	h := byName(t, inv)
	for name, want := range map[string]string{
		"gpu-01.example": "gpu-01.example:22",
		"db_01":          "db_01:22",
		"v4":             "10.0.0.1:22",
		"v6":             "[2001:db8::1]:22",
		"v6b":            "[::1]:22",
		"zone":           "[fe80::1%eth0]:22",
		"zoneb":          "[fe80::1%eth0]:22",
		"mapped":         "[::ffff:192.0.2.1]:22",
		"fqdn":           "host.example.:22",
	} {
		assert.Equal(t, want, h[name].Target(), name)
	}
}

// writeKey makes HOME a temporary directory holding .ssh/fleet.pem.
func writeKey(t *testing.T) (home, key string) {
	t.Helper()
	home = t.TempDir()
	t.Setenv("HOME", home)
	key = filepath.Join(home, ".ssh", "fleet.pem")
	require.NoError(t, os.MkdirAll(filepath.Dir(key), 0o700))
	require.NoError(t, os.WriteFile(key, []byte("key"), 0o600))
	return home, key
}

func TestInventoryKeyFileTilde(t *testing.T) {
	_, key := writeKey(t)
	for _, tc := range []struct{ file, data string }{
		{"x.ini", "h ansible_ssh_private_key_file=~/.ssh/fleet.pem\n"},
		{"x.ini", "[g]\nh\n[g:vars]\nansible_private_key_file=\"~/.ssh/fleet.pem\"\n"},
		{"x.yaml", "all:\n  hosts:\n    h:\n      ansible_ssh_private_key_file: ~/.ssh/fleet.pem\n"},
		{"x.yaml", "hosts:\n  - name: h\n    identityFile: ~/.ssh/fleet.pem\n"},
		{"x.yaml", "hosts:\n  - name: h\n    identityFile: [~/.ssh/fleet.pem]\n"},
		{"x.yaml", "defaults:\n  identityFile: ~/.ssh/fleet.pem\nhosts: [h]\n"},
	} {
		t.Run(tc.data, func(t *testing.T) {
			inv, err := Parse(tc.file, []byte(tc.data))
			require.NoError(t, err)
			assert.Equal(t, []string{key}, inv.Hosts[0].IdentityFiles)
		})
	}
	inv, err := Parse("x.yaml", []byte("hosts:\n  - {name: h, identityFile: "+key+"}\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{key}, inv.Hosts[0].IdentityFiles, "an absolute path is kept")
}

// A section line may end in a # comment, as Ansible's pattern allows.
func TestInventoryINISectionComment(t *testing.T) {
	inv, err := Parse("x.ini", []byte("[gpus]   # the GPU racks\nh1\n[gpus:vars] #\nansible_user=ops\n"))
	require.NoError(t, err)
	require.Len(t, inv.Hosts, 1)
	assert.Equal(t, []string{"gpus"}, inv.Hosts[0].Groups)
	assert.Equal(t, "ops", inv.Hosts[0].User)
}

// ~name/ is that user's home, as os.path.expanduser and ssh expand it; an
// unknown user is an error.
func TestExpandHomeOfNamedUser(t *testing.T) {
	u, err := user.Current()
	require.NoError(t, err)
	got, err := expandHome("~" + u.Username + "/.ssh/k")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(u.HomeDir, ".ssh/k"), got)
	got, err = expandHome("~" + u.Username)
	require.NoError(t, err)
	assert.Equal(t, filepath.Clean(u.HomeDir), got)
	_, err = expandHome("~gpuprep-no-such-user/k")
	assert.ErrorContains(t, err, `no user "gpuprep-no-such-user"`)
	got, err = expandHome("a/~b")
	require.NoError(t, err)
	assert.Equal(t, "a/~b", got)
}

// A key file an inventory names must exist: the transport passes over key
// files it cannot read.
func TestInventoryKeyFileMissing(t *testing.T) {
	home, _ := writeKey(t)
	// In an Ansible inventory it is that host's problem: the others are read
	// and reached (Ansible fails that host alone, when it connects).
	for _, tc := range []struct{ name, data, want string }{
		{"x.ini", "h ansible_ssh_private_key_file=~/.ssh/nope.pem\nok\n",
			`x.ini:1: ansible_ssh_private_key_file: host "h": key file ` + home + `/.ssh/nope.pem does not exist`},
		{"x.ini", "[g]\nh\n[o]\nok\n\n[g:vars]\nansible_private_key_file=/nonexistent/k\n",
			`x.ini:7: ansible_private_key_file: host "h": key file /nonexistent/k does not exist`},
		{"x.ini", "h ansible_ssh_private_key_file=~\nok\n", `x.ini:1: ansible_ssh_private_key_file: host "h": key file ` + home + ` is not a regular file`},
		{"x.yaml", "all:\n  hosts:\n    h:\n      ansible_ssh_private_key_file: ~/.ssh\n    ok:\n",
			`x.yaml:4: ansible_ssh_private_key_file: host "h": key file ` + home + `/.ssh is not a regular file`},
	} {
		inv, err := Parse(tc.name, []byte(tc.data))
		require.NoError(t, err, tc.data)
		h := byName(t, inv)
		assert.Equal(t, tc.want, h["h"].Problem, tc.data)
		assert.Empty(t, h["h"].IdentityFiles)
		for n, o := range h {
			if n != "h" {
				assert.Empty(t, o.Problem, "host %s of %s", n, tc.data)
			}
		}
	}
	// gpuprep's own inventory names its key files itself: still an error
	parseErrors(t, []badInventory{
		{"x.yaml", "hosts:\n  - name: h\n    identityFile:\n      - ~/.ssh/fleet.pem\n      - ~/.ssh/nope.pem\n",
			`x.yaml:5: hosts[0].identityFile: key file ` + home + `/.ssh/nope.pem does not exist`},
		{"x.yaml", "defaults:\n  identityFile: nope.pem\nhosts: [h]\n", `x.yaml:2: defaults.identityFile: key file nope.pem does not exist`},
	})
}

// Ansible splits a trailing :PORT off a host pattern before expanding its
// ranges (an IPv6 address takes one only as [addr]:port); the port is the
// host's ansible_port, so an explicit ansible_port of the host wins.
func TestInventoryAnsiblePatternPort(t *testing.T) {
	inv, err := Parse("x.ini", []byte(`web[01:02]:2222
solo:2222 ansible_port=2200
[fe80::1]:2201 ansible_user=v6
fe80::2
10.0.0.9:2202

[g]
gp:2203
again:2204
[g:vars]
ansible_port=2299
[h]
again:2205
`))
	require.NoError(t, err)
	h := byName(t, inv)
	for name, want := range map[string]string{
		"web01":    "web01:2222",
		"web02":    "web02:2222",
		"solo":     "solo:2200",
		"fe80::1":  "[fe80::1]:2201",
		"fe80::2":  "[fe80::2]:22",
		"10.0.0.9": "10.0.0.9:2202",
		"gp":       "gp:2203",
		"again":    "again:2204",
	} {
		require.Contains(t, h, name)
		assert.Equal(t, want, h[name].Target(), name)
	}
	assert.Equal(t, "v6", h["fe80::1"].User)
	assert.Equal(t, []string{"g", "h"}, h["again"].Groups, "a host mentioned again joins the group but keeps its first port")

	inv, err = Parse("x.yaml", []byte(`all:
  hosts:
    solo:2222:
    web[01:02]:2223:
    "[::1]:2224":
    pp:2225: {ansible_port: 2200}
`))
	require.NoError(t, err)
	h = byName(t, inv)
	for name, want := range map[string]string{
		"solo":  "solo:2222",
		"web01": "web01:2223",
		"web02": "web02:2223",
		"::1":   "[::1]:2224",
		"pp":    "pp:2200",
	} {
		require.Contains(t, h, name)
		assert.Equal(t, want, h[name].Target(), name)
	}

	parseErrors(t, []badInventory{
		{"x.ini", "[g]\nh:99999\n", `x.ini:2: host: host "h": "99999" is not a TCP port`},
		{"x.yaml", "all:\n  hosts:\n    h:0:\n", `x.yaml:3: all.hosts: host "h": "0" is not a TCP port`},
		{"x.ini", "h:22x\n", `x.ini:1: address: host "h:22x"`},
	})
}

// Inside double quotes a backslash escapes '"' and '\' (shlex, POSIX mode);
// single quotes take everything literally.
func TestInventoryINIQuoting(t *testing.T) {
	for in, want := range map[string][]string{
		`foo="a\"b"`:        {`foo=a"b`},
		`foo="a\\b"`:        {`foo=a\b`},
		`foo="a\\" bar`:     {`foo=a\`, `bar`},
		`foo="a\\\"b"`:      {`foo=a\"b`},
		`foo="a\nb"`:        {`foo=a\nb`},
		`foo='a\"b' x`:      {`foo=a\"b`, `x`},
		`foo='a\'`:          {`foo=a\`},
		`foo="it's" b\ c`:   {`foo=it's`, `b c`},
		`foo="a # b" # c d`: {`foo=a # b`},
	} {
		got, err := splitFields(in, true)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{`foo="a\"`, `foo="a\\\"`, `foo='a`} {
		_, err := splitFields(in, true)
		assert.ErrorContains(t, err, "unterminated", in)
	}

	inv, err := Parse("x.ini", []byte(`h gpuprep_root="/srv/a \"b\"" gpuprep_x="c\\d"`+"\n"))
	require.NoError(t, err)
	assert.Equal(t, `/srv/a "b"`, inv.Hosts[0].Var("gpuprep_root"))
	assert.Equal(t, `c\d`, inv.Hosts[0].Var("gpuprep_x"))
}

// badInventory is an inventory file that must not load, and what its error
// must say.
type badInventory struct{ name, data, want string }

// parseErrors requires each inventory to fail to load with its error.
func parseErrors(t *testing.T, cases []badInventory) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			_, err := Parse(tc.name, []byte(tc.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The ports Ansible dials are YAML 1.1 integers (PyYAML); other text is
// not an integer there and keeps its text.
func TestYAML11Int(t *testing.T) {
	for in, want := range map[string]string{"010": "8", "0x1F": "31", "0b101": "5", "1_000": "1000", "1:20": "80",
		"-010": "-8", "+22": "22", "0": "0", "2222": "2222", "190:20:30": "685230"} {
		got, ok := yaml11Int(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"08", "0000:41:00.0", "1:60", "0x", "1e3", "22.0", "", "ssh", "0:20"} {
		_, ok := yaml11Int(in)
		assert.False(t, ok, in)
	}
}

// YAML alias loops end in an error or, for a merge of a mapping into
// itself, in the mapping (as PyYAML reads it), never in a crash; of two <<
// keys the later wins, of a list the earlier.
func TestAnsibleYAMLAliasLoopsAndMergeOrder(t *testing.T) {
	for _, in := range []string{
		"g: &g\n  children:\n    g: *g\n",
		"g: &g\n  hosts: {h1: }\n  children:\n    k: *g\n",
	} {
		_, err := Parse("x.yaml", []byte(in))
		assert.ErrorContains(t, err, "contains itself", in)
	}
	inv, err := Parse("x.yaml", []byte("g:\n  hosts:\n    h1: &a\n      x: 1\n      <<: *a\n"))
	require.NoError(t, err)
	assert.Equal(t, "1", inv.Hosts[0].Var("x"))

	inv, err = Parse("x.yaml", []byte("g:\n  vars:\n    a: &a {x: a, ansible_user: ua}\n    b: &b {x: b, ansible_user: ub}\n  hosts:\n"+
		"    h1:\n      <<: *a\n      <<: *b\n    h2:\n      <<: [*a, *b]\n"))
	require.NoError(t, err)
	assert.Equal(t, "ub", inv.Hosts[0].User, "two << keys: the later wins")
	assert.Equal(t, "ua", inv.Hosts[1].User, "a list: the earlier wins")
}

// The host variables gpuprep reads (docs/commands/fleet.md) mean the same in every
// inventory format: gpuprep_mode and gpuprep_jump set the host's mode and
// jump host in gpuprep's YAML too, and bad values of each are errors naming
// file, line and field.
func TestGpuprepVarsInEveryFormat(t *testing.T) {
	vars := map[string]string{"gpuprep_mode": "vm-passthrough", "gpuprep_jump": "root@127.0.0.201:41201",
		"gpuprep_select": "0000:41:00.0", "gpuprep_cache_dir": "/tmp/x", "gpuprep_root": "/srv/r"}
	for name, data := range map[string]string{
		"x.yaml": "apiVersion: gpuprep/v1\nkind: Inventory\nhosts:\n  - {name: h1, address: 10.0.0.2, vars: {gpuprep_mode: vm-passthrough, gpuprep_select: \"0000:41:00.0\", gpuprep_jump: \"root@127.0.0.201:41201\", gpuprep_cache_dir: /tmp/x, gpuprep_root: /srv/r}}\n",
		"x.ini":  "h1 ansible_host=10.0.0.2 gpuprep_mode=vm-passthrough gpuprep_select=0000:41:00.0 gpuprep_jump=root@127.0.0.201:41201 gpuprep_cache_dir=/tmp/x gpuprep_root=/srv/r\n",
		"a.yaml": "all:\n  hosts:\n    h1: {ansible_host: 10.0.0.2, gpuprep_mode: vm-passthrough, gpuprep_select: \"0000:41:00.0\", gpuprep_jump: \"root@127.0.0.201:41201\", gpuprep_cache_dir: /tmp/x, gpuprep_root: /srv/r}\n",
	} {
		inv, err := Parse(name, []byte(data))
		require.NoError(t, err, name)
		h := inv.Hosts[0]
		assert.Equal(t, "vm-passthrough", h.Mode, name)
		assert.Equal(t, "root@127.0.0.201:41201", h.Jump, name)
		for k, v := range vars {
			assert.Equal(t, v, h.Var(k), name+" "+k)
		}
	}

	// defaults, host fields and host variables
	inv, err := Parse("d.yaml", []byte(`hosts:
  - {name: a, vars: {gpuprep_mode: container}}
  - {name: b, mode: vm-vgpu}
  - {name: c, vars: {gpuprep_jump: ""}}
  - {name: d, jump: j2}
defaults: {vars: {gpuprep_mode: vm-passthrough, gpuprep_jump: bastion}}
`))
	require.NoError(t, err)
	h := byName(t, inv)
	for name, want := range map[string][2]string{"a": {"container", "bastion"}, "b": {"vm-vgpu", "bastion"}, "c": {"vm-passthrough", ""}, "d": {"vm-passthrough", "j2"}} {
		assert.Equal(t, want[0], h[name].Mode, name)
		assert.Equal(t, want[1], h[name].Jump, name)
		assert.Equal(t, want[0], h[name].Var("gpuprep_mode"), name)
		assert.Equal(t, want[1], h[name].Var("gpuprep_jump"), name)
	}

	parseErrors(t, []badInventory{
		{"x.yaml", "hosts:\n  - name: a\n    vars:\n      gpuprep_mode: vm-passthru\n", `x.yaml:4: hosts[0].vars.gpuprep_mode: host "a": "vm-passthru": want container, vm-passthrough or vm-vgpu`},
		{"x.yaml", "defaults:\n  vars: {gpuprep_mode: gpu}\nhosts: [a]\n", `x.yaml:2: defaults.vars.gpuprep_mode: "gpu": want container`},
		{"x.yaml", "hosts:\n  - {name: a, vars: {gpuprep_jump: 'b,x*'}}\n", `x.yaml:2: hosts[0].vars.gpuprep_jump: host "a": jump "b,x*": "x*" is not a host name or IP address`},
		{"x.yaml", "hosts:\n  - {name: a, mode: container, vars: {gpuprep_mode: vm-vgpu}}\n", `x.yaml:2: hosts[0].vars.gpuprep_mode: host "a": "vm-vgpu" contradicts mode: "container"`},
		{"x.yaml", "hosts:\n  - {name: a, vars: {gpuprep_cache_dir: rel/dir}}\n", `x.yaml:2: hosts[0].vars.gpuprep_cache_dir: host "a": "rel/dir" is not an absolute path`},
		{"x.yaml", "hosts:\n  - {name: a, vars: {gpuprep_select: 'nvidia'}}\n", `x.yaml:2: hosts[0].vars.gpuprep_select: host "a": "nvidia": want a PCI address`},
		{"x.ini", "[g]\na\n[g:vars]\ngpuprep_cache_dir=rel\n", `x.ini:4: gpuprep_cache_dir: host "a": "rel" is not an absolute path`},
		{"x.ini", "a gpuprep_select=10de:zz\n", `x.ini:1: gpuprep_select: host "a": "10de:zz": want a PCI address`},
		{"x.yaml", "g:\n  hosts:\n    a:\n      gpuprep_mode: vm-passthru\n", `x.yaml:4: gpuprep_mode: host "a": "vm-passthru"`},
	})
}
