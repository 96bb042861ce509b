package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The Ansible inventory oracle: each case's inventory (INI or YAML) is
// given both to gpuprep (Parse) and to the real Ansible
// (`ansible-inventory -i FILE --list`, the ini or yaml plugin forced), and
// what gpuprep makes of each host must be what Ansible does:
//
//   - The hosts: every host any group of --list names.
//   - Groups: the groups that hold the host, directly or through children,
//     without "all" (gpuprep's convention: Host.Groups never lists all, and
//     lists ungrouped where Ansible puts the host there), sorted.
//   - Vars: every variable of _meta.hostvars (Ansible's merged variables:
//     group vars by depth, priority and name, then host vars), and no
//     other, in gpuprep's Vars. gpuprep keeps values as strings; Ansible's
//     typed value is compared as "{{ var }}" would render it: a string as
//     it is, a number as Python writes it, a bool as True/False, null as ""
//     (Ansible's templating finalizes None to ''). A list or mapping is
//     compared as data: gpuprep's text (YAML, or the INI value) read as
//     YAML must be the same data.
//   - Address, Port, User, IdentityFiles: as Ansible's ssh connection
//     plugin chooses among Ansible's merged variables (ansible_ssh_host
//     over ansible_host, ansible_ssh_port over ansible_port,
//     ansible_ssh_user over ansible_user, ansible_ssh_private_key_file
//     over ansible_private_key_file; ansible_remote_user is not read), as
//     `ansible -vvv` shows; Address defaults to the name.
//   - Mode: gpuprep_mode. Jump: gpuprep_jump, else the first ProxyJump
//     (-J X, -o ProxyJump=X) in ansible_ssh_args, ansible_ssh_common_args
//     then ansible_ssh_extra_args (a ProxyCommand first: gpuprep refuses
//     the host), in the order Ansible's ssh plugin passes
//     them to ssh (where ssh's first value wins).
//
// Where Ansible refuses the inventory (ansible-inventory fails, or says
// "Unable to parse" and falls back on an empty inventory), gpuprep must
// refuse it too, and the other way round; gpuprep may also refuse an
// inventory Ansible takes when a host in it could not be used anyway (a
// port that is not a TCP port, a gpuprep_mode gpuprep does not know, a key
// file that does not exist), or that has no hosts. Otherwise a case marked
// knownDiff differs in a way gpuprep documents (the difference is
// required, so that a mark left after a fix shows); a case marked bug is
// a difference not accepted: skipped unless GPUPREP_ORACLE_BUGS=1, which
// runs it as an ordinary case.

const ansibleInventoryBin = "/usr/bin/ansible-inventory"

type ansOracleCase struct {
	name      string
	ini       string // an INI inventory (x.ini), or
	yaml      string // a YAML one (x.yaml); {{DIR}} is the case's directory, which holds key.pem
	knownDiff string // documented, deliberate difference: required to differ
	bug       string // undocumented difference: skipped unless GPUPREP_ORACLE_BUGS=1
}

