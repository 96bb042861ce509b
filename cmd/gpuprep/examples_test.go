package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The files of examples/ are used here as a user would use them: the
// inventories load and select the hosts they say, the vGPU config plans on
// fixture nodes with those GPUs, and the CI jobs' command lines are gpuprep
// command lines this gpuprep takes.

// dryRunHost is what fleet check --dry-run -o json says of a host.
type dryRunHost struct {
	Name, Address, User, Mode, Jump string
	Groups                          []string
}

// fleetDryRun runs fleet check --dry-run -o json with args and returns the
// hosts it would contact.
func fleetDryRun(t *testing.T, args ...string) []dryRunHost {
	t.Helper()
	args = append([]string{"fleet", "check", "--dry-run", "--ssh-config", "none", "-o", "json"}, args...)
	out, errOut, code := gpuprep(t, args...)
	require.Equal(t, 0, code, "gpuprep %s: %s", strings.Join(args, " "), errOut)
	var doc struct{ Hosts []dryRunHost }
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	return doc.Hosts
}

func hostNames(hosts []dryRunHost) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, h.Name)
	}
	return out
}

func hostModes(hosts []dryRunHost) map[string]string {
	out := map[string]string{}
	for _, h := range hosts {
		out[h.Name] = h.Mode
	}
	return out
}

func TestExampleInventory(t *testing.T) {
	inv := "../../examples/inventory.yaml"
	all := fleetDryRun(t, "-i", inv)
	require.Equal(t, []string{"hgx-a01", "hgx-a02", "l40s-b01", "l40s-b02", "a10-c01"}, hostNames(all))
	require.Equal(t, map[string]string{"hgx-a01": "vm-passthrough", "hgx-a02": "vm-passthrough",
		"l40s-b01": "vm-vgpu", "l40s-b02": "vm-vgpu", "a10-c01": "container"}, hostModes(all))
	for _, h := range all {
		require.Equal(t, "ops", h.User, h.Name)
		require.Equal(t, "ops@bastion.gpu.example.net", h.Jump, h.Name)
		require.Contains(t, h.Groups, "gpu", h.Name)
	}
	require.Equal(t, []string{"hgx-a01", "hgx-a02"}, hostNames(fleetDryRun(t, "-i", inv, "--group", "hgx")))
	require.Equal(t, []string{"l40s-b01", "l40s-b02"}, hostNames(fleetDryRun(t, "-i", inv, "--limit", "rack-b")))
	require.Equal(t, []string{"hgx-a01", "l40s-b01", "l40s-b02", "a10-c01"}, hostNames(fleetDryRun(t, "-i", inv, "--limit", "gpu,!hgx-a02")))
}

// The Ansible inventory has group_vars/ beside it: gpuprep hands it to
// ansible-inventory, the oracle, and must get the fleet inventory.yaml
// describes; gpuprep's own reader (--inventory-engine gpuprep, as without
// ansible-core) must get the same, and say which reader read it.
func TestExampleAnsibleInventory(t *testing.T) {
	if _, err := exec.LookPath("ansible-inventory"); err != nil {
		ansibleOracleMissing(t, "ansible-inventory not installed: %v", err)
	}
	// A copy in a directory only this user can write: as root, gpuprep hands
	// ansible-inventory only an inventory no one else could change.
	dir := filepath.Join(t.TempDir(), "ansible")
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../examples/ansible")))
	inv := filepath.Join(dir, "hosts.ini")
	all := fleetDryRun(t, "-i", inv)
	require.Equal(t, map[string]string{"hgx-a01": "vm-passthrough", "hgx-a02": "vm-passthrough",
		"l40s-b01.gpu.example.net": "vm-vgpu", "l40s-b02.gpu.example.net": "vm-vgpu", "a10-c01": "container"}, hostModes(all))
	for _, h := range all {
		require.Equal(t, "ops", h.User, h.Name)
		require.Equal(t, "ops@bastion.gpu.example.net", h.Jump, h.Name)
	}
	require.Equal(t, []string{"hgx-a01", "hgx-a02"}, hostNames(fleetDryRun(t, "-i", inv, "--group", "hgx")))
	own := fleetDryRun(t, "-i", inv, "--inventory-engine", "gpuprep")
	require.Equal(t, hostModes(all), hostModes(own))
	for i, h := range own {
		require.Equal(t, all[i].Name, h.Name)
		require.Equal(t, all[i].Address, h.Address, h.Name)
		require.Equal(t, "ops", h.User, h.Name)
		require.Equal(t, "ops@bastion.gpu.example.net", h.Jump, h.Name)
	}
	_, errOut, code := gpuprep(t, "fleet", "check", "--dry-run", "--ssh-config", "none", "--inventory-engine", "gpuprep", "-i", inv)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, errOut, "gpuprep fleet: inventory "+inv+": read by gpuprep's own reader (--inventory-engine gpuprep), group_vars/ beside the inventory read with Ansible's rules and precedence\n")
	_, errOut, code = gpuprep(t, "fleet", "check", "--dry-run", "--ssh-config", "none", "-i", inv)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, errOut, "gpuprep fleet: inventory "+inv+": read by ansible-inventory (group_vars/ beside the inventory)\n")
}

