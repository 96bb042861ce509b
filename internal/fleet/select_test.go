package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sshCfgApply applies cfg to a host the inventory knows as address, with
// the inventory's user (if any), and returns it.
func sshCfgApply(t *testing.T, cfg *SSHConfig, address, user string) (*Host, error) {
	t.Helper()
	h := &Host{Name: address, Address: address, User: user}
	return h, cfg.Apply(h)
}

// sshCfgWrite writes an ssh_config file under dir and returns its path.
func sshCfgWrite(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func TestSSHConfigMatchBlocksTheLibraryRejects(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cfg, err := LoadSSHConfig("testdata/sshcfg-match")
	require.NoError(t, err, "Match exec / originalhost / user must not stop every fleet command")

	h, err := sshCfgApply(t, cfg, "gpu-01", "")
	require.NoError(t, err, "a Match exec block that sets only IdentityAgent and ForwardAgent cannot change how gpuprep connects")
	assert.Equal(t, "ops-cfg", h.User)
	assert.Equal(t, 0, h.Port)

	h, err = sshCfgApply(t, cfg, "db-1", "root")
	require.NoError(t, err)
	assert.Equal(t, 2200, h.Port, "Match originalhost db-* user root applies to root@db-1")
	h, err = sshCfgApply(t, cfg, "db-1", "app")
	require.NoError(t, err)
	assert.Equal(t, 0, h.Port, "Match ... user root does not apply to app@db-1")
	assert.Equal(t, "app", h.User)

	h, err = sshCfgApply(t, cfg, "tenant-a", "")
	require.NoError(t, err)
	assert.Equal(t, "10.9.0.5", h.Address)
	assert.Equal(t, "tenant", h.User, "Match host sees the HostName set so far, as ssh does")

	_, err = sshCfgApply(t, cfg, "x.corp", "")
	require.Error(t, err, "the block would set x.corp's ProxyJump if vpn.corp is down: guessing either way is wrong")
	assert.ErrorContains(t, err, "testdata/sshcfg-match:20:")
	assert.ErrorContains(t, err, "Match exec")
	assert.ErrorContains(t, err, "x.corp")
	assert.ErrorContains(t, err, "ProxyJump at testdata/sshcfg-match:21")
	assert.ErrorContains(t, err, "--ssh-config none")

	h = &Host{Name: "x.corp", Address: "x.corp", Jump: "none"}
	require.NoError(t, cfg.Apply(h), "the inventory's jump wins over the undecided block")
	assert.Equal(t, "", h.Jump, "jump none: connect directly")
	h = &Host{Name: "x.corp", Address: "x.corp", Jump: "jump.example"}
	require.NoError(t, cfg.Apply(h))
	assert.Equal(t, "jump.example", h.Jump)

	h, err = sshCfgApply(t, cfg, "z.corp", "")
	require.NoError(t, err, "Match host x.corp,y.corp is a list: z.corp is not in it")
	assert.Equal(t, "", h.Jump)
	_, err = sshCfgApply(t, cfg, "Y.CORP", "")
	require.ErrorContains(t, err, "Y.CORP", "Match host is case-insensitive")

	h, err = sshCfgApply(t, cfg, "z.lab", "")
	require.NoError(t, err, "no final pass (no Match final, no CanonicalizeHostname): Match canonical is false, as ssh -G says")
	assert.Equal(t, "fallback", h.User)
	assert.Equal(t, 2022, h.Port)

	h, err = sshCfgApply(t, cfg, "other", "")
	require.NoError(t, err)
	assert.Equal(t, "fallback", h.User)
}

func TestSSHConfigMatchCriteria(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	me := localUser()
	file := sshCfgWrite(t, dir, "config", fmt.Sprintf(`
Match localuser %s host !skip,*
  Port 2001
Match = user "svc*" originalhost tagged-*
  IdentityFile ~/.ssh/svc
Match all
  User everyone
`, me))
	cfg, err := LoadSSHConfig(file)
	require.NoError(t, err)
	h, err := sshCfgApply(t, cfg, "a", "")
	require.NoError(t, err)
	assert.Equal(t, 2001, h.Port)
	assert.Equal(t, "everyone", h.User)
	assert.Empty(t, h.IdentityFiles)
	h, err = sshCfgApply(t, cfg, "skip", "")
	require.NoError(t, err)
	assert.Equal(t, 0, h.Port, "!skip rules skip out")
	h, err = sshCfgApply(t, cfg, "tagged-1", "svc-a")
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, ".ssh/svc")}, h.IdentityFiles)

	for _, bad := range []string{"Match\n", "Match host\n", "Match exec \"unterminated\n"} {
		_, err := LoadSSHConfig(sshCfgWrite(t, dir, "bad", "Host x\n  User y\n"+bad))
		assert.ErrorContains(t, err, "bad:3:", "%q is an error ssh makes too", bad)
	}
}

