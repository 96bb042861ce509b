package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/plural"
	"github.com/gpuprep/gpuprep/vgpu"
)

// vgpuDevicesStep (StepVGPUDevices, vm-vgpu): the vGPUs of the config
// created (vgpu.Apply; planned when it runs, after the install). vgpu.Apply
// journals each vGPU's intent and done entries; rollback removes them
// (removeVGPU) and turns a heterogeneous mode it set off (resetHeteroMode).
type vgpuDevicesStep struct{}

func (vgpuDevicesStep) id() string { return StepVGPUDevices }

func (vgpuDevicesStep) run(ctx context.Context, e effect.Effector, p *Plan, _ *Step) error {
	return p.createVGPUs(ctx, e)
}

// deferDevices plans vgpu-devices as deferred: its writes are planned once
// the manager runs (or its VFs are enabled).
func (p *Plan) deferDevices(wants []vgpu.Want) {
	var ws []string
	for _, w := range wants {
		ws = append(ws, w.String())
	}
	when := "once the vGPU manager runs"
	if ip := p.vgpu.install; ip != nil && ip.Driver == nil {
		when = "once the VFs are enabled" // vgpu.PlanEnableVFs: the manager runs
	}
	p.Steps = append(p.Steps, &Step{ID: StepVGPUDevices, Deferred: true,
		Title: fmt.Sprintf("create the vGPUs of config %q (%s), persistently (the writes are planned %s)", p.opts.VGPUConfig, strings.Join(ws, ", "), when),
		Notes: []string{"persistent: " + vgpu.PersistedConfig + " and " + vgpu.ApplyUnit + " (gpuprep vgpu apply at boot)"}})
}

// planDevices plans the vGPU writes and the persistence, or no step when
// both are in place. r answers systemctl's queries.
func (p *Plan) planDevices(ctx context.Context, r host.Runner) error {
	v := p.vgpu
	dp, err := vgpu.MakePlanWith(p.root, v.wants, vgpu.PlanOptions{Runner: r})
	if err != nil {
		return &PlanError{Step: StepVGPUDevices, Refused: true, Err: err}
	}
	pp, err := vgpu.PlanPersist(ctx, p.root, r, p.opts.Binary, v.raw, p.persistArgs())
	if err != nil {
		return &PlanError{Step: StepVGPUDevices, Refused: true, Err: err}
	}
	resume := slices.Contains(p.resumed, StepVGPUDevices)
	if len(dp.Actions) == 0 && pp.Empty() && !resume {
		return nil
	}
	s := p.Step(StepVGPUDevices)
	if s == nil {
		s = &Step{ID: StepVGPUDevices}
		p.Steps = append(p.Steps, s)
	}
	s.Deferred = false
	s.Title = fmt.Sprintf("create %s of config %q (%d kept), re-created at boot by %s", plural.N(len(dp.Actions), "vGPU"), p.opts.VGPUConfig, len(dp.Kept), vgpu.ApplyUnitName)
	s.Sysfs, s.Files, s.Commands, s.Notes = nil, nil, nil, nil
	for _, m := range dp.Modes {
		s.Prepare = append(s.Prepare, host.ShellQuote(m.Argv)+"  ("+m.About+"; checked with nvidia-smi -q)")
	}
	for _, a := range dp.Actions {
		s.Sysfs = append(s.Sysfs, change.SysfsWrite(a.Path, a.Value)+"  ("+a.About+")")
	}
	s.Files = append(s.Files, pp.Files...)
	if pp.Enable {
		s.Commands = append(s.Commands, "systemctl daemon-reload", "systemctl enable "+vgpu.ApplyUnitName)
	}
	for _, u := range dp.Unwanted {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %s (%s) is not in config %q; left alone", u.GPU, u.Device, u.Type, p.opts.VGPUConfig))
	}
	s.Notes = append(s.Notes, dp.Notes...)
	s.Notes = append(s.Notes, pp.Notes...)
	v.devices, v.persist = dp, pp
	return nil
}

func (p *Plan) persistArgs() []string {
	args := []string{"-c", p.opts.VGPUConfig}
	for _, x := range p.opts.SelectArgs {
		args = append(args, "--select", x)
	}
	return args
}

// createVGPUs creates the planned vGPUs (planning them first when the step
// was deferred behind the install), journalling each before and after its
// write (vgpu.ApplyJournalled), then persists the config.
func (p *Plan) createVGPUs(ctx context.Context, e effect.Effector) error {
	v := p.vgpu
	if v.devices == nil {
		if err := p.planDevices(ctx, e.Runner); err != nil {
			return err
		}
		if v.devices == nil {
			return nil // in place
		}
	}
	dp := v.devices
	if err := writeTypeNames(e, dp, "apply"); err != nil {
		return err
	}
	now := utcNow(e)
	done, err := vgpu.ApplyJournalled(e.Root, e.Sysfs, dp, now, "apply", e.Record)
	for _, m := range dp.ModesRan() {
		e.Logf("ran %s  (%s; nvidia-smi -q reads vGPU Heterogeneous Mode: Enabled)", host.ShellQuote(m.Argv), m.About)
	}
	for _, a := range done {
		e.Logf("wrote %s > %s  (%s)", a.Value, a.Path, a.About)
	}
	if err != nil {
		return err
	}
	pp := v.persist
	if pp == nil || pp.Empty() {
		return nil
	}
	for _, f := range pp.Files {
		if err := fileIntent(e, f.Path, now); err != nil {
			return err
		}
	}
	if err := pp.Apply(ctx, e.Root, e.Runner, now); err != nil {
		return err
	}
	e.Logf("persisted: %s re-applies config %q at boot", vgpu.ApplyUnitName, p.opts.VGPUConfig)
	return nil
}