func TestExampleVGPUConfig(t *testing.T) {
	cfg := "../../examples/vgpu-config.yaml"
	t.Run("h200x-35c on SR-IOV", func(t *testing.T) {
		out, errOut, code := gpuprep(t, "vgpu", "apply", "--root", fixtureRoot(t, "sriov-vgpu"), "-f", cfg, "-c", "h200x-35c", "--dry-run")
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, 4, strings.Count(out, "would write 1430 > /sys/bus/pci/devices/0000:41:00."), out)
	})
	t.Run("t4-mixed on mdev", func(t *testing.T) {
		out, errOut, code := gpuprep(t, "vgpu", "apply", "--root", fixtureRoot(t, "mdev-vgpu"), "-f", cfg, "-c", "t4-mixed", "--dry-run")
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, 4, strings.Count(out, "0000:21:00.0/mdev_supported_types/nvidia-224/create"), out)
		require.Equal(t, 16, strings.Count(out, "0000:41:00.0/mdev_supported_types/nvidia-222/create"), out)
		require.Equal(t, 20, strings.Count(out, "would write"), out)
	})
	// The L40S nodes have no vGPU manager yet: plan asks for its installer
	// and takes the config for their GPUs, and refuses one made for H200s.
	t.Run("l40s-24q planned on L40S", func(t *testing.T) {
		root := fixtureRoot(t, "vgpu-fresh-sriov")
		_, errOut, code := gpuprep(t, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errOut, "--driver FILE is required")
		require.NotContains(t, errOut, "vgpu-devices")
		_, errOut, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "h200x-35c")
		require.Equal(t, exitUsage, code)
		require.Contains(t, errOut, `config "h200x-35c" matches none of the selected GPUs`)
	})
}

// ciCommandLines are the gpuprep command lines of a CI file: every line of
// its run: (GitHub Actions) or script: (GitLab CI) entries whose command is
// gpuprep.
func ciCommandLines(t *testing.T, file string) []string {
	t.Helper()
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(body, &doc))
	var lines []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i].Value, n.Content[i+1]
				if k == "run" && v.Kind == yaml.ScalarNode {
					lines = append(lines, strings.Split(v.Value, "\n")...)
				}
				if k == "script" && v.Kind == yaml.SequenceNode {
					for _, s := range v.Content {
						lines = append(lines, strings.Split(s.Value, "\n")...)
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	var out []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "bin/gpuprep ") || strings.HasPrefix(l, "gpuprep ") {
			out = append(out, l)
		}
	}
	return out
}

// shellWords splits a simple shell command line into its words: quotes
// removed, $NAME and ${NAME} replaced from vars, and everything from the
// first redirection on left out. A line it cannot read fails the test.
func shellWords(t *testing.T, line string, vars map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'' && c != '\'':
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			if quote == c {
				quote = 0
			} else if quote == 0 {
				quote, inWord = c, true
			} else {
				cur.WriteByte(c)
			}
		case c == '$' && quote != '\'':
			j := i + 1
			braced := j < len(line) && line[j] == '{'
			if braced {
				j++
			}
			k := j
			for k < len(line) && (line[k] == '_' || line[k] >= 'A' && line[k] <= 'Z' || line[k] >= '0' && line[k] <= '9') {
				k++
			}
			v, ok := vars[line[j:k]]
			require.True(t, ok, "%s: $%s: no value for it in the test", line, line[j:k])
			cur.WriteString(v)
			inWord = true
			if braced {
				k++
			}
			i = k - 1
		case quote == 0 && (c == '>' || c == '<' || c == '|' || c == ';' || c == '&'):
			if inWord {
				words = append(words, cur.String())
			}
			return words
		case quote == 0 && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	require.Zero(t, quote, "%s: unterminated quote", line)
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func TestExampleCIJobs(t *testing.T) {
	t.Chdir("../..") // the jobs run in the repository's root
	tmp := t.TempDir()
	knownHosts := filepath.Join(tmp, "known_hosts")
	require.NoError(t, os.WriteFile(knownHosts, nil, 0o600))
	vars := map[string]string{"RUNNER_TEMP": tmp, "GPU_KNOWN_HOSTS": knownHosts}
	for _, file := range []string{"examples/ci/github-actions.yml", "examples/ci/gitlab-ci.yml"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			lines := ciCommandLines(t, file)
			gates := 0
			for _, line := range lines {
				words := shellWords(t, line, vars)
				require.Equal(t, "gpuprep", filepath.Base(words[0]), line)
				args := words[1:]
				root := docsTree()
				c, rest, err := root.Find(args)
				require.NoError(t, err, line)
				require.NotEqual(t, root, c, "%s: no gpuprep command", line)
				require.NoError(t, c.ParseFlags(rest), line)
				require.NoError(t, c.ValidateRequiredFlags(), line)
				require.NoError(t, c.ValidateArgs(c.Flags().Args()), line)
				if c.CommandPath() != "gpuprep fleet check" {
					continue
				}
				gates++
				// The gate's own command line, as a dry run: the inventory
				// loads and names hosts.
				out, errOut, code := gpuprep(t, append(args, "--dry-run", "--ssh-config", "none")...)
				require.Equal(t, exitOK, code, "%s: %s", line, errOut)
				require.Contains(t, out, "hgx-a01", line)
			}
			require.Positive(t, gates, "%s has no gpuprep fleet check", file)
		})
	}
}