var ansOracleCases = []ansOracleCase{
	// INI: hosts, groups, children.
	{name: "ini-ungrouped", ini: "h1\nh2 ansible_user=u\n"},
	{name: "ini-groups", ini: "[a]\nh1\nh2\n[b]\nh3\n"},
	{name: "ini-group-vars", ini: "[a]\nh1\n[a:vars]\nansible_user=ops\ngpuprep_mode=container\n"},
	{name: "ini-children-multi-level", ini: "[top:children]\nmid\n[mid:children]\nleaf\n[leaf]\nh1\n[mid]\nh2\n" +
		"[top:vars]\nx=top\ny=top\nz=top\n[mid:vars]\nx=mid\ny=mid\n[leaf:vars]\nx=leaf\n"},
	{name: "ini-children-declared-later", ini: "[p:children]\nc\n[p:vars]\nansible_user=p\n[c]\nh1\n"},
	{name: "ini-children-undefined", ini: "h1\n[p:children]\nnope\n"},
	{name: "ini-children-comment", ini: "[p:children] # parents\nc # the child\n[c]\nh1\n"},
	{name: "ini-children-cycle", ini: "[a:children]\nb\n[b:children]\na\n[a]\nh1\n"},
	{name: "ini-vars-undefined-group", ini: "h1\n[x:vars]\na=1\n"},
	{name: "ini-vars-before-group", ini: "[g:vars]\na=1\n[g]\nh1\n"},
	{name: "ini-diamond-depth", ini: "[top:children]\nmid\n[mid:children]\nleaf\n[other:children]\nleaf\n[leaf]\nh1\n" +
		"[top:vars]\nx=top\n[other:vars]\nx=other\ny=other\n[mid:vars]\ny=mid\n"},
	{name: "ini-same-depth-by-name", ini: "[b]\nh1\n[a]\nh1\n[c]\nh1\n[a:vars]\nx=a\n[b:vars]\nx=b\ny=b\n[c:vars]\ny=c\n"},
	{name: "ini-group-priority", ini: "[a]\nh1\n[b]\nh1\n[a:vars]\nx=a\nansible_group_priority=10\n[b:vars]\nx=b\n"},
	{name: "ini-ungrouped-then-group", ini: "h1\n[g]\nh1\n"},
	{name: "ini-all-section", ini: "[all]\nh1\n[g]\nh2\n"},
	{name: "ini-children-quoted-name", ini: "[p:children]\n'g'\n['g']\nh1\n[g]\nh2\n[p:vars]\nansible_user=x\n"},
	{name: "ini-children-hash-in-name", ini: "[p:children]\ng#c\n[g#c]\nh1\n[g]\nh2\n[p:vars]\nansible_user=x\n"},
	{name: "ini-children-quoted-undefined", ini: "h0\n[p:children]\n'g'\n[g]\nh1\n"},
	{name: "ini-ungrouped-children", ini: "[ungrouped:children]\ng\n[g]\nh1\n[ungrouped:vars]\nx=u\n"},
	{name: "ini-cr-line-ends", ini: "h1 ansible_user=u # c\rh2\n"},
	{name: "ini-formfeed-line-end", ini: "h1 x=a\fh2\n"},
	{name: "ini-only-cr", ini: "[g]\rh1\rh2 ansible_port=2222\r"},
	{name: "ini-port-after-dash-label", ini: "h-:2222 ansible_host=10.0.0.1\nh_:2222 ansible_host=10.0.0.2\n"},
	{name: "ini-port-after-trailing-dot", ini: "gpu1.example.com.:2222 ansible_host=10.0.0.1\n"},
	{name: "ini-port-after-ranges", ini: "web[01:02]:2222\n10.0.0.[1:2]:2200\n[fe80::[a:b]]:2201\n"},
	{name: "ini-vars-of-child-only", ini: "[g:vars]\na=1\n[p:children]\ng\n[p]\nh1\n"},
	{name: "ini-child-only-then-vars", ini: "[p:children]\ng\n[p]\nh1\n[g:vars]\na=1\n"},
	{name: "ini-trailing-backslash", ini: "h1 x=a\\\n"},
	{name: "ini-explicit-ungrouped", ini: "[ungrouped]\nh1\n[g]\nh2\n[ungrouped:vars]\nx=u\n"},
	{name: "ini-all-vars", ini: "h1\n[g]\nh2\n[all:vars]\nansible_user=ops\ngpuprep_root=/srv\n"},
	{name: "ini-all-children", ini: "[all:children]\ng\n[g]\nh1\n"},
	{name: "ini-precedence", ini: "[child]\nh1 x=host\nh2\n[parent:children]\nchild\n" +
		"[all:vars]\nx=all\ny=all\nz=all\nw=all\n[parent:vars]\nx=parent\ny=parent\nz=parent\n[child:vars]\nx=child\ny=child\n"},
	{name: "ini-dup-host-two-groups", ini: "[a]\nh1 x=1 y=a\n[b]\nh1 x=2\n[a:vars]\nz=a\n[b:vars]\nz=b\n"},
	{name: "ini-dup-host-port-kept", ini: "[a]\nh1:2222\n[b]\nh1:2223\n"},
	{name: "ini-group-dash-dot", ini: "[gpu-rack.a]\nh1\n[gpu-rack.a:vars]\nansible_user=dash\n"},
	{name: "ini-unicode", ini: "[grüppe]\nhöst ansible_host=10.0.0.1 gpuprep_root=/srv/ünï\n"},
	{name: "ini-unicode-name-as-address", ini: "höst\n",
		knownDiff: "gpuprep takes only ASCII host names as addresses (validAddress in inventory.go: letters, digits, '.', '-', '_')"},

	// INI: ranges.
	{name: "ini-range-numeric", ini: "[g]\nn[1:3]\n"},
	{name: "ini-range-leading-zero", ini: "[g]\nn[01:10]\n"},
	{name: "ini-range-alpha", ini: "[g]\nr[a:c]\n"},
	{name: "ini-range-step", ini: "[g]\nn[0:10:2]\n"},
	{name: "ini-range-alpha-step", ini: "[g]\nn[a:e:2]\n"},
	{name: "ini-range-two", ini: "[g]\nn[1:2]-[a:b].lab\n"},
	{name: "ini-range-port", ini: "[g]\nweb[01:02]:2222 ansible_user=u\n"},
	{name: "ini-range-unequal-width", ini: "[g]\nn[01:100]\n"},
	{name: "ini-range-reversed", ini: "h1\n[g]\nn[5:1]\n"},
	{name: "ini-range-empty-start", ini: "[g]\nn[:2]\n"},
	{name: "ini-range-mixed-case", ini: "[g]\nn[y:B]\n"},
	{name: "ini-range-ipv4", ini: "[g]\n10.0.0.[1:3]\n"},

	// INI: addresses and ports.
	{name: "ini-host-port", ini: "h1:2222\n[g]\nh2:2200 ansible_port=2201\n[g:vars]\nansible_port=2299\n"},
	{name: "ini-ipv4-port", ini: "10.0.0.1:2222\n10.0.0.2\n"},
	{name: "ini-ipv6", ini: "fe80::1\n[fe80::2]:2222\n2001:db8::1 ansible_user=v6\n"},
	{name: "ini-same-group-twice", ini: "[g]\nh1\n[g]\nh2\n[g:vars]\nx=1\n"},
	{name: "ini-empty-key", ini: "h1 =x\n",
		knownDiff: "an empty variable name (h1 =x) is refused: gpuprep names the line rather than keep a variable no template can use"},
	{name: "ini-vars-line-without-equals", ini: "[g]\nh1\n[g:vars]\nx\n"},
	{name: "ini-ssh-forms", ini: "h1 ansible_ssh_host=10.0.0.1 ansible_ssh_port=2222 ansible_ssh_user=u\nh2 ansible_remote_user=r\n"},
	{name: "ini-ssh-forms-both-conn", ini: "[g]\nh1 ansible_host=10.0.0.1 ansible_port=2201 ansible_user=a\n[g:vars]\nansible_ssh_host=10.0.0.2\nansible_ssh_port=2202\nansible_ssh_user=b\n"},
	{name: "ini-key-file-both-conn", ini: "h1 ansible_private_key_file={{DIR}}/nope.pem ansible_ssh_private_key_file={{DIR}}/key.pem\n"},
	{name: "ini-port-leading-zero", ini: "h1 ansible_port=022\n"},
	{name: "ini-port-not-a-number", ini: "h1 ansible_port=22x\n"},
	{name: "ini-port-hex", ini: "h1 ansible_port=0x16\n"},
	{name: "ini-host-ending-colon", ini: "h1:\n"},
	{name: "ini-address-list", ini: "victim ansible_host=victim.corp,x.attacker.example\n",
		knownDiff: "gpuprep refuses an address that is not a host name or IP (validAddress: it is written into known_hosts)"},
	{name: "ini-host-glob-name", ini: "h*1\n",
		knownDiff: "gpuprep refuses a host name that is not a host name or IP (validAddress): Ansible keeps h*1 as a name"},

	// INI: quoting, comments, values.
	{name: "ini-quoted-spaces", ini: "h1 gpuprep_root=\"/srv/a b\" other='x y'\n"},
	{name: "ini-escaped-quotes", ini: `h1 gpuprep_root="a \"b\"" w='it\'` + "\n"},
	{name: "ini-inline-comment", ini: "h1 ansible_user=ops # a comment\nh2 gpuprep_root=\"a # b\" # c\n"},
	{name: "ini-hash-in-unquoted-value", ini: "h1 gpuprep_root=a#b\n"},
	{name: "ini-semicolon-comment", ini: "; a comment\nh1\n  # indented comment\n"},
	{name: "ini-semicolon-after-host", ini: "h1 ; comment\n"},
	{name: "ini-section-comment", ini: "[g] # c\nh1\n[g:vars] # c\nx=1\n"},
	{name: "ini-section-space", ini: "[a b]\nh1\n"},
	{name: "ini-section-unknown-type", ini: "[a:foo]\nh1\n"},
	{name: "ini-equals-in-value", ini: "h1 opts=a=b\n[g]\nh2\n[g:vars]\nopts=c=d=e\n"},
	{name: "ini-empty-value", ini: "h1 x=\n[g]\nh2\n[g:vars]\ny=\n"},
	{name: "ini-key-without-value", ini: "[a]\nh1 ansible_user\n"},
	{name: "ini-literal-eval-agree", ini: "h1 a=True b=1.0 d=[1,2] h=010 i=-3 l=yes m=\"[1, 'a b']\"\n"},
	{name: "ini-literal-eval-numbers", ini: "h1 c=0x10 f=1e3 g=+5 j=1_000\n"},
	{name: "ini-literal-eval-none", ini: "h1 gpuprep_root=None\n"},
	{name: "ini-literal-eval-quoted", ini: "h1 gpuprep_root=\"'/srv/q'\"\n"},
	{name: "ini-literal-eval-group", ini: "[g]\nh1\n[g:vars]\na=True\nb='quoted'\nc={'k': 1}\nd=\"two words\"\n"},
	{name: "ini-group-vars-spaces", ini: "[g]\nh1\n[g:vars]\nx=a b  c\n"},
	{name: "ini-group-vars-comment", ini: "[g]\nh1\n[g:vars]\nx=a # c\n"},
	{name: "ini-group-vars-quoted-comment", ini: "[g]\nh1\n[g:vars]\nx=\"a b\" # c\n"},
	{name: "ini-group-vars-escape", ini: "[g]\nh1\n[g:vars]\nx=\"a\\tb\"\n"},
	{name: "ini-group-vars-spaces-around", ini: "[g]\nh1\n[g:vars]\n  ansible_user  =  ops  \n"},
	{name: "ini-crlf", ini: "h1 ansible_user=u\r\n[g]\r\nh2\r\n[g:vars]\r\nx=1\r\n"},
	{name: "ini-tab", ini: "h1\tansible_user=u\tgpuprep_mode=vm-vgpu\n"},
	{name: "ini-yaml-lookalike", ini: "h1 gpuprep_root=\"/srv/a: b\"\n"},

	// INI: what gpuprep reads.
	{name: "ini-mode", ini: "[g]\nh1\nh2 gpuprep_mode=vm-vgpu\n[g:vars]\ngpuprep_mode=container\n"},
	{name: "ini-bad-mode", ini: "h1 gpuprep_mode=gpu\n"},
	{name: "ini-proxyjump-o", ini: "h1 ansible_ssh_common_args='-o ProxyJump=j@b.example:2200 -o StrictHostKeyChecking=no'\n"},
	{name: "ini-proxyjump-J", ini: "h1 ansible_ssh_common_args=\"-J j@b.example\"\nh2 ansible_ssh_extra_args='-oProxyJump=x.example'\n"},
	{name: "ini-proxyjump-o-space", ini: "h1 ansible_ssh_common_args=\"-o 'ProxyJump j.example'\"\n"},
	{name: "ini-proxyjump-group", ini: "[g]\nh1\n[g:vars]\nansible_ssh_common_args=-o ProxyJump=jump@bastion.example\n"},
	{name: "ini-proxyjump-common-and-extra", ini: "h1 ansible_ssh_common_args='-o ProxyJump=common.example' ansible_ssh_extra_args='-o ProxyJump=extra.example'\n"},
	{name: "ini-proxyjump-ssh-args-first", ini: "h1 ansible_host=127.0.0.9 ansible_ssh_args=\"-o ProxyJump=argsjump.example\" ansible_ssh_common_args=\"-o ProxyJump=common.example\"\n"},
	{name: "ini-proxycommand-bastion", ini: "h1 ansible_host=127.0.0.9 ansible_ssh_common_args=\"-o ProxyCommand=\\\"ssh -W %h:%p bastion.example\\\"\"\n",
		knownDiff: "gpuprep reads Ansible's bastion recipe -o ProxyCommand=\"ssh -W %h:%p bastion\" as ProxyJump bastion (ProxyCommandJump); any other ProxyCommand is refused"},
	{name: "ini-proxycommand-other", ini: "h1 ansible_host=127.0.0.9 ansible_ssh_common_args=\"-o ProxyCommand=\\\"nc -X connect -x proxy.example:3128 %h %p\\\"\"\n"},
	{name: "ini-proxyjump-before-proxycommand", ini: "h1 ansible_ssh_common_args='-J j.example -o ProxyCommand=\"nc %h %p\"'\n"},
	{name: "ini-gpuprep-jump-wins", ini: "h1 gpuprep_jump=j.example ansible_ssh_common_args='-J other.example'\n"},
	{name: "ini-key-file", ini: "[g]\nh1\n[g:vars]\nansible_ssh_private_key_file={{DIR}}/key.pem\n"},
	{name: "ini-key-file-missing", ini: "h1 ansible_ssh_private_key_file={{DIR}}/nope.pem\n"},

	// YAML. Hosts sit in groups, apart from the cases about all.hosts.
	{name: "yaml-all-hosts", yaml: "all:\n  hosts:\n    h1:\n    h2:\n      ansible_user: u\n"},
	{name: "yaml-all-hosts-flow", yaml: "{all: {hosts: {h1: {ansible_port: 2222, ansible_host: 10.0.0.1}}}}\n"},
	{name: "yaml-flow", yaml: "{g: {hosts: {h1: {ansible_port: 2222, ansible_host: 10.0.0.1}}}}\n"},
	{name: "yaml-top-level-group", yaml: "gpu:\n  hosts:\n    h1:\n  vars:\n    gpuprep_mode: container\n"},
	{name: "yaml-children-nesting", yaml: `all:
  vars: {x: all, y: all, z: all, w: all}
  children:
    top:
      vars: {x: top, y: top, z: top}
      children:
        mid:
          vars: {x: mid, y: mid}
          hosts:
            h2:
          children:
            leaf:
              vars: {x: leaf}
              hosts:
                h1:
`},
	{name: "yaml-host-port-keys", yaml: "g:\n  hosts:\n    h1:2222:\n    \"[::1]:2224\":\n    h3:2225: {ansible_port: 2200}\n    10.0.0.1:2226:\n"},
	{name: "yaml-null-host-and-groups", yaml: "all:\n  children:\n    g:\n      hosts:\n        h1: ~\n    k: {}\n    e:\n"},
	{name: "yaml-range-keys", yaml: "all:\n  children:\n    g:\n      hosts:\n        n[01:03]:\n          ansible_user: r\n        m[a:b]:2222:\n"},
	{name: "yaml-precedence", yaml: `all:
  vars: {ansible_user: all, gpuprep_root: /all}
  children:
    parent:
      vars: {ansible_user: parent, gpuprep_mode: vm-passthrough}
      children:
        child:
          vars: {gpuprep_mode: container}
          hosts:
            h1: {ansible_user: host}
            h2:
`},
	{name: "yaml-group-twice", yaml: `all:
  children:
    g:
      hosts: {h1: }
      vars: {x: first}
    p:
      children:
        g:
          hosts: {h2: }
          vars: {y: second}
`},
	{name: "yaml-host-twice", yaml: "all:\n  children:\n    a:\n      hosts:\n        h1: {x: a, y: a}\n    b:\n      hosts:\n        h1: {x: b}\n"},
	{name: "yaml-typed-vars", yaml: `g:
  hosts:
    h1:
      i: 5
      b: true
      c: False
      l: [1, two]
      m: {k: v}
      n: null
      s: "quoted"
      f: 1.5
`},
	{name: "yaml-1.1-bools", yaml: "g:\n  hosts:\n    h1:\n      b: yes\n      c: off\n      d: On\n"},
	{name: "yaml-1.1-numbers", yaml: "g:\n  hosts:\n    h1:\n      o: 010\n      d: 550.90\n      x: 0x1F\n      u: 1_000\n      t: 1:20\n",
		knownDiff: "gpuprep keeps a YAML variable's text as written (YAML 1.2 plain scalars); PyYAML's YAML 1.1 would make 010 8 and the PCI address 0000:41:00.0 the float 2460.0. Only the connection port is read as YAML 1.1 (yaml11Int)"},
	{name: "yaml-port-string", yaml: "g:\n  hosts:\n    h1: {ansible_port: '2222'}\n"},
	{name: "yaml-port-octal", yaml: "g:\n  hosts:\n    h1: {ansible_port: 010}\n"},
	{name: "yaml-proxyjump", yaml: "all:\n  vars:\n    ansible_ssh_common_args: '-o ProxyJump=jump@bastion.example:2200'\n  children:\n    g:\n      hosts:\n        h1:\n        h2:\n          ansible_ssh_common_args: '-J other.example'\n"},
	{name: "yaml-hosts-string", yaml: "g:\n  hosts: h1\n"},
	{name: "yaml-children-string", yaml: "p:\n  children: g\ng:\n  hosts: {h1: }\n"},
	{name: "yaml-unknown-key", yaml: "g:\n  hosts: {h1: }\n  hostz: {h2: }\n",
		knownDiff: "gpuprep refuses a misspelt group field (TestBadInventoriesNameFileLineField: bad-ansible.yaml); Ansible warns and skips it"},
	{name: "yaml-group-list-value", yaml: "g: [h1]\nh:\n  hosts: {h2: }\n",
		knownDiff: "where Ansible warns and passes over part of an inventory (a group that is not a mapping, a misspelt field), gpuprep stops naming the file and line: a fleet run must not leave hosts out silently (see ansible.go)"},
	{name: "yaml-duplicate-key", yaml: "g:\n  hosts:\n    h1: {x: 1}\n    h1: {x: 2}\n"},
	{name: "yaml-int-host-key", yaml: "g:\n  hosts:\n    5:\n    h1:\n"},
	{name: "yaml-hosts-list", yaml: "g:\n  hosts:\n    - h1\n"},
	{name: "yaml-vars-list", yaml: "g:\n  vars: [1]\n  hosts: {h1: }\n"},
	{name: "yaml-host-vars-scalar", yaml: "g:\n  hosts:\n    h1: 5\n"},
	{name: "yaml-empty", yaml: "# nothing\n"},
	{name: "yaml-alias-host-vars", yaml: "g:\n  hosts:\n    h1: &v {ansible_user: ops, gpuprep_mode: container}\n    h2: *v\n"},
	{name: "yaml-group-merge-key", yaml: "base: &base\n  vars: {ansible_user: ops, gpuprep_mode: container}\n  hosts: {h0: }\ng:\n  <<: *base\n  hosts:\n    h1:\n"},
	{name: "yaml-merge-key", yaml: "g:\n  hosts:\n    h1: &v {ansible_user: ops, gpuprep_mode: container}\n    h2:\n      <<: *v\n      ansible_user: other\n"},
	{name: "yaml-explicit-ungrouped", yaml: "all:\n  children:\n    ungrouped:\n      hosts: {h1: , h2: }\n    g:\n      hosts: {h1: }\n"},
	{name: "yaml-ipv6", yaml: "g:\n  hosts:\n    2001:db8::1:\n    \"[fe80::2]:2222\":\n"},
	{name: "yaml-unicode", yaml: "grüppe:\n  hosts:\n    höst: {ansible_host: 10.0.0.1, gpuprep_root: /srv/ünï}\n"},
	{name: "yaml-key-file", yaml: "all:\n  vars:\n    ansible_private_key_file: '{{DIR}}/key.pem'\n  children:\n    g:\n      hosts: {h1: }\n"},
	{name: "yaml-remote-user", yaml: "all:\n  vars: {ansible_remote_user: r}\n  children:\n    g:\n      hosts:\n        h1:\n        h2: {ansible_ssh_user: s}\n"},
	{name: "yaml-remote-user-conn", yaml: "g:\n  hosts:\n    h1: {ansible_remote_user: r}\n"},
	{name: "yaml-group-priority", yaml: "all:\n  children:\n    a:\n      vars: {x: a, ansible_group_priority: 10}\n      hosts: {h1: }\n    b:\n      vars: {x: b}\n      hosts: {h1: }\n"},
	{name: "yaml-bad-mode", yaml: "g:\n  hosts:\n    h1: {gpuprep_mode: vm}\n"},
	{name: "yaml-cycle", yaml: "all:\n  children:\n    a:\n      hosts: {h1: }\n      children:\n        b:\n          children:\n            a:\n"},
}

