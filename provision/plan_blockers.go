package provision

import (
	"slices"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/preflight"
)

// beyondPlan are the checks that no step of a plan changes (the hardware,
// the firmware, the kernel's build): a fail of one keeps the node from
// being ready for the mode whatever apply does. The IOMMU ones count only
// when no reboot is pending: the kernel arguments it brings change them.
var beyondPlan = map[string]bool{"gpu.present": true, "cpu.virtualization": true, "kvm.device": true,
	"iommu.firmware": true, "vfio.modules": true, "vgpu.support": true}

var beyondPlanIOMMU = map[string]bool{"iommu.groups": true, "iommu.interrupt-remapping": true, "iommu.kernel": true}

// changedBy are the steps that can change each check's verdict; a fail of
// one with none of them planned stays after apply.
var changedBy = map[string][]string{
	"vfio.binding":   {StepVFIOBind, StepVFIOUnbind, StepNouveau, StepVGPUInstall, StepVGPUDevices},
	"driver.nouveau": {StepNouveau, StepVFIOBind, StepVFIOUnbind, StepVGPUInstall, StepKernelArgs, StepReboot},
	"vgpu.manager":   {StepVGPUInstall},
	"vgpu.types":     {StepVGPUInstall, StepVGPUDevices},
	"node.label":     {StepLabel},
	"iommu.cmdline":  {StepKernelArgs, StepReboot},
}

// noteBlockers adds to Unaddressed what check fails for the mode that no
// step of the plan changes, with check's own message and remedy: a plan
// (and apply) for a node whose firmware disables VT-x, or without a GPU,
// says it will not be ready.
func (p *Plan) noteBlockers(rebootPending bool) {
	runner := p.opts.Runner
	if runner == nil {
		runner = host.NoRunner{}
	}
	env, err := preflight.NewEnv(p.root, runner, p.opts.Selector, p.opts.Mode)
	if err != nil {
		return
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{Mode: p.opts.Mode})
	if err != nil || res.Modes[p.opts.Mode] == nil {
		return
	}
	blocks := map[string]bool{}
	for _, id := range res.Modes[p.opts.Mode].Blockers {
		blocks[id] = beyondPlan[id] || !rebootPending && beyondPlanIOMMU[id]
		// a fail that only the plan's steps change, and none is planned
		// (e.g. a GPU left unbound while nvidia is loaded)
		if steps, ok := changedBy[id]; ok && !slices.ContainsFunc(steps, func(s string) bool { return p.Step(s) != nil }) {
			blocks[id] = true
		}
	}
	for _, f := range res.Findings {
		if f.Status != preflight.Fail || !blocks[f.Check] || len(f.Modes) > 0 && !slices.Contains(f.Modes, p.opts.Mode) {
			continue
		}
		u := f.Check + " " + f.Subject + ": " + f.Message
		if f.Remedy != "" {
			u += " (" + f.Remedy + ")"
		}
		p.Unaddressed = append(p.Unaddressed, u)
	}
}