func TestSSHConfigHostPatternQuestionMark(t *testing.T) {
	dir := t.TempDir()
	cfg, err := LoadSSHConfig(sshCfgWrite(t, dir, "config", "Host gpu-?\n  Port 2001\n"))
	require.NoError(t, err)
	h, err := sshCfgApply(t, cfg, "gpu-", "")
	require.NoError(t, err)
	assert.Equal(t, 0, h.Port, "? matches exactly one character, as in ssh")
	h, err = sshCfgApply(t, cfg, "gpu-1", "")
	require.NoError(t, err)
	assert.Equal(t, 2001, h.Port)
}

func TestSSHConfigInclude(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	sshCfgWrite(t, home, ".ssh/conf.d/10-inc.conf", "Host inc-*\n  User incuser\nMatch host inc-* exec \"true\"\n  Port 2022\n")
	sshCfgWrite(t, home, ".ssh/cond.conf", "User conduser\n")
	file := sshCfgWrite(t, home, ".ssh/config", `Include conf.d/*.conf ~/.ssh/none-*.conf
Match originalhost cond-* exec "vpn-up"
  Include cond.conf
Host *
  User fallback
`)
	cfg, err := LoadSSHConfig(file)
	require.NoError(t, err, "an included Match exec must not stop the run either")

	_, err = sshCfgApply(t, cfg, "inc-1", "")
	assert.ErrorContains(t, err, "10-inc.conf:3:")
	assert.ErrorContains(t, err, "Port at ")
	h := &Host{Name: "inc-1", Address: "inc-1", Port: 22}
	require.NoError(t, cfg.Apply(h))
	assert.Equal(t, "incuser", h.User)

	_, err = sshCfgApply(t, cfg, "cond-1", "")
	assert.ErrorContains(t, err, "config:2:", "the Match the Include sits under")
	assert.ErrorContains(t, err, "cond.conf:1", "the line that would set User")
	h, err = sshCfgApply(t, cfg, "plain", "")
	require.NoError(t, err)
	assert.Equal(t, "fallback", h.User)

	loop := sshCfgWrite(t, home, ".ssh/loop.conf", "Include loop.conf\n")
	_, err = LoadSSHConfig(loop)
	assert.ErrorContains(t, err, "Include nested more than")
}

func TestSSHConfigHostNameIsCheckedLikeAnAddress(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cfg, err := LoadSSHConfig("testdata/sshcfg-hostname")
	require.NoError(t, err)
	for alias, line := range map[string]int{"victim": 2, "star": 4, "dash": 6, "spaced": 8, "bracket": 10} {
		_, err := sshCfgApply(t, cfg, alias, "")
		assert.ErrorContains(t, err, fmt.Sprintf("testdata/sshcfg-hostname:%d: HostName", line), alias)
		assert.ErrorContains(t, err, "is not a host name or IP address", alias)
	}
	for alias, want := range map[string]string{"ok-ip": "10.0.0.5", "ok-zone": "fe80::1%eth0", "ok-token": "ok-token.example.com"} {
		h, err := sshCfgApply(t, cfg, alias, "")
		require.NoError(t, err, alias)
		assert.Equal(t, want, h.Address)
	}

	_, err = sshCfgApply(t, cfg, "via-victim", "")
	assert.ErrorContains(t, err, "testdata/sshcfg-hostname:2: HostName", "a jump host's HostName too")
	_, err = ParseJump("victim", cfg)
	assert.ErrorContains(t, err, "testdata/sshcfg-hostname:2: HostName")
	_, err = ParseJump("u@a*b", cfg)
	assert.ErrorContains(t, err, `"a*b" is not a host name or IP address`)
}