func TestAnsibleOracle(t *testing.T) {
	if _, err := os.Stat(ansibleInventoryBin); err != nil {
		oracleMissing(t, "no ansible-inventory at %s (ansible-core): %v", ansibleInventoryBin, err)
	}
	runBugs := os.Getenv("GPUPREP_ORACLE_BUGS") == "1"
	seen := map[string]bool{}
	for _, c := range ansOracleCases {
		if seen[c.name] || (c.ini == "") == (c.yaml == "") {
			t.Fatalf("case %q: duplicate name, or not exactly one of ini and yaml", c.name)
		}
		seen[c.name] = true
	}
	start := time.Now()
	t.Run("cases", func(t *testing.T) {
		for _, c := range ansOracleCases {
			c := c
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				oracleSkipBug(t, "Ansible", c.bug, runBugs)
				text, diffs := ansOracleCompare(t, c)
				oracleJudge(t, "Ansible", c.knownDiff, c.bug, diffs, "inventory:\n"+text)
			})
		}
	})
	t.Logf("%d cases in %v", len(ansOracleCases), time.Since(start).Round(time.Millisecond))
}

// ansAnswer is what ansible-inventory --list says.
type ansAnswer struct {
	hosts    []string                  // sorted
	groups   map[string][]string       // host -> groups holding it (no all), sorted
	hostvars map[string]map[string]any // _meta.hostvars (numbers as json.Number)
	stderr   string
}

