package main

import (
	"encoding/json"
	"strings"

	"github.com/gpuprep/gpuprep/provision"
)

// ansibleRollback is gpuprep.node.rollback: gpuprep rollback -o json.
// rollback has no dry run, so in check mode the task is skipped, saying so
// (as AnsibleModule does for a module without check mode support).
func ansibleRollback(a *ansibleArgs) ansibleResult {
	if a.checkMode {
		return ansibleResult{"changed": false, "skipped": true, "msg": "gpuprep rollback has no dry run: skipped in check mode"}
	}
	argv := []string{"rollback", "-o", "json"}
	if a.str("root") != "" {
		argv = append(argv, "--root", a.str("root"))
	}
	if a.flag("system_disk") {
		argv = append(argv, "--system-disk") // an offline image: rollback undoes its files (docs/root.md)
	}
	if a.str("to") != "" {
		argv = append(argv, "--to", a.str("to"))
	}
	if a.str("kubeconfig") != "" {
		argv = append(argv, "--kubeconfig", a.str("kubeconfig"))
	}
	for _, k := range []string{"force", "force_files"} {
		if a.flag(k) {
			argv = append(argv, "--"+dashed(k))
		}
	}
	code, out, stderr := a.gpuprep(argv...)
	var res provision.RollbackResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return failedRun("gpuprep rollback", code, stderr)
	}
	r := ansibleResult{
		"changed":         len(res.Undone) > 0,
		"reboot_required": res.Reboot,
		"exit_code":       code,
		"result":          json.RawMessage(out),
		"msg":             "rolled back",
	}
	if len(res.Undone) == 0 {
		r["msg"] = "nothing to roll back"
	}
	if res.Reboot {
		r["msg"] = "rolled back; reboot the node: " + strings.Join(res.RebootReasons, "; ")
	}
	if code != exitOK && code != exitNeedReboot {
		r["failed"] = true
		r["msg"] = stderr
	}
	return r
}

// dashed: an argument's flag name (force_files: force-files).
func dashed(k string) string { return strings.ReplaceAll(k, "_", "-") }