// writeTypeNames records in vgpu.TypeNames the names of the types dp writes
// to VFs, journalled as apply journals a file it writes (an intent, the
// write with its backup, a file entry), by command: before
// vgpu.ApplyJournalled, which then finds them there and writes nothing.
func writeTypeNames(e effect.Effector, dp *vgpu.Plan, command string) error {
	names, ok := vgpu.TypeNamesFile(e.Root, dp)
	if !ok {
		return nil
	}
	return writeFileBy(e, vgpu.TypeNames, names, command)
}

// vgpuTarget is the vGPU a vgpu record created: an mdev's UUID, or a VF's
// address; "" for records that removed one (vgpu apply --prune).
func vgpuTarget(v journal.VGPURecord) string {
	switch {
	case strings.HasSuffix(v.Attr, "/create") && v.Value != "":
		return v.Value
	case strings.HasSuffix(v.Attr, "/nvidia/current_vgpu_type") && v.Value != "0" && v.Value != "":
		return strings.TrimSuffix(strings.TrimPrefix(v.Attr, "/sys/bus/pci/devices/"), "/nvidia/current_vgpu_type")
	}
	return ""
}

// removeVGPU removes a vGPU gpuprep created, unless a process (a VM) holds
// it and force is not set: an mdev through its remove attribute, a VF by
// writing 0 to its current_vgpu_type — only while the VF holds a type
// gpuprep wrote (wrote): one given another type since (by hand, after a
// killed run) is not gpuprep's to clear.
func removeVGPU(e effect.Effector, target string, wrote []string, force bool, res *RollbackResult) error {
	vf := strings.Contains(target, ":")
	attr, value := "/sys/bus/mdev/devices/"+target+"/remove", "1"
	if vf {
		attr, value = "/sys/bus/pci/devices/"+target+"/nvidia/current_vgpu_type", "0"
		cur, err := e.Root.ReadString(attr)
		if err != nil || cur == "" || cur == "0" {
			return nil
		}
		if len(wrote) > 0 && !slices.Contains(wrote, cur) {
			msg := fmt.Sprintf("VF %s holds vGPU type %s, not the type gpuprep gave it (%s): left alone", target, cur, strings.Join(wrote, ", "))
			e.Logf("%s", msg)
			res.Notes = append(res.Notes, msg)
			return nil
		}
	} else if !e.Root.Exists("/sys/bus/mdev/devices/" + target) {
		return nil
	}
	if !force {
		if hs := vgpu.Holders(e.Root, vgpu.Instance{Device: target}); len(hs) > 0 {
			var who []string
			for _, h := range hs {
				who = append(who, h.String())
			}
			return fmt.Errorf("vGPU %s is in use by %s (a VM?): stop it or pass --force", target, strings.Join(who, ", "))
		}
	}
	if err := writeAttr(e, attr, value); err != nil {
		return fmt.Errorf("vGPU %s: %w", target, err)
	}
	action := "mdev removed"
	if vf {
		action = "VF's vGPU type cleared (current_vgpu_type 0)"
	}
	e.Logf("removed vGPU %s", target)
	res.Undone = append(res.Undone, Undo{Kind: "vgpu", Target: target, Action: action})
	return nil
}

// resetHeteroMode turns off again the heterogeneous vGPU mode apply turned
// on on gpu (a vgpu.KindMode entry; before: the mode it read then), once
// the GPU has no vGPU left (the mode only changes then): nvidia-smi vgpu
// -shm 0. A mode that is off already (sriov-manage and reboots reset it)
// is left alone; so is one of a GPU that still has vGPUs, saying so.
func resetHeteroMode(ctx context.Context, e effect.Effector, gpu, before string, res *RollbackResult) error {
	if before == "Enabled" {
		return nil
	}
	h, err := vgpu.QueryHetero(ctx, e.Runner, gpu)
	if err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: heterogeneous vGPU mode left as it is (%v)", gpu, err))
		return nil
	}
	if h.Mode != "Enabled" {
		return nil
	}
	if ex := vgpu.Existing(e.Root, gpu); len(ex) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: heterogeneous vGPU mode left on: the GPU still has %s, and the mode only changes while it has none", gpu, plural.N(len(ex), "vGPU")))
		return nil
	}
	argv := []string{vgpu.NVIDIASMI, "vgpu", "-shm", "0", "-i", vgpu.SMIAddress(gpu)}
	e.Logf("run: %s", host.ShellQuote(argv))
	if out, err := e.Runner.Run(ctx, argv...); err != nil {
		return fmt.Errorf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out))
	}
	res.Undone = append(res.Undone, Undo{Kind: "command", Target: host.ShellQuote(argv), Action: "ran: heterogeneous vGPU mode off"})
	return nil
}