// ansOracleCompare runs one case through Ansible and gpuprep and returns the
// inventory text and how they differ.
func ansOracleCompare(t *testing.T, c ansOracleCase) (string, []string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text, base, plugin := c.ini, "x.ini", "ini"
	if c.yaml != "" {
		text, base, plugin = c.yaml, "x.yaml", "yaml"
	}
	text = strings.ReplaceAll(text, "{{DIR}}", dir)
	file := filepath.Join(dir, base)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}

	ans, aerr := ansibleList(dir, file, plugin)
	inv, gerr := Parse(file, []byte(text))
	return text, ansOracleDiffs(t, ans, aerr, inv, gerr)
}

// ansOracleDiffs says how gpuprep's reading of an inventory (inv, or its
// error gerr) differs from Ansible's (ans, or its error aerr).
func ansOracleDiffs(t *testing.T, ans *ansAnswer, aerr error, inv *Inventory, gerr error) []string {
	if aerr != nil {
		if gerr != nil {
			t.Logf("both refuse: Ansible: %v; gpuprep: %v", aerr, gerr)
			return nil
		}
		return []string{fmt.Sprintf("Ansible refuses (%v) but gpuprep accepts: %s", aerr, ansGpuprepSummary(inv))}
	}
	if ans.stderr != "" {
		t.Logf("ansible-inventory says: %s", strings.TrimSpace(ans.stderr))
	}

	// What gpuprep should make of each host.
	want := map[string]*Host{}
	var unusable []string          // reasons gpuprep may refuse the inventory
	problem := map[string]string{} // hosts gpuprep keeps but will not contact, and why
	if inv != nil {
		for _, h := range inv.Hosts {
			if h.Problem != "" {
				problem[h.Name] = h.Problem
			}
		}
	}
	for _, n := range ans.hosts {
		h, why := ansExpectHost(n, ans.groups[n], ans.hostvars[n])
		want[n] = h
		switch {
		case why != "" && problem[n] != "":
			t.Logf("host %q: %s; gpuprep will not contact it: %s", n, why, problem[n])
			h.Problem = problem[n] // that host's own problem, as gpuprep says
		case why != "":
			unusable = append(unusable, fmt.Sprintf("host %q: %s", n, why))
		}
	}
	if len(ans.hosts) == 0 {
		unusable = append(unusable, "no hosts")
	}

	switch {
	case gerr != nil && len(unusable) > 0:
		t.Logf("Ansible takes the inventory, but %s; gpuprep refuses: %v", strings.Join(unusable, "; "), gerr)
		return nil
	case gerr != nil:
		return []string{fmt.Sprintf("gpuprep refuses (%v) but Ansible accepts: %s", gerr, ansSummary(ans))}
	case len(unusable) > 0:
		return []string{fmt.Sprintf("gpuprep accepts, but %s: %s", strings.Join(unusable, "; "), ansGpuprepSummary(inv))}
	}

	var diffs []string
	got := map[string]*Host{}
	var gotNames []string
	for _, h := range inv.Hosts {
		got[h.Name] = h
		gotNames = append(gotNames, h.Name)
	}
	sort.Strings(gotNames)
	if strings.Join(gotNames, ",") != strings.Join(ans.hosts, ",") {
		diffs = append(diffs, fmt.Sprintf("hosts: Ansible %q, gpuprep %q", ans.hosts, gotNames))
	}
	for _, n := range ans.hosts {
		g, w := got[n], want[n]
		if g == nil {
			continue
		}
		differ := func(what string, a, b any) {
			diffs = append(diffs, fmt.Sprintf("host %q %s: Ansible %q, gpuprep %q", n, what, a, b))
		}
		if g.Address != w.Address {
			differ("address", w.Address, g.Address)
		}
		if g.Port != w.Port {
			differ("port", strconv.Itoa(w.Port), strconv.Itoa(g.Port))
		}
		if g.User != w.User {
			differ("user", w.User, g.User)
		}
		if g.Mode != w.Mode {
			differ("mode", w.Mode, g.Mode)
		}
		if g.Jump != w.Jump {
			differ("jump", w.Jump, g.Jump)
		}
		if strings.Join(g.IdentityFiles, "\n") != strings.Join(w.IdentityFiles, "\n") {
			differ("identity files", w.IdentityFiles, g.IdentityFiles)
		}
		gg := append([]string(nil), g.Groups...)
		sort.Strings(gg)
		if strings.Join(gg, ",") != strings.Join(w.Groups, ",") {
			differ("groups", w.Groups, gg)
		}
		diffs = append(diffs, ansCompareVars(n, ans.hostvars[n], g.Vars)...)
	}
	if len(diffs) == 0 {
		t.Logf("agree: %s", ansSummary(ans))
	}
	return diffs
}

