package main

// gpuprep as an Ansible binary module (the gpuprep.node collection, built
// from ansible/ by `make ansible-collection`).
//
// The protocol, as ansible-core v2.14.18 implements it:
//   - lib/ansible/executor/module_common.py (_is_binary, _find_module_utils):
//     a module file whose first 1024 bytes hold a byte outside the text set is
//     module_style "binary": sent as it is, never wrapped (no AnsiballZ
//     payload, no shebang) and never pipelined;
//   - lib/ansible/plugins/action/__init__.py (_execute_module): the file is
//     copied to the remote tmpdir as AnsiballZ_<module file name>, the module
//     arguments (json.dumps of the task's args plus the _ansible_* internals
//     _update_module_args adds: _ansible_check_mode, _ansible_diff, …) to a
//     file "args" beside it, and the command run is `<module> <args file>`
//     (shell build_module_command with arg_path); the module prints one JSON
//     object on stdout, which _parse_returned_data reads;
//   - lib/ansible/plugins/callback/__init__.py (_get_diff): a result's "diff"
//     is a dict (or a list of them) with before/after (and before_header,
//     after_header) or "prepared", a text shown as it is under --diff.
//
// So gpuprep knows it runs as a module by its name: AnsiballZ_ and exactly
// one argument. The collection's action plugin (ansible/…/plugins/action)
// picks the binary of the host's architecture and names the module to run in
// the argument _gpuprep_module. Each module runs gpuprep's own command (check,
// plan, apply, rollback, label) in this process, as the command line would,
// and turns its JSON (or, for label, its text) into the module's result.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ansibleModulePrefix is the name Ansible gives the module file it copies
// to the host (action/__init__.py: 'AnsiballZ_%s' % remote_module_filename).
const ansibleModulePrefix = "AnsiballZ_"

// maxAnsibleArgs bounds the arguments file (a task's args: a few kB).
const maxAnsibleArgs = 1 << 20

// ansibleModuleMain runs gpuprep as an Ansible module when argv says it is
// one (see above): ok false leaves argv to the command line. The module's
// commands reach the machine through d (nil: realDeps).
func ansibleModuleMain(argv []string, stdout io.Writer, d *deps) (code int, ok bool) {
	if len(argv) != 2 || !strings.HasPrefix(filepath.Base(argv[0]), ansibleModulePrefix) {
		return 0, false
	}
	res := runAnsibleModule(argv[1], d)
	b, err := json.Marshal(res)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"failed": true, "msg": "gpuprep: encoding the result: " + err.Error()})
	}
	fmt.Fprintf(stdout, "%s\n", b)
	if res["failed"] == true {
		return 1, true
	}
	return 0, true
}

// ansibleResult is a module's result: changed, failed, msg, diff and the
// module's own keys.
type ansibleResult map[string]any

func ansibleFail(format string, a ...any) ansibleResult {
	return ansibleResult{"failed": true, "changed": false, "msg": fmt.Sprintf(format, a...)}
}

// ansibleModules are the modules, by the name the action plugin passes.
var ansibleModules = map[string]func(*ansibleArgs) ansibleResult{
	"check":    ansibleCheck,
	"apply":    ansibleApply,
	"rollback": ansibleRollback,
	"label":    ansibleLabel,
}

func runAnsibleModule(argsFile string, d *deps) ansibleResult {
	b, err := readBounded(argsFile, maxAnsibleArgs)
	if err != nil {
		return ansibleFail("gpuprep: reading the module arguments: %v", err)
	}
	a, err := parseAnsibleArgs(b)
	if err != nil {
		return ansibleFail("gpuprep: %v", err)
	}
	a.deps = d
	run, ok := ansibleModules[a.module]
	if !ok {
		return ansibleFail("gpuprep: _gpuprep_module %q: want one of %s (run it through the gpuprep.node collection's modules)", a.module, strings.Join(ansibleModuleNames(), ", "))
	}
	if err := a.allow(ansibleParams[a.module]...); err != nil {
		return ansibleFail("gpuprep.node.%s: %v", a.module, err)
	}
	return run(a)
}

func ansibleModuleNames() []string {
	var names []string
	for n := range ansibleModules {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
	}
	return b, nil
}

// gpuprep runs a gpuprep command line in this process, through the
// module's deps, its output captured.
func (a *ansibleArgs) gpuprep(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = executeWith(args, &out, &errb, &globals{deps: a.deps})
	return code, out.String(), strings.TrimSpace(errb.String())
}

// commonArgv is the command line of the arguments every module shares:
// root (and system_disk), mode, select.
func (a *ansibleArgs) commonArgv(cmd ...string) []string {
	argv := append([]string(nil), cmd...)
	if a.str("root") != "" {
		argv = append(argv, "--root", a.str("root"))
	}
	if a.flag("system_disk") {
		argv = append(argv, "--system-disk") // an offline image (docs/root.md)
	}
	if a.str("mode") != "" {
		argv = append(argv, "--mode", a.str("mode"))
	}
	for _, s := range a.list("select") {
		argv = append(argv, "--select", s)
	}
	return argv
}

// failedRun is the result of a command that did not give its JSON: what
// failed, then its error output with gpuprep's "gpuprep: " taken off each
// line (what already names gpuprep).
func failedRun(what string, code int, stderr string) ansibleResult {
	if stderr == "" {
		stderr = fmt.Sprintf("exit %d", code)
	}
	lines := strings.Split(stderr, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "gpuprep: ")
	}
	r := ansibleFail("%s: %s", what, strings.Join(lines, "\n"))
	r["exit_code"] = code
	return r
}
