package provision

import (
	"context"

	"github.com/gpuprep/gpuprep/internal/effect"
)

// vgpuInstallStep (StepVGPUInstall, vm-vgpu): the vGPU manager installed
// or upgraded (vgpu.Install; planned by planInstall). Its files are
// journalled and restored by rollback; the driver stays installed (a note
// says so), a version change is undone (revertUpgrade).
type vgpuInstallStep struct{}

func (vgpuInstallStep) id() string { return StepVGPUInstall }

func (vgpuInstallStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.installVGPU(ctx, e)
}

// vgpuDevicesStep (StepVGPUDevices, vm-vgpu): the vGPUs of the config
// created (vgpu.Apply; planned when it runs, after the install). vgpu.Apply
// journals each vGPU's intent and done entries; rollback removes them
// (removeVGPU) and turns a heterogeneous mode it set off (resetHeteroMode).
type vgpuDevicesStep struct{}

func (vgpuDevicesStep) id() string { return StepVGPUDevices }

func (vgpuDevicesStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.createVGPUs(ctx, e)
}