// ansCompareVars compares Ansible's merged variables of host n with
// gpuprep's Vars.
func ansCompareVars(n string, av map[string]any, gv map[string]string) []string {
	var diffs []string
	keys := map[string]bool{}
	for k := range av {
		keys[k] = true
	}
	for k := range gv {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		a, aok := av[k]
		g, gok := gv[k]
		switch {
		case !aok:
			diffs = append(diffs, fmt.Sprintf("host %q var %s: Ansible has none, gpuprep %q", n, k, g))
		case !gok:
			diffs = append(diffs, fmt.Sprintf("host %q var %s: Ansible %s, gpuprep has none", n, k, ansJSON(a)))
		default:
			if b, ok := a.(bool); ok {
				// A bool is compared as a bool: gpuprep keeps the word the
				// inventory wrote, which must be one Ansible reads as b.
				if w, ok := ansYAML11Bools[g]; !ok || w != b {
					diffs = append(diffs, fmt.Sprintf("host %q var %s: Ansible %v, gpuprep %q", n, k, b, g))
				}
				continue
			}
			if s, ok := ansScalar(a); ok {
				if s != g {
					diffs = append(diffs, fmt.Sprintf("host %q var %s: Ansible %s (renders %q), gpuprep %q", n, k, ansJSON(a), s, g))
				}
				continue
			}
			var data any
			if err := yaml.Unmarshal([]byte(g), &data); err != nil || ansJSON(data) != ansJSON(a) {
				diffs = append(diffs, fmt.Sprintf("host %q var %s: Ansible %s, gpuprep %q (as data %s)", n, k, ansJSON(a), g, ansJSON(data)))
			}
		}
	}
	return diffs
}

