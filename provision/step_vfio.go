package provision

import "context"

// vfioBindStep (StepVFIOBind, vm-passthrough): the selected devices bound
// to vfio-pci, persistently (vfio.Bind; planned by planBind). vfio.Bind
// journals each device's driver-intent and driver entries and each file;
// rollback puts each device back on the driver its oldest entry names.
type vfioBindStep struct{}

func (vfioBindStep) id() string { return StepVFIOBind }

func (vfioBindStep) run(ctx context.Context, e Env, p *Plan, _ *Step) error { return p.bind(ctx, e) }

// vfioUnbindStep (StepVFIOUnbind, container and vm-vgpu): devices on VFIO
// back to their drivers (vfio.Unbind; planned by planUnbind and
// planUnbindAtBoot), journalled as vfioBindStep's.
type vfioUnbindStep struct{}

func (vfioUnbindStep) id() string { return StepVFIOUnbind }

func (vfioUnbindStep) run(ctx context.Context, e Env, p *Plan, _ *Step) error {
	return p.unbind(ctx, e)
}
