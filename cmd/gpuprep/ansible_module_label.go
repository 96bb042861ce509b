package main

import "strings"

// labelNothingToDo ends label's line when the labels are already right
// (labelCmd.write, labelCmd.viaAPI): label has no JSON output, and this is
// how it says it changed nothing.
const labelNothingToDo = ": nothing to do"

// ansibleLabel is gpuprep.node.label: gpuprep label (through the API, or
// with before_join into the kubelet's --node-labels). Check mode is label
// --dry-run (for the API a server-side dry run); its output (the files'
// diffs with before_join) is the task's diff.
func ansibleLabel(a *ansibleArgs) ansibleResult {
	if a.str("mode") == "" {
		return ansibleFail("gpuprep.node.label: mode is required: container, vm-passthrough or vm-vgpu")
	}
	argv := a.commonArgv("label")
	for _, k := range []string{"vgpu_config", "node", "kubeconfig", "kubeadm_config"} {
		if v := a.str(k); v != "" {
			argv = append(argv, "--"+dashed(k), v)
		}
	}
	if a.flag("before_join") {
		argv = append(argv, "--before-join")
	}
	if a.checkMode {
		argv = append(argv, "--dry-run")
	}
	code, out, stderr := a.gpuprep(argv...)
	if code != exitOK {
		return failedRun("gpuprep label", code, stderr)
	}
	out = strings.TrimSpace(out)
	changed := !strings.Contains(out, labelNothingToDo)
	r := ansibleResult{"changed": changed, "msg": lastLine(out), "stdout": out}
	if stderr != "" {
		r["warnings"] = []string{stderr}
	}
	if a.diff && changed {
		r["diff"] = ansibleResult{"prepared": out + "\n"}
	}
	return r
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