// ansYAML11Bools are the words PyYAML (YAML 1.1, as Ansible loads YAML)
// reads as booleans, and Python's True and False (INI values).
var ansYAML11Bools = map[string]bool{
	"yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true,
	"no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false,
}

// ansExpectHost is the Host gpuprep should make of Ansible's host n, and
// why it could not be used ("" if it can). Address, Port, User and the key
// file are expected as Ansible's ssh connection plugin chooses among the
// variables (the last defined of ansible_host/ansible_ssh_host,
// ansible_port/ansible_ssh_port, ansible_user/ansible_ssh_user,
// ansible_private_key_file/ansible_ssh_private_key_file;
// ansible_remote_user is not read), as `ansible -vvv` shows.
func ansExpectHost(n string, groups []string, vars map[string]any) (*Host, string) {
	hostKeys := []string{"ansible_ssh_host", "ansible_host"}
	portKeys := []string{"ansible_ssh_port", "ansible_port"}
	userKeys := []string{"ansible_ssh_user", "ansible_user"}
	keyKeys := []string{"ansible_ssh_private_key_file", "ansible_private_key_file"}
	h := &Host{Name: n, Address: n, Groups: groups}
	str := func(keys ...string) (string, string, bool) {
		for _, k := range keys {
			if v, ok := vars[k]; ok {
				s, _ := ansScalar(v)
				return s, k, true
			}
		}
		return "", "", false
	}
	if s, _, ok := str(hostKeys...); ok {
		h.Address = s
	}
	if s, k, ok := str(portKeys...); ok {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p <= 0 || p > 65535 {
			return h, fmt.Sprintf("%s %q is not a TCP port", k, s)
		}
		h.Port = p
	}
	h.User, _, _ = str(userKeys...)
	h.Mode, _, _ = str("gpuprep_mode")
	if h.Mode != "" && !validModes[h.Mode] {
		return h, fmt.Sprintf("gpuprep_mode %q is not a mode", h.Mode)
	}
	if s, k, ok := str(keyKeys...); ok && s != "" {
		if fi, err := os.Stat(s); err != nil || !fi.Mode().IsRegular() {
			return h, fmt.Sprintf("%s %q is not a file", k, s)
		}
		h.IdentityFiles = []string{s}
	}
	if s, _, ok := str("gpuprep_jump"); ok {
		h.Jump = s
	} else {
		// The ssh plugin's order; ssh takes the first ProxyJump or
		// ProxyCommand, and gpuprep refuses a ProxyCommand.
		for _, k := range []string{"ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args"} {
			if s, _, ok := str(k); ok {
				j, isCmd := ansProxyJump(s)
				if isCmd {
					return h, fmt.Sprintf("%s has a ProxyCommand", k)
				}
				if j != "" {
					h.Jump = j
					break
				}
			}
		}
	}
	return h, ""
}

