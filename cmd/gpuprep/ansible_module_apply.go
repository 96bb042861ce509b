package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/provision"
)

// ansibleApply is gpuprep.node.apply: the workflow. In check mode it is
// gpuprep plan (changed: the plan has steps); otherwise gpuprep apply --yes.
// With --diff the plan, as gpuprep plan prints it, is the task's diff. A
// result with reboot_required true asks the play to reboot the node
// (ansible.builtin.reboot) and apply again, as the gpuprep.node.prepare
// role does.
func ansibleApply(a *ansibleArgs) ansibleResult {
	if a.str("mode") == "" {
		return ansibleFail("gpuprep.node.apply: mode is required: container, vm-passthrough or vm-vgpu")
	}
	var diff ansibleResult
	if a.diff || a.checkMode {
		code, text, stderr := a.gpuprep(a.provisionArgv("plan", "-o", "text")...)
		if code != exitOK {
			return failedRun("gpuprep plan", code, stderr)
		}
		diff = ansibleResult{"prepared": text}
	}
	if a.checkMode {
		return ansiblePlan(a, diff)
	}
	code, out, stderr := a.gpuprep(a.provisionArgv("apply", "--yes", "-o", "json")...)
	var res applyResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome == nil {
		return failedRun("gpuprep apply", code, stderr)
	}
	r := ansibleResult{
		"changed":         applyChanged(res.Outcome),
		"reboot_required": res.Outcome.Reboot,
		"exit_code":       code,
		"plan":            res.Plan,
		"outcome":         res.Outcome,
	}
	if res.Outcome.RebootFor != "" {
		r["reboot_for"] = res.Outcome.RebootFor
	}
	if res.Report != nil {
		r["ready"] = res.Report.Ready
		r["report"] = res.Report
	}
	if a.diff && len(res.Plan.Steps) > 0 {
		r["diff"] = diff
	}
	switch code {
	case exitOK:
		r["msg"] = "ready for " + res.Mode
	case exitNeedReboot:
		r["msg"] = "reboot the node, then apply again (" + res.Outcome.RebootFor + ")"
	default:
		r["failed"] = true
		r["msg"] = stderr
		if res.Error != "" {
			r["msg"] = res.Error
		} else if res.Report != nil && !res.Report.Ready {
			r["msg"] = "not ready for " + res.Mode + " after apply: " + checkMessage(res.Report, true)
		}
		if r["msg"] == "" {
			r["msg"] = fmt.Sprintf("gpuprep apply: exit %d", code)
		}
	}
	return r
}

// ansiblePlan is apply in check mode: the plan, nothing changed.
func ansiblePlan(a *ansibleArgs, diff ansibleResult) ansibleResult {
	code, out, stderr := a.gpuprep(a.provisionArgv("plan", "-o", "json")...)
	var p provision.Plan
	if code != exitOK || json.Unmarshal([]byte(out), &p) != nil {
		return failedRun("gpuprep plan", code, stderr)
	}
	reboot := false
	for _, s := range p.Steps {
		reboot = reboot || s.ID == provision.StepReboot
	}
	r := ansibleResult{
		"changed":         len(p.Steps) > 0,
		"reboot_required": reboot,
		"plan":            json.RawMessage(out),
		"msg":             fmt.Sprintf("check mode: %s planned, nothing changed", plural.N(len(p.Steps), "step")),
	}
	if a.diff && len(p.Steps) > 0 {
		r["diff"] = diff
	}
	if len(p.Unaddressed) > 0 {
		// apply would run the steps and end not ready: its failure, foretold
		r["failed"] = true
		r["msg"] = "check mode: not ready for " + p.Mode + " after apply, no step changes: " + strings.Join(p.Unaddressed, "; ")
	}
	return r
}

// applyChanged: a step ran (done, or rebooting).
func applyChanged(oc *provision.Outcome) bool {
	for _, s := range oc.Steps {
		if s.Status == "done" || s.Status == "rebooting" {
			return true
		}
	}
	return false
}

// provisionArgv: plan's and apply's command line from the arguments.
func (a *ansibleArgs) provisionArgv(cmd ...string) []string {
	argv := a.commonArgv(cmd...)
	for _, k := range []string{"vgpu_config_file", "vgpu_config", "driver", "kubeconfig", "node"} {
		if v := a.str(k); v != "" {
			argv = append(argv, "--"+dashed(k), v)
		}
	}
	for _, k := range []string{"nvswitch", "force"} {
		if a.flag(k) {
			argv = append(argv, "--"+k)
		}
	}
	return argv
}