func TestSSHConfigJumpPortsAreChecked(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, spec := range []string{"[10.0.0.1]:99999", "[::1]:0", "h:0", "h:65536", "h:-1", "h:+22", "[::1]:", "[::1]x", "[::1", "h:", "@h", "u@"} {
		_, err := ParseJump(spec, &SSHConfig{})
		assert.Error(t, err, spec)
	}
	hops, err := ParseJump("h:65535,[::1],ssh://u@[fe80::1]:1", &SSHConfig{})
	require.NoError(t, err)
	assert.Equal(t, 65535, hops[0].Port)
	assert.Equal(t, JumpHop{User: localUser(), Address: "::1", Port: 22}, hops[1])
	assert.Equal(t, JumpHop{User: "u", Address: "fe80::1", Port: 1}, hops[2])

	h := &Host{Name: "g", Address: "g", Jump: "[10.0.0.1]:99999", Source: "inv.yaml:7"}
	err = (*SSHConfig)(nil).Apply(h)
	assert.ErrorContains(t, err, "inventory inv.yaml:7: ProxyJump")
	assert.ErrorContains(t, err, `port "99999" is not a TCP port`)

	cfg, err := LoadSSHConfig("testdata/sshcfg-jump")
	require.NoError(t, err)
	_, err = sshCfgApply(t, cfg, "bad-port", "")
	assert.ErrorContains(t, err, "testdata/sshcfg-jump:25: ProxyJump")
	_, err = sshCfgApply(t, cfg, "zero-port", "")
	assert.ErrorContains(t, err, "testdata/sshcfg-jump:27")
}

func TestSSHConfigJumpChainsFollowEachHopsConfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cfg, err := LoadSSHConfig("testdata/sshcfg-jump")
	require.NoError(t, err)
	me := localUser()
	b1 := JumpHop{User: "u1", Address: "192.0.2.1", Port: 22}
	b2 := JumpHop{User: me, Address: "192.0.2.2", Port: 2202}

	hops, err := ParseJump("b2", cfg)
	require.NoError(t, err)
	assert.Equal(t, []JumpHop{b1, b2}, hops, "b2's own ProxyJump b1 is dialled first")

	hops, err = ParseJump("b3,b2", cfg)
	require.NoError(t, err)
	assert.Equal(t, []JumpHop{b1, b2, {User: me, Address: "b3", Port: 22}, b2}, hops,
		"only the first hop's own ProxyJump applies: ssh reaches b2 with -J b3")

	hops, err = ParseJump("x@b2:2300", cfg)
	require.NoError(t, err)
	assert.Equal(t, []JumpHop{b1, {User: "x", Address: "192.0.2.2", Port: 2300}}, hops)

	h, err := sshCfgApply(t, cfg, "t", "")
	require.NoError(t, err)
	assert.Equal(t, "b2", h.Jump)

	// The inventory's jump overrides inv-target's own ProxyJump, so reaching
	// inv-target again through "back" uses its config: no loop.
	h = &Host{Name: "inv-target", Address: "inv-target", Jump: "back"}
	require.NoError(t, cfg.Apply(h))
	hops, err = ParseJump(h.Jump, cfg)
	require.NoError(t, err)
	assert.Equal(t, []JumpHop{b1, {User: me, Address: "inv-target", Port: 22}, {User: me, Address: "back", Port: 22}}, hops)
}

func TestSSHConfigJumpLoopsAreErrors(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	cfg, err := LoadSSHConfig("testdata/sshcfg-jump")
	require.NoError(t, err)

	_, err = ParseJump("l1", cfg)
	assert.ErrorContains(t, err, "ProxyJump loop: l1 -> l2 -> l1")
	_, err = sshCfgApply(t, cfg, "self", "")
	assert.ErrorContains(t, err, "testdata/sshcfg-jump:17: ProxyJump loop: self -> self")
	_, err = sshCfgApply(t, cfg, "t2", "")
	assert.ErrorContains(t, err, "ProxyJump loop: l1 -> l2 -> l1")
	_, err = sshCfgApply(t, cfg, "l1", "")
	assert.ErrorContains(t, err, "ProxyJump loop: l1 -> l2 -> l1")

	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "Host c%d\n  ProxyJump c%d\n", i, i+1)
	}
	long, err := LoadSSHConfig(sshCfgWrite(t, dir, "config", b.String()))
	require.NoError(t, err)
	_, err = ParseJump("c0", long)
	assert.ErrorContains(t, err, fmt.Sprintf("more than %d jump hosts", maxJumpHops))
}