// ansProxyJump finds the first -J X, -JX, -o ProxyJump=X, -oProxyJump=X or
// -o 'ProxyJump X' in ssh arguments (quotes as the shell takes them, no
// backslashes: the cases use none), or says a ProxyCommand comes first.
func ansProxyJump(s string) (string, bool) {
	var f []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				f = append(f, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		f = append(f, cur.String())
	}
	opt := func(o string) (string, bool) {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			k, v, ok = strings.Cut(o, " ")
		}
		k = strings.TrimSpace(k)
		return strings.TrimSpace(v), ok && (strings.EqualFold(k, "proxyjump") || strings.EqualFold(k, "proxycommand"))
	}
	isCmd := func(o string) bool { return strings.HasPrefix(strings.ToLower(strings.TrimSpace(o)), "proxycommand") }
	for i := 0; i < len(f); i++ {
		switch {
		case f[i] == "-J" && i+1 < len(f):
			return f[i+1], false
		case strings.HasPrefix(f[i], "-J") && len(f[i]) > 2:
			return f[i][2:], false
		case f[i] == "-o" && i+1 < len(f):
			if v, ok := opt(f[i+1]); ok {
				return v, isCmd(f[i+1])
			}
			i++
		case strings.HasPrefix(f[i], "-o") && len(f[i]) > 2:
			if v, ok := opt(f[i][2:]); ok {
				return v, isCmd(f[i][2:])
			}
		}
	}
	return "", false
}

