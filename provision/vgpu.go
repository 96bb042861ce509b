package provision

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// vm-vgpu: after the kernel arguments are in effect, the vGPU manager is
// installed (vgpu.PlanInstall / Execute, as gpuprep vgpu install does) and
// the vGPUs of a vgpu-device-manager config are created and made to survive
// reboots (vgpu.MakePlan / Apply / PlanPersist, as gpuprep vgpu apply
// --persist does). Journal entries, besides the files vgpu journals itself:
// the vGPU writes as vgpu.ApplyJournalled records them (gpuprep vgpu apply
// records them so too), an intent before each creation, an entry after:
//
//	kind "vgpu-intent": Path = the sysfs attribute about to be written
//	                    (…/create or …/nvidia/current_vgpu_type), After = the
//	                    value (the mdev's UUID, or the type id), Device = the
//	                    GPU, Before = a VF's current_vgpu_type before the write
//	                    (absent in journals written before it was recorded)
//	kind "vgpu":        the same, once written
//	kind "vgpu-mode":   before a GPU's heterogeneous vGPU mode is turned on
//	                    (nvidia-smi vgpu -shm 1, for vGPUs of mixed sizes):
//	                    Device = the GPU, Before = the mode read then;
//	                    rollback turns it off once the GPU has no vGPU
const (
	KindVGPU       = vgpu.KindWrite
	KindVGPUIntent = vgpu.KindIntent
)

type vgpuState struct {
	wants   []vgpu.Want
	raw     []byte // the config file, copied to vgpu.PersistedConfig
	install *vgpu.InstallPlan
	devices *vgpu.Plan
	persist *vgpu.PersistPlan
}

func (p *Plan) runner() host.Runner {
	if p.opts.Runner != nil {
		return p.opts.Runner
	}
	return host.NoRunner{}
}

func usage(step string, err error) error { return &PlanError{Step: step, Usage: true, Err: err} }

// planVGPU plans vgpu-install and vgpu-devices. While a reboot is pending or
// the manager is not installed yet, the devices step is deferred: the types
// a GPU offers are known only once the manager runs (and its VFs exist).
func (p *Plan) planVGPU(ctx context.Context) error {
	if err := p.refuseConsumerBoards(); err != nil {
		return err
	}
	wants, infos, raw, err := p.vgpuWants()
	if err != nil {
		return err
	}
	p.vgpu = &vgpuState{wants: wants, raw: raw}
	installed, err := p.planInstall(ctx, infos)
	if err != nil {
		return err
	}
	if !installed || p.Step(StepReboot) != nil {
		p.deferDevices(wants)
		return nil
	}
	return p.planDevices(ctx, p.runner())
}

// refuseConsumerBoards refuses vm-vgpu when every selected GPU is a
// GeForce/TITAN board (check: vgpu.support), whatever is installed.
func (p *Plan) refuseConsumerBoards() error {
	sel, _ := vfio.Selection(p.inv, p.opts.Selector, false)
	p.inv.Name(p.root, sel)
	var consumer []string
	for _, d := range sel {
		if b, ok := vgpu.ConsumerBoard(d.Name); ok {
			consumer = append(consumer, d.Address+" ("+b+")")
		}
	}
	if len(sel) > 0 && len(consumer) == len(sel) {
		return &PlanError{Step: StepVGPUInstall, Refused: true, Err: fmt.Errorf("%s: consumer GeForce/TITAN boards cannot host NVIDIA vGPU, whatever the driver or license: give these GPUs to VMs whole (--mode vm-passthrough) or use a vGPU-capable board", strings.Join(consumer, ", "))}
	}
	return nil
}

// vgpuWants reads the vGPU config the options name and judges it against
// the selected GPUs: the vGPUs wanted, the GPUs, and the config file's
// bytes. Before the manager runs no GPU lists its types: the config's
// types are judged by the boards' names (what a GPU offers, once it does,
// wins).
func (p *Plan) vgpuWants() ([]vgpu.Want, []vgpu.GPUInfo, []byte, error) {
	o := p.opts
	if o.VGPUConfigFile == "" || o.VGPUConfig == "" {
		return nil, nil, nil, usage(StepVGPUDevices, fmt.Errorf("vm-vgpu needs --vgpu-config-file FILE (a vgpu-device-manager config) and --vgpu-config NAME (the config in it)"))
	}
	sets, raw, err := loadVGPUConfig(o.VGPUConfigFile, o.VGPUConfig)
	if err != nil {
		return nil, nil, nil, usage(StepVGPUDevices, err)
	}
	gpus, err := o.Selector.Select(p.inv)
	if err != nil {
		return nil, nil, nil, usage(StepVGPUDevices, err)
	}
	var infos []vgpu.GPUInfo
	for _, d := range gpus {
		infos = append(infos, vgpu.GPUInfo{Address: d.Address, DeviceID: d.DeviceID})
	}
	wants, notes, err := vgpu.Wants(o.VGPUConfigFile, o.VGPUConfig, sets, vgpu.ConfigGPUs(p.root, p.inv.Devices, gpus))
	if err != nil {
		return nil, nil, nil, usage(StepVGPUDevices, err)
	}
	p.Notes = append(p.Notes, notes...)
	offered := func(gpu string) []vgpu.Type { return vgpu.Read(p.root, gpu).Types }
	if err := vgpu.WantsFitBoards(o.VGPUConfigFile, o.VGPUConfig, wants, vgpu.BoardNames(p.root, infos), offered); err != nil {
		return nil, nil, nil, usage(StepVGPUDevices, err)
	}
	return wants, infos, raw, nil
}

// loadVGPUConfig loads the vgpu-device-manager config file, selects the
// config name in it, and returns its sets with the file's bytes.
func loadVGPUConfig(file, name string) ([]vgpu.DeviceSet, []byte, error) {
	cfg, err := vgpu.LoadConfig(file)
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	sets, err := cfg.Select(name)
	if err != nil {
		return nil, nil, err
	}
	return sets, raw, nil
}

// vfsNotEnabled are the SR-IOV GPUs of gpus whose VFs are not all enabled,
// each with how many are.
func vfsNotEnabled(root *host.Root, gpus []vgpu.GPUInfo) []string {
	var vfs []string
	for _, g := range gpus {
		dev := "/sys/bus/pci/devices/" + g.Address
		if !vgpu.UsesSRIOV(root, g) {
			continue
		}
		tot, _ := root.ReadString(dev + "/sriov_totalvfs")
		num, _ := root.ReadString(dev + "/sriov_numvfs")
		if tot == "" || tot == "0" || num != tot {
			if num == "" {
				num = "?"
			}
			vfs = append(vfs, fmt.Sprintf("%s (%s of %s VFs enabled)", g.Address, num, tot))
		}
	}
	return vfs
}
