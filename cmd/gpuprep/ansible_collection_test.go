package main

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

const ansibleGalaxyBin = "/usr/bin/ansible-galaxy"

// make ansible-collection, as the README says to run it: make dist's two
// static binaries (into a temporary DIST) and the collection assembled
// beside them in DIST/ansible_collections/gpuprep/node: galaxy.yml, the
// four modules' documentation and action plugins, the binary module of
// each architecture (the dist file itself, an ELF of that machine, static,
// with its sidecar documentation), the role and the playbook. Then real
// ansible-galaxy (ansible-core 2.14) builds it into an artifact, installs
// that (galaxy.yml becomes its MANIFEST.json), and the installed collection's gpuprep.node.check runs under
// ansible-playbook on a fixture root.
func TestMakeAnsibleCollection(t *testing.T) {
	if testing.Short() {
		t.Skip("make dist: two cross builds")
	}
	for _, p := range []string{ansibleGalaxyBin, ansiblePlaybookBin} {
		if _, err := os.Stat(p); err != nil {
			ansibleOracleMissing(t, "%s is not installed (apt-get install ansible-core)", p)
		}
	}
	dist := t.TempDir()
	mk := exec.Command("make", "ansible-collection", "DIST="+dist, "VERSION=v0.0.0-collection-test")
	mk.Dir = "../.."
	mk.Env = append(os.Environ(), "GOCACHE="+userGoCache(t))
	out, err := mk.CombinedOutput()
	require.NoError(t, err, "make ansible-collection:\n%s", out)
	col := filepath.Join(dist, "ansible_collections/gpuprep/node")

	var galaxy struct {
		Namespace string   `yaml:"namespace"`
		Name      string   `yaml:"name"`
		Version   string   `yaml:"version"`
		Readme    string   `yaml:"readme"`
		Authors   []string `yaml:"authors"`
	}
	b, err := os.ReadFile(filepath.Join(col, "galaxy.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &galaxy))
	require.Equal(t, "gpuprep", galaxy.Namespace)
	require.Equal(t, "node", galaxy.Name)
	require.NotEmpty(t, galaxy.Version)
	require.FileExists(t, filepath.Join(col, galaxy.Readme))
	require.NotEmpty(t, galaxy.Authors)

	for _, m := range []string{"check", "apply", "rollback", "label"} {
		doc, err := os.ReadFile(filepath.Join(col, "plugins/modules", m+".py"))
		require.NoError(t, err)
		for _, part := range []string{"DOCUMENTATION = r'''", "EXAMPLES = r'''", "RETURN = r'''", "module: " + m + "\n"} {
			require.Contains(t, string(doc), part, "%s.py", m)
		}
		require.FileExists(t, filepath.Join(col, "plugins/action", m+".py"))
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		mod := filepath.Join(col, "plugins/modules/gpuprep_linux_"+arch)
		f, err := elf.Open(mod)
		require.NoError(t, err, mod)
		require.Equal(t, machine, f.Machine, mod)
		f.Close()
		requireStatic(t, mod)
		require.Equal(t, sha256Hex(t, filepath.Join(dist, "gpuprep-linux-"+arch)), sha256Hex(t, mod), "the module is make dist's binary")
		require.FileExists(t, mod+".yml", "its documentation")
	}
	for _, p := range []string{"meta/runtime.yml", "roles/prepare/tasks/main.yml", "roles/prepare/defaults/main.yml", "roles/prepare/meta/main.yml", "playbooks/prepare.yml", "plugins/plugin_utils/gpuprep.py"} {
		require.FileExists(t, filepath.Join(col, p))
	}

	// ansible-galaxy's artifact of it, installed, and run
	work := t.TempDir()
	env := append(os.Environ(), "HOME="+filepath.Join(work, "home"), "ANSIBLE_HOME="+filepath.Join(work, "ansible-home"),
		"ANSIBLE_CONFIG="+filepath.Join(work, "none.cfg"), "ANSIBLE_LOCAL_TEMP="+filepath.Join(work, "tmp"),
		"ANSIBLE_REMOTE_TMP="+filepath.Join(work, "remote-tmp"), "ANSIBLE_NOCOLOR=1", "PYTHONDONTWRITEBYTECODE=1")
	build := exec.Command(ansibleGalaxyBin, "collection", "build", "--output-path", filepath.Join(work, "out"))
	build.Dir, build.Env = col, env
	out, err = build.CombinedOutput()
	require.NoError(t, err, "ansible-galaxy collection build:\n%s", out)
	artifact := filepath.Join(work, "out", fmt.Sprintf("gpuprep-node-%s.tar.gz", galaxy.Version))
	names := tarNames(t, artifact)
	for _, n := range []string{"MANIFEST.json", "FILES.json", "plugins/modules/gpuprep_linux_amd64", "plugins/modules/gpuprep_linux_arm64", "plugins/modules/check.py", "playbooks/prepare.yml"} {
		require.Contains(t, names, n, "the artifact")
	}
	inst := filepath.Join(work, "installed")
	install := exec.Command(ansibleGalaxyBin, "collection", "install", "--offline", "-p", inst, artifact)
	install.Env = env
	out, err = install.CombinedOutput()
	require.NoError(t, err, "ansible-galaxy collection install:\n%s", out)
	require.Equal(t, sha256Hex(t, filepath.Join(dist, "gpuprep-linux-"+runtime.GOARCH)),
		sha256Hex(t, filepath.Join(inst, "ansible_collections/gpuprep/node/plugins/modules/gpuprep_linux_"+runtime.GOARCH)))

	root := fixtureRoot(t, "vfio-bound")
	results := filepath.Join(work, "check.json")
	pb := filepath.Join(work, "check.yml")
	require.NoError(t, os.WriteFile(pb, []byte(fmt.Sprintf(`
- hosts: localhost
  gather_facts: false
  tasks:
    - gpuprep.node.check: {mode: vm-passthrough, root: %q}
      register: r
    - ansible.builtin.copy: {dest: %q, content: "{{ r | to_json }}"}
`, root, results)), 0o600))
	play := exec.Command(ansiblePlaybookBin, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=/usr/bin/python3", pb)
	play.Env = append(env, "ANSIBLE_COLLECTIONS_PATH="+inst)
	out, err = play.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err = os.ReadFile(results)
	require.NoError(t, err)
	var res map[string]any
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, true, res["ready"], "%s", b)
	require.Equal(t, false, res["changed"])
}

// tarNames: the paths in a .tar.gz, without a leading "./".
func tarNames(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	r := tar.NewReader(z)
	var names []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		names = append(names, strings.TrimPrefix(h.Name, "./"))
	}
}

// userGoCache is the go build cache of the user running the tests. The
// test process points XDG_CACHE_HOME into a directory of its own
// (internal/testrun), and go's default GOCACHE is below it: a make run with
// that cache compiles every package for both architectures again (486 s
// here under load, against the cached packages' link alone).
func userGoCache(t *testing.T) string {
	t.Helper()
	if c := os.Getenv("GOCACHE"); c != "" {
		return c
	}
	cmd := exec.Command("go", "env", "GOCACHE")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "XDG_CACHE_HOME=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