// ansScalar renders a scalar of Ansible's JSON as "{{ var }}" would; ok is
// false for a list or mapping.
func ansScalar(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", true
	case string:
		return v, true
	case bool:
		if v {
			return "True", true
		}
		return "False", true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

// ansJSON is v as JSON, for comparing data and for messages.
func ansJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// ansibleList runs ansible-inventory --list on file with the plugin forced,
// everything it may write kept under dir, and reads its answer. An error is
// Ansible refusing the inventory.
func ansibleList(dir, file, plugin string) (*ansAnswer, error) {
	cfg := filepath.Join(dir, "ansible.cfg")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(ansibleInventoryBin, "-i", file, "--list")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + filepath.Join(dir, "home"),
		"LC_ALL=C.UTF-8",
		"ANSIBLE_CONFIG=" + cfg,
		"ANSIBLE_HOME=" + filepath.Join(dir, "ansible-home"),
		"ANSIBLE_LOCAL_TEMP=" + filepath.Join(dir, "ansible-tmp"),
		"ANSIBLE_INVENTORY_ENABLED=" + plugin,
		"ANSIBLE_INVENTORY_UNPARSED_FAILED=1",
		"ANSIBLE_NOCOLOR=1",
		"COLUMNS=10000", // warnings on one line
		"ANSIBLE_FORCE_COLOR=0",
		"PYTHONDONTWRITEBYTECODE=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	se := stderr.String()
	switch {
	case err != nil:
		return nil, fmt.Errorf("ansible-inventory: %v: %s", err, ansOneLine(se))
	case strings.Contains(se, "Unable to parse"):
		return nil, fmt.Errorf("ansible-inventory: %s", ansOneLine(se))
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("ansible-inventory's JSON: %v", err)
	}
	a := &ansAnswer{groups: map[string][]string{}, hostvars: map[string]map[string]any{}, stderr: se}
	var meta struct {
		Hostvars map[string]map[string]any `json:"hostvars"`
	}
	type group struct {
		Hosts    []string `json:"hosts"`
		Children []string `json:"children"`
	}
	parents := map[string][]string{}
	direct := map[string][]string{} // host -> groups listing it
	for name, msg := range raw {
		d := json.NewDecoder(bytes.NewReader(msg))
		d.UseNumber()
		if name == "_meta" {
			if err := d.Decode(&meta); err != nil {
				return nil, fmt.Errorf("ansible-inventory's _meta: %v", err)
			}
			continue
		}
		var g group
		if err := d.Decode(&g); err != nil {
			return nil, fmt.Errorf("ansible-inventory's group %s: %v", name, err)
		}
		for _, c := range g.Children {
			parents[c] = append(parents[c], name)
		}
		for _, h := range g.Hosts {
			direct[h] = append(direct[h], name)
		}
	}
	for h, gs := range direct {
		a.hosts = append(a.hosts, h)
		in := map[string]bool{}
		var up func(g string)
		up = func(g string) {
			if in[g] {
				return
			}
			in[g] = true
			for _, p := range parents[g] {
				up(p)
			}
		}
		for _, g := range gs {
			up(g)
		}
		var list []string
		for g := range in {
			if g != "all" {
				list = append(list, g)
			}
		}
		sort.Strings(list)
		a.groups[h] = list
		a.hostvars[h] = meta.Hostvars[h]
	}
	sort.Strings(a.hosts)
	return a, nil
}

func ansOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ansSummary is Ansible's answer in one line.
func ansSummary(a *ansAnswer) string {
	var b strings.Builder
	for _, h := range a.hosts {
		fmt.Fprintf(&b, "%s groups=%q vars=%s; ", h, a.groups[h], ansJSON(a.hostvars[h]))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// ansGpuprepSummary is gpuprep's answer in one line.
func ansGpuprepSummary(inv *Inventory) string {
	var b strings.Builder
	for i, h := range inv.Hosts {
		if i == 5 {
			fmt.Fprintf(&b, "… %d more", len(inv.Hosts)-i)
			break
		}
		fmt.Fprintf(&b, "%s address=%q port=%d user=%q mode=%q jump=%q groups=%q vars=%q; ",
			h.Name, h.Address, h.Port, h.User, h.Mode, h.Jump, h.Groups, h.Vars)
	}
	return strings.TrimSuffix(b.String(), "; ")
}
