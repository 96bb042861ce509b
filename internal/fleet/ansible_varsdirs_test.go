package fleet

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loadOwnTimed reads an inventory with gpuprep's own reader, failing the
// test rather than hanging (a FIFO read would block).
func loadOwnTimed(t *testing.T, file string) (*Inventory, error) {
	t.Helper()
	type res struct {
		inv *Inventory
		err error
	}
	ch := make(chan res, 1)
	go func() {
		inv, err := LoadWith(file, LoadOptions{Engine: EngineGpuprep})
		ch <- res{inv, err}
	}()
	select {
	case r := <-ch:
		return r.inv, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("LoadWith(%s) did not return", file)
		return nil, nil
	}
}

// What a host hands over in group_vars/ and host_vars/ is hostile until
// read: a link out of the inventory's directory, a FIFO, a huge file, a
// group whose name climbs out, each an error naming the file (and line).
func TestVarsDirsHostilePaths(t *testing.T) {
	t.Run("link out of the tree", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"outside.yml": "ansible_host: 203.0.113.66\n", "inv/hosts.ini": "[g]\nh1\n"})
		require.NoError(t, os.MkdirAll(filepath.Join(root, "inv/group_vars"), 0o755))
		link := filepath.Join(root, "inv/group_vars/g.yml")
		require.NoError(t, os.Symlink("../../outside.yml", link))
		_, err := loadOwnTimed(t, filepath.Join(root, "inv/hosts.ini"))
		require.ErrorContains(t, err, link+": resolves to "+filepath.Join(root, "outside.yml")+", outside the inventory's directory")
	})
	t.Run("link inside the tree", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"inv/shared/common.yml": "ansible_user: ops\n", "inv/hosts.ini": "[g]\nh1\n"})
		require.NoError(t, os.MkdirAll(filepath.Join(root, "inv/group_vars"), 0o755))
		require.NoError(t, os.Symlink("../shared/common.yml", filepath.Join(root, "inv/group_vars/g.yml")))
		inv, err := loadOwnTimed(t, filepath.Join(root, "inv/hosts.ini"))
		require.NoError(t, err)
		require.Equal(t, "ops", inv.Hosts[0].User)
	})
	t.Run("group_vars a link out of the tree", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"elsewhere/all.yml": "ansible_user: x\n", "inv/hosts.ini": "h1\n"})
		require.NoError(t, os.Symlink("../elsewhere", filepath.Join(root, "inv/group_vars")))
		_, err := loadOwnTimed(t, filepath.Join(root, "inv/hosts.ini"))
		require.ErrorContains(t, err, filepath.Join(root, "inv/group_vars")+": resolves to")
	})
	t.Run("a FIFO", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"hosts.ini": "[g]\nh1\n"})
		require.NoError(t, os.MkdirAll(filepath.Join(root, "group_vars"), 0o755))
		fifo := filepath.Join(root, "group_vars/g.yml")
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))
		_, err := loadOwnTimed(t, filepath.Join(root, "hosts.ini"))
		require.ErrorContains(t, err, fifo+": not a regular file")
	})
	t.Run("a huge file", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"hosts.ini": "[g]\nh1\n"})
		require.NoError(t, os.MkdirAll(filepath.Join(root, "group_vars"), 0o755))
		big := filepath.Join(root, "group_vars/g.yml")
		f, err := os.Create(big)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(maxVarsFile+1)) // sparse: no disk used
		require.NoError(t, f.Close())
		_, err = loadOwnTimed(t, filepath.Join(root, "hosts.ini"))
		require.ErrorContains(t, err, big+": larger than 8388608 bytes")
	})
	t.Run("a group named to climb out", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"x.yml": "ansible_host: 203.0.113.66\n", "inv/hosts.ini": "h0\n[../../x]\nh1\n", "inv/group_vars/all.yml": "a: 1\n"})
		_, err := loadOwnTimed(t, filepath.Join(root, "inv/hosts.ini"))
		require.ErrorContains(t, err, filepath.Join(root, "inv/hosts.ini")+`:2: group: "../../x": its group_vars file would be looked up at`)
	})
	t.Run("not a directory", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"hosts.ini": "h1\n", "host_vars": "ansible_user: x\n"})
		_, err := loadOwnTimed(t, filepath.Join(root, "hosts.ini"))
		require.ErrorContains(t, err, filepath.Join(root, "host_vars")+": not a directory")
	})
	t.Run("a bad value names its vars file and line", func(t *testing.T) {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"hosts.ini": "[g]\nh1\n", "group_vars/g/conn.yml": "# the port\nansible_port: 70000\n"})
		_, err := loadOwnTimed(t, filepath.Join(root, "hosts.ini"))
		require.ErrorContains(t, err, filepath.Join(root, "group_vars/g/conn.yml")+`:2: ansible_port: host "h1": "70000" is not a TCP port`)
		writeFiles(t, root, map[string]string{"group_vars/g/conn.yml": "\ngpuprep_mode: gpu\n"})
		_, err = loadOwnTimed(t, filepath.Join(root, "hosts.ini"))
		require.ErrorContains(t, err, filepath.Join(root, "group_vars/g/conn.yml")+`:2: gpuprep_mode: host "h1"`)
	})
}

