package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ansibleEnv isolates the real ansible-inventory and ansible the engine
// runs (through host.ExecRunner, which passes the environment on): an
// empty config, a home and temporary directories of the test's own.
func ansibleEnv(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ansibleInventoryBin); err != nil {
		oracleMissing(t, "ansible-inventory is not installed (apt-get install ansible-core)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ansible.cfg")
	require.NoError(t, os.WriteFile(cfg, nil, 0o600))
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("ANSIBLE_CONFIG", cfg)
	t.Setenv("ANSIBLE_HOME", filepath.Join(dir, "ansible-home"))
	t.Setenv("ANSIBLE_LOCAL_TEMP", filepath.Join(dir, "ansible-tmp"))
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		require.NoError(t, os.WriteFile(full, []byte(content), mode))
	}
	return dir
}

// group_vars/ and host_vars/ beside an INI inventory, with Ansible's
// precedence (the ini's [gpu:vars] is below group_vars/all, which is below
// group_vars/gpu.yml, which is below host_vars/), and a templated
// ansible_host rendered by Ansible: the addresses, ports and users Ansible
// itself would use. gpuprep's own reader gives node2 the same, and says
// node1's template is what it cannot render.
func TestAnsibleEngineGroupAndHostVars(t *testing.T) {
	ansibleEnv(t)
	dir := writeTree(t, map[string]string{
		"hosts.ini":            "[gpu]\nnode1 ansible_host=\"{{ inventory_hostname }}.mgmt\"\nnode2\n[gpu:vars]\nansible_user=ops\n",
		"group_vars/all":       "ansible_user: admin\n",
		"group_vars/gpu.yml":   "ansible_port: 2222\ngpuprep_mode: vm-passthrough\n",
		"host_vars/node2.yaml": "ansible_host: 10.0.0.2\nansible_user: root\n",
	})
	file := filepath.Join(dir, "hosts.ini")
	inv, err := LoadWith(file, LoadOptions{Engine: EngineAnsible})
	require.NoError(t, err)
	require.Equal(t, "ansible-inventory", inv.Format)
	h := byName(t, inv)
	require.Len(t, h, 2)
	require.Equal(t, "node1.mgmt", h["node1"].Address)
	require.Equal(t, 2222, h["node1"].Port)
	require.Equal(t, "admin", h["node1"].User, "group_vars/all beats the inventory file's [gpu:vars]")
	require.Equal(t, "vm-passthrough", h["node1"].Mode)
	require.Equal(t, []string{"gpu"}, h["node1"].Groups)
	require.Equal(t, "10.0.0.2", h["node2"].Address)
	require.Equal(t, "root", h["node2"].User)
	require.Empty(t, h["node1"].Problem)
	require.Equal(t, "read by ansible-inventory (--inventory-engine ansible)", inv.Note)

	inv, err = LoadWith(file, LoadOptions{Engine: EngineGpuprep})
	require.NoError(t, err)
	require.Equal(t, "read by gpuprep's own reader (--inventory-engine gpuprep), group_vars/ and host_vars/ beside the inventory read with Ansible's rules and precedence", inv.Note)
	h = byName(t, inv)
	require.Equal(t, "10.0.0.2", h["node2"].Address)
	require.Equal(t, 2222, h["node2"].Port)
	require.Equal(t, "root", h["node2"].User)
	require.Equal(t, "vm-passthrough", h["node2"].Mode)
	require.Empty(t, h["node2"].Problem)
	require.Contains(t, h["node1"].Problem, `hosts.ini:2: ansible_host: host "node1": "{{ inventory_hostname }}.mgmt" is a template`)
}

// An inventory directory (Ansible merges its files and passes over *.ini
// and other extensions by default), a JSON inventory, an executable
// inventory script: read as Ansible reads them.
func TestAnsibleEngineDirectoryJSONAndScript(t *testing.T) {
	ansibleEnv(t)
	dir := writeTree(t, map[string]string{
		"inv/10-gpu.yml":   "gpu:\n  hosts:\n    a1:\n      ansible_host: 192.0.2.1\n",
		"inv/20-more.json": `{"gpu": {"hosts": {"a2": {"ansible_port": 2200}}}}`,
		"inv/skip.ini":     "[gpu]\nnever\n",
		"inv/30-script":    "#!/bin/sh\nif [ \"$1\" = --list ]; then echo '{\"cpu\": {\"hosts\": [\"s1\"]}, \"_meta\": {\"hostvars\": {\"s1\": {\"ansible_host\": \"192.0.2.9\"}}}}'; else echo '{}'; fi\n",
	})
	inv, err := LoadWith(filepath.Join(dir, "inv"), LoadOptions{})
	require.NoError(t, err)
	h := byName(t, inv)
	require.ElementsMatch(t, []string{"a1", "a2", "s1"}, func() (n []string) {
		for k := range h {
			n = append(n, k)
		}
		return
	}())
	require.Equal(t, "192.0.2.1", h["a1"].Address)
	require.Equal(t, 2200, h["a2"].Port)
	require.Equal(t, "192.0.2.9", h["s1"].Address)
	require.Equal(t, []string{"cpu"}, h["s1"].Groups)

	_, err = LoadWith(filepath.Join(dir, "inv"), LoadOptions{Engine: EngineGpuprep})
	require.ErrorContains(t, err, "an executable inventory (Ansible runs it as an inventory script) in the inventory directory: "+filepath.Join(dir, "inv", "30-script")+": gpuprep's own reader does not apply it")

	// Without the script, gpuprep's own reader reads the directory as
	// Ansible does: skip.ini passed over.
	require.NoError(t, os.Remove(filepath.Join(dir, "inv", "30-script")))
	inv, err = LoadWith(filepath.Join(dir, "inv"), LoadOptions{Engine: EngineGpuprep})
	require.NoError(t, err)
	require.Equal(t, "ansible-dir", inv.Format)
	h = byName(t, inv)
	require.Len(t, h, 2)
	require.Equal(t, "192.0.2.1", h["a1"].Address)
	require.Equal(t, 2200, h["a2"].Port)
}

