package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ansibleDocBin = "/usr/bin/ansible-doc"

// ansibleDocEntry is one plugin of ansible-doc --json (ansible-core
// v2.14.18 lib/ansible/cli/doc.py: doc, examples, return, metadata).
type ansibleDocEntry struct {
	Doc struct {
		Module           string `json:"module"`
		ShortDescription string `json:"short_description"`
		Options          map[string]struct {
			Type string `json:"type"`
		} `json:"options"`
	} `json:"doc"`
	Examples *string        `json:"examples"`
	Return   map[string]any `json:"return"`
}

// ansibleDoc runs ansible-doc --json on the modules names and returns what
// it printed, its error output and exit code.
func ansibleDoc(t *testing.T, names ...string) (map[string]ansibleDocEntry, string, int) {
	t.Helper()
	cmd := exec.Command(ansibleDocBin, append([]string{"--json", "-t", "module"}, names...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return nil, stderr.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	docs := map[string]ansibleDocEntry{}
	require.NoError(t, json.Unmarshal(out, &docs), "%s", out)
	return docs, stderr.String(), 0
}

// docKinds: the Ansible option types (lib/ansible/module_utils/common/
// parameters.py DEFAULT_TYPE_VALIDATORS) as gpuprep's modules take them
// (ansibleParamKinds).
var docKinds = map[string]ansibleParamKind{"str": paramStr, "path": paramStr, "list": paramList, "bool": paramBool}

// Every module's documentation as real ansible-doc reads it from the
// collection make ansible-collection builds: DOCUMENTATION, EXAMPLES and
// RETURN parse; the options are the parameters gpuprep takes (names and
// types, ansibleParams); the examples pass ansible-playbook --syntax-check;
// the role's argument spec parses. A module file whose documentation does
// not parse fails ansible-doc, and so this test.
func TestAnsibleDoc(t *testing.T) {
	if _, err := os.Stat(ansibleDocBin); err != nil {
		ansibleOracleMissing(t, "ansible-doc is not installed (apt-get install ansible-core)")
	}
	dir := ansibleFixtureCollection(t)
	names := ansibleModuleNames()
	var fq []string
	for _, m := range names {
		fq = append(fq, "gpuprep.node."+m)
	}
	binary := "gpuprep_linux_" + runtime.GOARCH
	docs, stderr, code := ansibleDoc(t, append(fq, "gpuprep.node."+binary)...)
	require.Equal(t, 0, code, stderr)
	require.Len(t, docs, len(names)+1)

	var examples strings.Builder
	for _, m := range names {
		d := docs["gpuprep.node."+m]
		assert.Equal(t, m, d.Doc.Module)
		assert.NotEmpty(t, d.Doc.ShortDescription, m)
		require.NotNil(t, d.Examples, "%s: EXAMPLES", m)
		assert.Contains(t, *d.Examples, "gpuprep.node."+m+":", "%s: EXAMPLES use the module", m)
		assert.NotEmpty(t, d.Return, "%s: RETURN", m)
		var opts []string
		for o, spec := range d.Doc.Options {
			opts = append(opts, o)
			kind, ok := docKinds[spec.Type]
			assert.True(t, ok && kind == ansibleParamKinds[o], "%s: option %s: type %q, gpuprep takes it as kind %d", m, o, spec.Type, ansibleParamKinds[o])
		}
		sort.Strings(opts)
		params := append([]string(nil), ansibleParams[m]...)
		sort.Strings(params)
		assert.Equal(t, params, opts, "%s: the documented options are the parameters gpuprep takes", m)
		for _, l := range strings.Split(strings.TrimSpace(*d.Examples), "\n") {
			examples.WriteString("    " + l + "\n")
		}
	}
	assert.Equal(t, binary, docs["gpuprep.node."+binary].Doc.Module, "the binary's sidecar documentation")
	// label's two ways, each an example (through the API: TestAnsibleLabelThroughAPI)
	label := *docs["gpuprep.node.label"].Examples
	assert.Contains(t, label, "before_join: true")
	assert.Contains(t, label, "kubeconfig: ")
	assert.Contains(t, docs["gpuprep.node.label"].Return, "msg")

	pb := filepath.Join(dir, "examples.yml")
	require.NoError(t, os.WriteFile(pb, []byte("- hosts: localhost\n  gather_facts: false\n  tasks:\n"+examples.String()), 0o600))
	out, code := ansiblePlaybook(t, "-i", "localhost,", "--syntax-check", pb)
	assert.Equal(t, 0, code, "the modules' EXAMPLES as a play:\n%s\n%s", examples.String(), out)

	role, err := exec.Command(ansibleDocBin, "--json", "-t", "role", "gpuprep.node.prepare").CombinedOutput()
	require.NoError(t, err, "%s", role)
	assert.Contains(t, string(role), `"gpuprep_reboot_command"`)

	// a documentation YAML error: ansible-doc fails on the module
	mod := filepath.Join(dir, "ansible_collections/gpuprep/node/plugins/modules/check.py")
	src, err := os.ReadFile(mod)
	require.NoError(t, err)
	broken := strings.Replace(string(src), "    type: str\n", "    type: [str\n", 1)
	require.NotEqual(t, string(src), broken)
	require.NoError(t, os.WriteFile(mod, []byte(broken), 0o600))
	_, stderr, code = ansibleDoc(t, "gpuprep.node.check")
	assert.NotEqual(t, 0, code, "a broken DOCUMENTATION")
	assert.Contains(t, stderr, fmt.Sprintf("module %s missing documentation (or could not parse documentation)", "gpuprep.node.check"))
}