// gpuprep runs no ProxyCommand: a host whose config has one is an error
// naming the line, not dialled directly; ProxyJump and ProxyCommand compete
// as in ssh (the first one wins); the inventory's jump wins over both.
func TestSSHConfigProxyCommandIsRefused(t *testing.T) {
	f := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(f, []byte(`Host pc
  ProxyCommand nc -X connect -x proxy.example:3128 %h %p
Host jumpfirst
  ProxyJump gw
  ProxyCommand ssh -W %h:%p other
Host pcnone
  ProxyCommand none
`), 0o600))
	cfg, err := LoadSSHConfig(f)
	require.NoError(t, err)

	h := &Host{Name: "pc", Address: "pc"}
	err = cfg.Apply(h)
	require.ErrorContains(t, err, f+":2: ProxyCommand (for pc) is not supported")
	require.ErrorContains(t, err, "only a bastion's ssh -W %h:%p")

	h = &Host{Name: "jumpfirst", Address: "jumpfirst"}
	require.NoError(t, cfg.Apply(h))
	require.Equal(t, "gw", h.Jump)

	require.NoError(t, cfg.Apply(&Host{Name: "pcnone", Address: "pcnone"}))
	h = &Host{Name: "pc", Address: "pc", Jump: "bastion"}
	require.NoError(t, cfg.Apply(h), "the inventory's jump wins")
	require.Equal(t, "bastion", h.Jump)
	require.NoError(t, cfg.Apply(&Host{Name: "pc", Address: "pc", Jump: "none"}))
}

// sshCfgLoad writes text as a config file in a fresh HOME and loads it.
func sshCfgLoad(t *testing.T, text string) (*SSHConfig, string) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg, err := LoadSSHConfig(sshCfgWrite(t, home, ".ssh/config", text))
	require.NoError(t, err)
	return cfg, home
}

// Any Match final makes ssh parse the config again, with Host lines
// matched against the lower-cased HostName (checked with ssh -G, 9.2).
func TestSSHConfigMatchFinalSecondPass(t *testing.T) {
	cfg, _ := sshCfgLoad(t, `Host gpu1
  HostName 10.0.0.5
Host 10.0.0.*
  User ipuser
  Port 2022
  ProxyJump bastion
Match final host nothing
`)
	h, err := sshCfgApply(t, cfg, "gpu1", "")
	require.NoError(t, err)
	assert.Equal(t, JumpHopOf(h), JumpHop{User: "ipuser", Address: "10.0.0.5", Port: 2022})
	assert.Equal(t, "bastion", h.Jump)

	cfg, _ = sshCfgLoad(t, `Host gpu1
  HostName GPU1.Example
  Port 2001
Match !final
  User first
Host gpu1.example
  User second
  Port 2002
Match final
  HostName 192.0.2.9
Match canonical originalhost gpu1
  IdentityFile ~/.ssh/final
`)
	h, err = sshCfgApply(t, cfg, "gpu1", "")
	require.NoError(t, err)
	assert.True(t, strings.EqualFold("gpu1.example", h.Address), "HostName in the final pass is ignored: %s", h.Address)
	assert.Equal(t, "first", h.User, "values from the first pass win")
	assert.Equal(t, 2001, h.Port)
	assert.Len(t, h.IdentityFiles, 1, "Match canonical is true in the final pass; originalhost stays the alias")

	// Match final in an included file under a block that does not apply
	// still asks for the second pass.
	home := t.TempDir()
	t.Setenv("HOME", home)
	sshCfgWrite(t, home, ".ssh/inc.conf", "Match final\n  Port 9\n")
	cfg, err = LoadSSHConfig(sshCfgWrite(t, home, ".ssh/config", "Host nomatch\n  Include inc.conf\nHost 10.*\n  User ten\nHost g\n  HostName 10.1.1.1\n"))
	require.NoError(t, err)
	h, err = sshCfgApply(t, cfg, "g", "")
	require.NoError(t, err)
	assert.Equal(t, "ten", h.User)
	assert.Equal(t, 0, h.Port)
}

// JumpHopOf is h's user, address and port, for comparing.
func JumpHopOf(h *Host) JumpHop {
	return JumpHop{User: h.User, Address: h.Address, Port: h.Port}
}