// A host's own problem stays its own: a key file that is not there, a
// template Ansible cannot render. The other hosts are
// read, and these are not contacted (Runner.one).
func TestAnsibleEngineProblemsArePerHost(t *testing.T) {
	ansibleEnv(t)
	dir := writeTree(t, map[string]string{
		"hosts.yml": "all:\n  hosts:\n    good:\n      ansible_host: 192.0.2.1\n    nokey:\n      ansible_ssh_private_key_file: /nonexistent/key\n" +
			"    here:\n      ansible_connection: local\n    tmpl:\n      ansible_host: \"{{ no_such_variable }}.mgmt\"\n",
	})
	for _, engine := range []string{EngineAnsible, EngineGpuprep} {
		t.Run(engine, func(t *testing.T) {
			inv, err := LoadWith(filepath.Join(dir, "hosts.yml"), LoadOptions{Engine: engine})
			require.NoError(t, err)
			h := byName(t, inv)
			require.Empty(t, h["good"].Problem)
			require.Equal(t, "192.0.2.1", h["good"].Address)
			require.Contains(t, h["nokey"].Problem, `ansible_ssh_private_key_file: host "nokey"`)
			require.Empty(t, h["here"].Problem) // local: run here (transport_local_test.go)
			require.True(t, h["here"].Local)
			if engine == EngineAnsible {
				require.Contains(t, h["tmpl"].Problem, `host "tmpl": ansible_host "{{ no_such_variable }}.mgmt": Ansible could not render it`)
			} else {
				require.Contains(t, h["tmpl"].Problem, `hosts.yml:10: ansible_host: host "tmpl": "{{ no_such_variable }}.mgmt" is a template: gpuprep's own reader renders no Jinja`)
			}
		})
	}
}

// Engine auto: a static inventory is read by gpuprep's reader (errors name
// file and line); a template, a plugin configuration or an executable file
// goes to ansible-inventory.
func TestAnsibleEngineAutoChooses(t *testing.T) {
	ansibleEnv(t)
	dir := writeTree(t, map[string]string{
		"static.ini": "[gpu]\nn1 ansible_host=192.0.2.1\n",
		"tmpl.ini":   "[gpu]\nn1 ansible_host=\"{{ inventory_hostname }}.mgmt\"\n",
		"plugin.yml": "plugin: ansible.builtin.constructed\n",
		"script":     "#!/bin/sh\necho '{\"gpu\": {\"hosts\": [\"x1\"]}, \"_meta\": {\"hostvars\": {}}}'\n",
	})
	inv, err := LoadWith(filepath.Join(dir, "static.ini"), LoadOptions{})
	require.NoError(t, err)
	require.Equal(t, "ansible-ini", inv.Format)
	inv, err = LoadWith(filepath.Join(dir, "tmpl.ini"), LoadOptions{})
	require.NoError(t, err)
	require.Equal(t, "ansible-inventory", inv.Format)
	require.Equal(t, "n1.mgmt", inv.Hosts[0].Address)
	inv, err = LoadWith(filepath.Join(dir, "script"), LoadOptions{})
	require.NoError(t, err)
	require.Equal(t, "x1", inv.Hosts[0].Name)
	_, err = LoadWith(filepath.Join(dir, "script"), LoadOptions{Engine: EngineGpuprep})
	require.ErrorContains(t, err, "an executable inventory (Ansible runs it as an inventory script)")
	_, err = LoadWith(filepath.Join(dir, "plugin.yml"), LoadOptions{Engine: EngineGpuprep})
	require.ErrorContains(t, err, "an inventory plugin's configuration (plugin: ansible.builtin.constructed)")
}

// As root, an inventory another user could change is not handed to
// ansible-inventory, which would run its scripts as root: a script or a
// directory writable by others is refused, naming it.
func TestAnsibleEngineRefusesAnInventoryOthersCanWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the check applies as root")
	}
	ansibleEnv(t)
	dir := writeTree(t, map[string]string{
		"inv/10-gpu.yml": "gpu:\n  hosts:\n    a1:\n",
		"inv/30-script":  "#!/bin/sh\necho '{\"cpu\": {\"hosts\": [\"s1\"]}, \"_meta\": {\"hostvars\": {}}}'\n",
	})
	inv := filepath.Join(dir, "inv")
	require.NoError(t, os.Chmod(dir, 0o755))
	_, err := LoadWith(inv, LoadOptions{})
	require.NoError(t, err)
	require.NoError(t, os.Chmod(filepath.Join(inv, "30-script"), 0o757))
	_, err = LoadWith(inv, LoadOptions{})
	require.ErrorContains(t, err, "not handed to ansible-inventory, which would run its scripts and plugins as root: "+filepath.Join(inv, "30-script"))
	require.NoError(t, os.Chmod(filepath.Join(inv, "30-script"), 0o755))
	require.NoError(t, os.Chmod(inv, 0o777))
	_, err = LoadWith(inv, LoadOptions{})
	require.ErrorContains(t, err, inv+" ")
}