// A vault-encrypted vars file, or a !vault value gpuprep reads, is a
// problem of each host it applies to, never a wrong value; a template from
// group_vars is too, naming the vars file and line. Other hosts are read.
func TestVarsDirsUnresolvedPerHost(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"hosts.ini": "[vaulted]\nv1\n[gpu]\ng1\ng2\ng3\nplain ansible_host=192.0.2.9\n",
		// as ansible-vault encrypt writes it
		"group_vars/vaulted.yml":  "$ANSIBLE_VAULT;1.1;AES256\n3936363961326363313333343366353063633964393531396364656337373236\n",
		"host_vars/g1.yml":        "ansible_user: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3163633537306232396336343439366436383337653862336464\n",
		"host_vars/g2.yml":        "ansible_host: 192.0.2.2\nansible_ssh_common_args: ''\nansible_become_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3163633537306232396336343439366436383337653862336464\n",
		"group_vars/gpu/conn.yml": "\nansible_ssh_common_args: '-o ProxyJump={{ bastion }}'\n",
		"host_vars/plain.yml":     "ansible_ssh_common_args: ''\n",
	})
	inv, err := loadOwnTimed(t, filepath.Join(root, "hosts.ini"))
	require.NoError(t, err)
	h := byName(t, inv)
	require.Contains(t, h["v1"].Problem, `host "v1": `+filepath.Join(root, "group_vars/vaulted.yml")+": vault-encrypted: gpuprep's own reader has no vault password")
	require.Contains(t, h["g1"].Problem, filepath.Join(root, "host_vars/g1.yml")+`:1: ansible_user: host "g1": a !vault value (encrypted)`)
	require.NotContains(t, h["g1"].Vars, "ansible_user", "no ciphertext as a value")
	require.Empty(t, h["g2"].Problem, "gpuprep does not use ansible_become_password")
	require.NotContains(t, h["g2"].Vars, "ansible_become_password")
	require.Equal(t, "192.0.2.2", h["g2"].Address)
	require.Contains(t, h["g3"].Problem, filepath.Join(root, "group_vars/gpu/conn.yml")+`:2: ansible_ssh_common_args: host "g3": "-o ProxyJump={{ bastion }}" is a template: gpuprep's own reader renders no Jinja`)
	require.Empty(t, h["plain"].Problem)
	require.Equal(t, "192.0.2.9", h["plain"].Address)

	// Ansible itself cannot read the inventory without the vault password:
	// no value gpuprep could have used instead.
	if _, err := os.Stat(ansibleInventoryBin); err != nil {
		oracleMissing(t, "no ansible-inventory at %s (ansible-core): %v", ansibleInventoryBin, err)
	}
	_, aerr := ansibleList(t.TempDir(), filepath.Join(root, "hosts.ini"), "ini")
	require.ErrorContains(t, aerr, "Attempting to decrypt but no vault secrets found")
}