// CanonicalizeHostname needs DNS to know which name ssh ends with: refused
// where ssh would canonicalize, else only its second pass is done.
func TestSSHConfigCanonicalizeHostname(t *testing.T) {
	cfg, _ := sshCfgLoad(t, `Host gpu1 ip jumped
  CanonicalizeHostname yes
  CanonicalDomains corp.example
Host always
  CanonicalizeHostname always
Host ip
  HostName 10.0.0.5
Host jumped always
  ProxyJump bastion
Host *.corp.example 10.0.0.*
  User canon
`)
	_, err := sshCfgApply(t, cfg, "gpu1", "")
	assert.ErrorContains(t, err, "config:2: CanonicalizeHostname yes (for gpu1) is not supported")
	assert.ErrorContains(t, err, "--ssh-config none")
	_, err = sshCfgApply(t, cfg, "always", "")
	assert.ErrorContains(t, err, "config:5: CanonicalizeHostname always")

	h, err := sshCfgApply(t, cfg, "ip", "")
	require.NoError(t, err, "an IP address is not canonicalized")
	assert.Equal(t, "canon", h.User, "but the config is parsed again")
	h, err = sshCfgApply(t, cfg, "jumped", "")
	require.NoError(t, err, "yes leaves a name reached through a jump host alone")
	assert.Equal(t, "bastion", h.Jump)
	h = &Host{Name: "gpu1", Address: "gpu1", Jump: "bastion"}
	require.NoError(t, cfg.Apply(h), "a jump from the inventory counts too")
}

// ProxyJump none leaves ProxyCommand to a later line, as in ssh 9.2.
func TestSSHConfigProxyJumpNoneThenProxyCommand(t *testing.T) {
	cfg, _ := sshCfgLoad(t, "Host h\n  ProxyJump none\n  ProxyCommand nc %h %p\n")
	_, err := sshCfgApply(t, cfg, "h", "")
	assert.ErrorContains(t, err, "config:3: ProxyCommand (for h) is not supported")
}

// '#' starts a comment only at the start of an argument; quotes are
// stripped; extra arguments are an error, as in ssh.
func TestSSHConfigValuesAreArguments(t *testing.T) {
	cfg, _ := sshCfgLoad(t, "Host h\n  User bob#x\n  IdentityFile \"/tmp/a #b\"\n  Port 2022 # comment\n  ProxyJump j1,j2 # c\n")
	h, err := sshCfgApply(t, cfg, "h", "")
	require.NoError(t, err)
	assert.Equal(t, "bob#x", h.User)
	assert.Equal(t, []string{"/tmp/a #b"}, h.IdentityFiles)
	assert.Equal(t, 2022, h.Port)
	assert.Equal(t, "j1,j2", h.Jump)

	dir := t.TempDir()
	_, err = LoadSSHConfig(sshCfgWrite(t, dir, "config", "Host h\n  User a b\n"))
	assert.ErrorContains(t, err, "config:2: User: extra arguments")
}

// IdentityFile tokens as ssh expands them (checked with ssh -v, 9.2).
func TestSSHConfigIdentityFileTokens(t *testing.T) {
	t.Setenv("GPUPREP_TEST_KEYDIR", "/keys")
	cfg, home := sshCfgLoad(t, `Host g
  HostName MiXeD.Example
  Port 2200
  IdentityFile ~/%h-%r-%n-%p-%u-%%
  IdentityFile ${GPUPREP_TEST_KEYDIR}/%d/%l
Host bad
  IdentityFile ~/%C
Host env
  IdentityFile ${GPUPREP_TEST_NO_SUCH_VAR}/k
`)
	me := localUser()
	local, _ := os.Hostname()
	h, err := sshCfgApply(t, cfg, "g", "")
	require.NoError(t, err)
	assert.Equal(t, []string{
		filepath.Join(home, "mixed.example-"+me+"-g-2200-"+me+"-%"),
		"/keys/" + home + "/" + local,
	}, h.IdentityFiles)
	h, err = sshCfgApply(t, cfg, "g", "bob")
	require.NoError(t, err)
	assert.Contains(t, h.IdentityFiles[0], "-bob-g-")

	_, err = sshCfgApply(t, cfg, "bad", "")
	assert.ErrorContains(t, err, "config:7: IdentityFile")
	assert.ErrorContains(t, err, "%C")
	_, err = sshCfgApply(t, cfg, "env", "")
	assert.ErrorContains(t, err, "config:9: IdentityFile")
	assert.ErrorContains(t, err, "GPUPREP_TEST_NO_SUCH_VAR")
}

// IdentityFile none names no file and keeps ssh's default keys away
// (identityFileList reads the marker); once is enough, and files named
// beside it are still offered.
func TestSSHConfigIdentityFileNone(t *testing.T) {
	cfg, _ := sshCfgLoad(t, "Host h\n  IdentityFile none\n  IdentityFile NONE\nHost k\n  IdentityFile none\n  IdentityFile ~/k\n")
	h, err := sshCfgApply(t, cfg, "h", "")
	require.NoError(t, err)
	assert.Equal(t, []string{NoIdentityFile}, h.IdentityFiles)
	files, defaults := identityFileList(h.IdentityFiles)
	assert.Empty(t, files)
	assert.Empty(t, defaults)

	h, err = sshCfgApply(t, cfg, "k", "")
	require.NoError(t, err)
	files, defaults = identityFileList(h.IdentityFiles)
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(home, "k")}, files)
	assert.Empty(t, defaults)
}

