package fleet

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The oracle for group_vars/, host_vars/ and inventory directories: each
// case's tree is read by gpuprep's own reader (LoadWith, engine gpuprep:
// ansible-inventory is never run for it) and by the real Ansible
// (`ansible-inventory -i INV --list`, ansible-core 2.14, yaml and ini
// plugins), from a working directory outside the tree (no playbook
// directory's group_vars), and compared as TestAnsibleOracle compares
// (ansOracleDiffs): hosts, groups, every variable, address, port, user,
// key file, mode and jump. The layouts under testdata/ansible-layouts are
// modelled on kubespray's, DeepOps' and Ansible's documentation's (see the
// README there).

type ansVarsCase struct {
	name      string
	tree      map[string]string // files under the case's directory ("" value with a trailing / : a directory)
	layout    string            // or: this directory of testdata/ansible-layouts
	inv       string            // the -i argument, relative to the case's directory
	setup     func(t *testing.T, dir string)
	knownDiff string
	bug       string
}

var ansVarsCases = []ansVarsCase{
	// The forms of a vars file: NAME, NAME.yml, NAME.yaml, NAME.json.
	{name: "file-forms", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":           "[g]\nh1\nh2\nh3\n[k]\nh4\n",
		"group_vars/all":      "a: from-all\nansible_user: ops\n",
		"group_vars/g.yml":    "b: from-g\nansible_port: 2222\n",
		"group_vars/k.json":   `{"b": "from-k", "ansible_port": 2200, "list": [1, "two"]}`,
		"host_vars/h1.yaml":   "c: from-h1\nansible_host: 192.0.2.1\n",
		"host_vars/h2.json":   `{"ansible_host": "192.0.2.2", "gpuprep_mode": "vm-vgpu"}`,
		"host_vars/h3.yml":    "",
		"host_vars/nobody":    "x: for a host that is not in the inventory\n",
		"group_vars/none.yml": "x: for a group that is not in the inventory\n",
	}},
	// NAME is read before NAME.yml, and then NAME.yml is not: a directory
	// too.
	{name: "bare-name-first", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":             "[g]\nh1\n[k]\nh2\n",
		"group_vars/g":          "x: bare\n",
		"group_vars/g.yml":      "x: yml\ny: yml\n",
		"group_vars/k/main.yml": "x: dir\n",
		"group_vars/k.yml":      "x: yml\ny: yml\n",
		"host_vars/h1.yml":      "z: yml\n",
		"host_vars/h1.yaml":     "z: yaml\nw: yaml\n",
	}},
	// A directory's files in sorted order, depth first; hidden files,
	// backups, other extensions and directories with an extension passed
	// over.
	{name: "dir-sorted-depth-first", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":                 "[g]\nh1\n",
		"group_vars/g/10.yml":       "order: '10'\nten: 1\n",
		"group_vars/g/2.yml":        "order: '2'\ntwo: 1\n",
		"group_vars/g/a/z.yml":      "order: a/z\naz: 1\n",
		"group_vars/g/b":            "order: b\nb: 1\n",
		"group_vars/g/B.json":       `{"order": "B", "upper": 1}`,
		"group_vars/g/.hidden.yml":  "order: hidden\n",
		"group_vars/g/c.yml~":       "order: backup\n",
		"group_vars/g/d.txt":        "order: txt\n",
		"group_vars/g/e.yaml.bak":   "order: bak\n",
		"group_vars/g/f.d/x.yml":    "order: f.d\n",
		"group_vars/g/.git/x.yml":   "order: git\n",
		"group_vars/all/00.yml":     "first: all\n",
		"group_vars/all/nested/1":   "second: all-nested\n",
		"host_vars/h1/01-conn.yml":  "ansible_host: 192.0.2.10\n",
		"host_vars/h1/02-more.yaml": "ansible_host: 192.0.2.11\nansible_port: 2201\n",
	}},
	// Precedence: inventory all < inventory groups < group_vars/all <
	// group_vars/GROUP < inventory host < host_vars.
	{name: "precedence-layers", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini": "[g]\nh1 v4=inv-host v5=inv-host v6=inv-host\nh2\n[all:vars]\nv1=inv-all\nv2=inv-all\nv3=inv-all\nv4=inv-all\nv5=inv-all\nv6=inv-all\n" +
			"[g:vars]\nv2=inv-g\nv3=inv-g\nv4=inv-g\nv5=inv-g\nv6=inv-g\nansible_user=inv-g\n",
		"group_vars/all.yml": "v3: gv-all\nv4: gv-all\nv5: gv-all\nv6: gv-all\nansible_user: gv-all\n",
		"group_vars/g.yml":   "v4: gv-g\nv5: gv-g\nv6: gv-g\n",
		"host_vars/h1.yml":   "v6: hv-h1\n",
	}},
	// Child groups after their parents (depth), then
	// ansible_group_priority (from the inventory file only: in group_vars
	// it is a variable and orders nothing), then name.
	{name: "precedence-depth-priority-name", inv: "hosts.yml", tree: map[string]string{
		"hosts.yml": "all:\n  children:\n    parent:\n      children:\n        child:\n          hosts:\n            h1:\n    b:\n      hosts:\n        h1:\n      vars:\n        ansible_group_priority: 10\n" +
			"    a:\n      hosts:\n        h1:\n    c:\n      hosts:\n        h1:\n",
		"group_vars/parent.yml": "x: parent\ny: parent\n",
		"group_vars/child.yml":  "x: child\n",
		"group_vars/a.yml":      "y: a\nz: a\np: a\n",
		"group_vars/b.yml":      "z: b\n",
		"group_vars/c.yml":      "p: c\nansible_group_priority: 99\n",
	}},
	// A host named as a group: each reads its own directory.
	{name: "host-named-as-group", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":        "[gpu]\ngpu ansible_host=192.0.2.5\nh1\n[gpu:vars]\nx=inv-gpu\n",
		"group_vars/gpu":   "x: gv-gpu\nansible_user: group\n",
		"host_vars/gpu":    "ansible_user: host\n",
		"group_vars/all":   "x: gv-all\n",
		"host_vars/h1.yml": "",
	}},
	// Empty files, comment-only files, a document of --- alone: nothing.
	{name: "empty-files", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":                 "[g]\nh1 ansible_user=inv\n",
		"group_vars/all/aws.yml":    "## To use AWS EBS CSI Driver, uncomment\n# aws_ebs_csi_enabled: true\n",
		"group_vars/all/empty.yml":  "",
		"group_vars/all/dashes.yml": "---\n# containerd_storage_dir: \"/var/lib/containerd\"\n",
		"group_vars/g.yml":          "---\n...\n",
		"host_vars/h1":              "---\n~\n",
	}},
	// A mapping replaces a mapping whole (hash_behaviour replace).
	{name: "structured-replaced-whole", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":          "[g]\nh1\n",
		"group_vars/all.yml": "m: {a: 1, b: 2}\nl: [1, 2]\n",
		"group_vars/g.yml":   "m: {c: 3}\n",
	}},
	// Merge keys and anchors in a vars file.
	{name: "merge-keys", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":        "[g]\nh1\n",
		"group_vars/g.yml": "base: &base\n  ansible_user: ops\n  k: v\nother:\n  <<: *base\n  k: own\nansible_port: 2222\n",
	}},
	// What gpuprep reads, from group_vars and host_vars.
	{name: "connection-vars", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":          "[gpu]\nn1\nn2\nn3\n",
		"group_vars/gpu.yml": "ansible_ssh_common_args: '-o ProxyJump=jump@bastion.example'\ngpuprep_mode: vm-passthrough\nansible_port: 0x16\n",
		"host_vars/n2.yml":   "ansible_ssh_host: 10.0.0.2\nansible_ssh_port: 2202\nansible_ssh_user: u2\ngpuprep_jump: ''\n",
		"host_vars/n3.yml":   "ansible_connection: local\n",
	}},
	// A port in the host pattern is the host's own inventory variable:
	// host_vars beats it, group_vars does not; YAML 1.1 numbers for the
	// port (022 is 18).
	{name: "pattern-port-and-yaml11-port", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":        "[g]\nh1:2222\nh2:2223\nh3\n",
		"group_vars/g.yml": "ansible_port: 2200\n",
		"host_vars/h2.yml": "ansible_port: 022\n",
		"host_vars/h3.yml": "ansible_port: '022'\nansible_user: \"0x10\"\n",
	}},
	// ungrouped has its group_vars too.
	{name: "ungrouped", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":              "h1\n[g]\nh2\n",
		"group_vars/ungrouped":   "x: ungrouped\n",
		"group_vars/g/main.yaml": "x: g\n",
	}},
	// group_vars of a group the inventory does not define apply to no one
	// (kubespray's k8s_cluster, which its playbooks make with group_by).
	{name: "group-not-defined", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":                      "[kube_control_plane]\nnode1\n[kube_node]\nnode2\n",
		"group_vars/k8s_cluster/k8s.yml": "ansible_user: never\n",
	}},
	// A file that is no mapping, and YAML that is not valid: both refuse.
	{name: "vars-file-a-list", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":        "[g]\nh1\n",
		"group_vars/g.yml": "- a\n- b\n",
	}},
	{name: "vars-file-bad-yaml", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":        "[g]\nh1\n",
		"group_vars/g.yml": "a: [1, 2\n",
	}},
	// A FIFO in a vars directory: Ansible passes over what is not a
	// regular file there (is_file), as gpuprep does.
	{name: "fifo-in-vars-dir", inv: "hosts.ini", tree: map[string]string{
		"hosts.ini":          "[g]\nh1\n",
		"group_vars/g/a.yml": "x: a\n",
	}, setup: func(t *testing.T, dir string) {
		if err := syscall.Mkfifo(filepath.Join(dir, "group_vars/g/b.yml"), 0o600); err != nil {
			t.Fatal(err)
		}
	}},

	// Inventory directories.
	{name: "dir-merged-sorted", inv: "inventory", tree: map[string]string{
		"inventory/01-first.yml":         "all:\n  vars:\n    myvar: 1\n  children:\n    g:\n      hosts:\n        h1:\n          x: first\n",
		"inventory/02-second":            "[g]\nh1 x=second\nh2\n[all:vars]\nmyvar=2\n",
		"inventory/03-third.json":        `{"all": {"vars": {"myvar": 3}}, "k": {"hosts": {"h3": {"ansible_port": 2203}}}}`,
		"inventory/hosts.ini":            "[g]\nignored-ini\n",
		"inventory/x.cfg":                "[g]\nignored-cfg\n",
		"inventory/x.bak":                "[g]\nignored-bak\n",
		"inventory/notes.txt":            "[g]\nignored-txt\n",
		"inventory/x.orig":               "[g]\nignored-orig\n",
		"inventory/y~":                   "[g]\nignored-tilde\n",
		"inventory/.hidden":              "[g]\nignored-hidden\n",
		"inventory/README.md":            "# not an inventory\n",
		"inventory/sub/04-nested":        "[g]\nh4\n",
		"inventory/sub/group_vars/g.yml": "x: sub-dir-group-vars-not-read\n",
		"inventory/group_vars/g.yml":     "y: dir-group-vars\n",
		"inventory/host_vars/h2.yml":     "ansible_host: 192.0.2.2\n",
	}},
	// A parent group in a file before its children: Ansible's ini plugin
	// refuses it (the documentation's reason for 01-, 02- prefixes).
	{name: "dir-children-in-later-file", inv: "inventory", tree: map[string]string{
		"inventory/a-parents": "[usa:children]\nsoutheast\n",
		"inventory/b-hosts":   "[southeast]\nh1\n",
	}},
	{name: "dir-children-in-earlier-file", inv: "inventory", tree: map[string]string{
		"inventory/a-hosts":   "[southeast]\nh1\n",
		"inventory/b-parents": "[usa:children]\nsoutheast\n[southeast:vars]\nx=1\n",
	}},
	// Only ignored files: no hosts.
	{name: "dir-only-ignored", inv: "inventory", tree: map[string]string{
		"inventory/hosts.ini":        "[g]\nh1\n",
		"inventory/group_vars/g.yml": "x: 1\n",
	}},

	// The layouts users bring.
	{name: "kubespray-inventory-ini", layout: "kubespray", inv: "inventory/mycluster/inventory.ini"},
	{name: "kubespray-inventory-dir", layout: "kubespray", inv: "inventory/mycluster"},
	{name: "deepops-config", layout: "deepops", inv: "config/inventory"},
	// DeepOps' bastion line uncommented.
	{name: "deepops-config-bastion", layout: "deepops", inv: "config/inventory", setup: func(t *testing.T, dir string) {
		p := filepath.Join(dir, "config/inventory")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), "#ansible_ssh_common_args=", "ansible_ssh_common_args=", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}, knownDiff: "gpuprep reads Ansible's bastion recipe -o ProxyCommand=\"ssh -W %h:%p -q BASTION\" as ProxyJump BASTION (ProxyCommandJump; as ini-proxycommand-bastion)"},
	{name: "ansible-docs-dir", layout: "ansible-docs", inv: "inventory"},
}