// Without ansible-core (a runner that says ansible-inventory is not
// there), engine auto reads group_vars/ and directories itself and says so;
// with it, it hands them to ansible-inventory.
func TestLoadWithNote(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"hosts.ini": "[g]\nh1\n", "group_vars/g.yml": "ansible_user: ops\n", "plain/hosts.ini": "h1\n"})
	inv, err := LoadWith(filepath.Join(root, "hosts.ini"), LoadOptions{Runner: noAnsible{}})
	require.NoError(t, err)
	require.Equal(t, "read by gpuprep's own reader (ansible-inventory is not installed), group_vars/ beside the inventory read with Ansible's rules and precedence", inv.Note)
	require.Equal(t, "ops", inv.Hosts[0].User)
	inv, err = LoadWith(filepath.Join(root, "plain/hosts.ini"), LoadOptions{Runner: noAnsible{}})
	require.NoError(t, err)
	require.Equal(t, "read by gpuprep's own reader", inv.Note)
	inv, err = LoadWith(root, LoadOptions{Runner: noAnsible{}}) // hosts.ini is passed over in a directory
	require.Nil(t, inv)
	require.ErrorContains(t, err, root+": no hosts")
	if _, err := os.Stat(ansibleInventoryBin); err == nil {
		ansibleEnv(t)
		inv, err := LoadWith(filepath.Join(root, "hosts.ini"), LoadOptions{})
		require.NoError(t, err)
		require.Equal(t, "read by ansible-inventory (group_vars/ beside the inventory)", inv.Note)
		require.Equal(t, "ops", inv.Hosts[0].User)
	}
}

// noAnsible is a runner on which no ansible-inventory is installed.
type noAnsible struct{}

func (noAnsible) Run(_ context.Context, argv ...string) ([]byte, error) {
	return nil, &exec.Error{Name: argv[0], Err: exec.ErrNotFound}
}

// A saved --list answer holds a !vault value as ansible-inventory writes one
// it has not decrypted ({"__ansible_vault": …}): the host's problem when
// gpuprep reads it, never the JSON as a user name.
func TestSavedListVaultValue(t *testing.T) {
	data := `{"_meta": {"hostvars": {"h1": {"ansible_user": {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256\n3163"}}, "h2": {"ansible_user": "ops"}}},
"all": {"children": ["ungrouped"]}, "ungrouped": {"hosts": ["h1", "h2"]}}`
	inv, err := Parse("hosts.json", []byte(data))
	require.NoError(t, err)
	h := byName(t, inv)
	require.Contains(t, h["h1"].Problem, `hosts.json: ansible_user: host "h1": a !vault value (encrypted)`)
	require.Empty(t, h["h1"].User)
	require.NotContains(t, h["h1"].Vars, "ansible_user")
	require.Equal(t, "ops", h["h2"].User)
}

// A !vault value in the inventory file itself is as one in group_vars:
// the host's problem, never its ciphertext as the user name.
func TestInventoryVaultValue(t *testing.T) {
	inv, err := Parse("hosts.yml", []byte("all:\n  hosts:\n    h1:\n      ansible_user: !vault |\n        $ANSIBLE_VAULT;1.1;AES256\n        3163\n    h2:\n      ansible_user: ops\n"))
	require.NoError(t, err)
	h := byName(t, inv)
	require.Contains(t, h["h1"].Problem, `hosts.yml:4: ansible_user: host "h1": a !vault value (encrypted)`)
	require.NotContains(t, h["h1"].Vars, "ansible_user")
	require.Empty(t, h["h1"].User)
	require.Equal(t, "ops", h["h2"].User)
}