// Include: the glob's whole result in order; directories and dangling
// symlinks passed over.
func TestSSHConfigIncludeOrderAndSkips(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	sshCfgWrite(t, home, ".ssh/b/1.conf", "Host *\n  User from-b1\n")
	sshCfgWrite(t, home, ".ssh/a/2.conf", "Host *\n  User from-a2\n")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh/c/3.conf"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(home, "nowhere"), filepath.Join(home, ".ssh/d.conf")))
	cfg, err := LoadSSHConfig(sshCfgWrite(t, home, ".ssh/config", "Include */*.conf d.conf c\n"))
	require.NoError(t, err)
	h, err := sshCfgApply(t, cfg, "x", "")
	require.NoError(t, err)
	assert.Equal(t, "from-a2", h.User, "a/2.conf sorts before b/1.conf")
}

func TestSSHConfigGlobIsNotExponential(t *testing.T) {
	start := time.Now()
	assert.False(t, globMatch(strings.Repeat("a", 60), "*a*a*a*a*a*a*a*a*a*a*b"))
	assert.Less(t, time.Since(start), time.Second)
	for _, c := range []struct {
		s, p string
		ok   bool
	}{{"", "*", true}, {"", "?", false}, {"abc", "a*c", true}, {"abc", "a*b", false}, {"abcbc", "*bc", true}, {"ab", "a?", true}, {"a", "a?", false}, {"axbxc", "a*b*c", true}, {"ac", "a**c", true}} {
		assert.Equal(t, c.ok, globMatch(c.s, c.p), "%q %q", c.s, c.p)
	}
}

func TestSSHConfigPortServiceName(t *testing.T) {
	cfg, _ := sshCfgLoad(t, "Host h\n  Port ssh\nHost bad\n  Port nosuchservice\n")
	h, err := sshCfgApply(t, cfg, "h", "")
	require.NoError(t, err)
	assert.Equal(t, 22, h.Port)
	_, err = sshCfgApply(t, cfg, "bad", "")
	assert.ErrorContains(t, err, "config:4: Port")
}

// The bastion idiom older than ProxyJump is read as the ProxyJump it is;
// anything else is not read (gpuprep runs no command).
func TestProxyCommandJump(t *testing.T) {
	for cmd, want := range map[string]string{
		"ssh -W %h:%p bastion":                     "bastion",
		"exec ssh -q -W %h:%p ops@bastion.example": "ops@bastion.example",
		"ssh -W [%h]:%p -p 2222 -l ops 10.0.0.1":   "ops@10.0.0.1:2222",
		"/usr/bin/ssh -T -x -a -W %h:%p gw":        "gw",
		"ssh gw nc %h %p":                          "gw",
		"ssh -q -p 22 gw nc %h %p":                 "gw:22",
		"ssh -W %h:%p -p 2200 fe80::1":             "[fe80::1]:2200",
		"ssh  -W  %h:%p   gw  ":                    "gw",
	} {
		got, ok := ProxyCommandJump(cmd)
		assert.True(t, ok, cmd)
		assert.Equal(t, want, got, cmd)
	}
	for _, cmd := range []string{
		"", "ssh", "ssh gw", "ssh -W %h:%p", "ssh -W %h:%p gw; rm -rf /", "ssh -W %h:%p $(id)", "ssh -W %h:%p gw other",
		"ssh -i key -W %h:%p gw", "ssh -o ProxyJump=x -W %h:%p gw", "ssh -W %h:%p -W %h:%p gw", "ssh -W %h:22 gw",
		"ssh -W %h:%p %h", "nc %h %p", "ssh gw nc -q0 %h %p", "ssh -W %h:%p -l a b@gw", "ssh -W %h:%p @gw",
		"ssh -W %h:%p 'gw'", "ssh -W %h:%p -p x gw", "ssh -W %h:%p fe80::1", "connect-proxy -S socks:1080 %h %p",
		"ssh -qW %h:%p gw", "ssh -W %h:%p gw\nrm x",
	} {
		_, ok := ProxyCommandJump(cmd)
		assert.False(t, ok, "%q", cmd)
	}
}