func TestAnsibleOracleVarsDirs(t *testing.T) {
	if _, err := os.Stat(ansibleInventoryBin); err != nil {
		oracleMissing(t, "no ansible-inventory at %s (ansible-core): %v", ansibleInventoryBin, err)
	}
	runBugs := os.Getenv("GPUPREP_ORACLE_BUGS") == "1"
	seen := map[string]bool{}
	for _, c := range ansVarsCases {
		if seen[c.name] || (c.tree == nil) == (c.layout == "") {
			t.Fatalf("case %q: duplicate name, or not exactly one of tree and layout", c.name)
		}
		seen[c.name] = true
	}
	start := time.Now()
	t.Run("cases", func(t *testing.T) {
		for _, c := range ansVarsCases {
			c := c
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				oracleSkipBug(t, "Ansible", c.bug, runBugs)
				root := t.TempDir()
				dir := filepath.Join(root, "tree")
				if c.layout != "" {
					copyTree(t, filepath.Join("testdata", "ansible-layouts", c.layout), dir)
				} else {
					writeFiles(t, dir, c.tree)
				}
				if c.setup != nil {
					c.setup(t, dir)
				}
				inv := filepath.Join(dir, c.inv)
				ans, aerr := ansibleList(root, inv, "yaml,ini")
				got, gerr := LoadWith(inv, LoadOptions{Engine: EngineGpuprep})
				if gerr == nil && !strings.HasPrefix(got.Note, "read by gpuprep's own reader") {
					t.Fatalf("read by %q, not gpuprep's own reader", got.Note)
				}
				oracleJudge(t, "Ansible", c.knownDiff, c.bug, ansOracleDiffs(t, ans, aerr, got, gerr), "inventory: "+c.inv)
			})
		}
	})
	t.Logf("%d cases in %v", len(ansVarsCases), time.Since(start).Round(time.Millisecond))
}

// writeFiles writes files (path -> content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
