package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A saved `ansible-inventory --list` answer, read without Ansible: the
// same hosts, addresses, ports, users, key files, jumps, groups and local
// connections as the ansible engine reads from the original layout
// (group_vars and host_vars as files and directories, children, a
// directory inventory), where real ansible-inventory made the file. Ansible
// itself refuses such a file as a static inventory (only a script's output
// is read so); a template in it is its host's problem.
func TestSavedListJSONAsAnsibleInventory(t *testing.T) {
	ansibleEnv(t)
	key := filepath.Join(t.TempDir(), "id_test")
	require.NoError(t, os.WriteFile(key, []byte("k"), 0o600))
	dir := writeTree(t, map[string]string{
		"inv/hosts": "[gpu]\nn1\nn2 ansible_port=2200\n[cpu]\nc1 ansible_host=192.0.2.30\n[dc:children]\ngpu\ncpu\n[ctl]\nhere ansible_connection=local\n" +
			"[tmpl]\nt1 ansible_host=\"{{ inventory_hostname }}.mgmt\"\n",
		"inv/more.yml":                 "all:\n  hosts:\n    y1:\n      ansible_host: 192.0.2.40\n      ansible_ssh_common_args: -o ProxyJump=jump@bastion.example\n",
		"inv/group_vars/all.yml":       "ansible_user: admin\n",
		"inv/group_vars/dc/conn.yml":   "ansible_user: dcops\nansible_ssh_private_key_file: " + key + "\n",
		"inv/group_vars/gpu":           "ansible_user: gpuops\n",
		"inv/host_vars/n1.json":        `{"ansible_host": "192.0.2.11"}`,
		"inv/host_vars/n2/addr.yaml":   "ansible_host: 192.0.2.12\n",
		"inv/host_vars/n2/ignored.txt": "ansible_host: 192.0.2.99\n",
	})
	out, err := exec.Command(ansibleInventoryBin, "-i", filepath.Join(dir, "inv"), "--list").Output()
	require.NoError(t, err)
	saved := filepath.Join(dir, "saved.json")
	require.NoError(t, os.WriteFile(saved, out, 0o644))

	want, err := LoadWith(filepath.Join(dir, "inv"), LoadOptions{Engine: EngineAnsible})
	require.NoError(t, err)
	for _, engine := range []string{EngineGpuprep, EngineAuto} {
		got, err := LoadWith(saved, LoadOptions{Engine: engine})
		require.NoError(t, err, engine)
		require.Equal(t, "ansible-list", got.Format)
		w, g := byName(t, want), byName(t, got)
		require.Len(t, g, len(w))
		for name, wh := range w {
			gh := g[name]
			require.NotNil(t, gh, name)
			if name == "t1" { // Ansible rendered it; a saved file has the template
				require.Contains(t, gh.Problem, `"{{ inventory_hostname }}.mgmt" is a template`)
				require.Equal(t, "t1.mgmt", wh.Address)
				continue
			}
			require.Empty(t, gh.Problem, name)
			require.Equal(t, wh.Target(), gh.Target(), name)
			require.Equal(t, wh.User, gh.User, name)
			require.Equal(t, wh.IdentityFiles, gh.IdentityFiles, name)
			require.Equal(t, wh.Jump, gh.Jump, name)
			require.Equal(t, wh.Groups, gh.Groups, name)
			require.Equal(t, wh.Local, gh.Local, name)
		}
		require.Equal(t, "192.0.2.12:2200", g["n2"].Target())
		require.Equal(t, "gpuops", g["n1"].User)
		require.True(t, g["here"].Local)
	}

	// Ansible refuses the same file as a static inventory
	_, err = exec.Command(ansibleInventoryBin, "-i", saved, "--list").Output()
	if err == nil {
		o, _ := exec.Command("env", "ANSIBLE_INVENTORY_UNPARSED_FAILED=True", ansibleInventoryBin, "-i", saved, "--list").CombinedOutput()
		require.Contains(t, string(o), "Invalid \"children\" entry")
	}
}
