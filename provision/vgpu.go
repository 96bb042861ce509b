package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/plural"
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

// managerState is what plan knows of the vGPU manager: what keeps it from
// counting as installed and running (missing), the SR-IOV GPUs whose VFs
// are not all enabled (vfs: sriov-manage -e, not a reinstall, fixes that),
// and a note when whether its daemon runs cannot be told.
type managerState struct {
	missing []string
	vfs     []string
	note    string
}

// readManager judges the vGPU manager by the evidence gpuprep check uses
// (vgpu.manager): the nvidia-vgpu-mgr process in the root's /proc, else
// systemd's answer where commands run (the live host). On a root that
// shows neither (a snapshot without /proc), whether the daemon runs is
// unknown and not held against it, as check does.
func readManager(ctx context.Context, root *host.Root, r host.Runner, gpus []vgpu.GPUInfo) managerState {
	var m managerState
	if !root.Exists("/sys/module/nvidia") && !root.Exists("/sys/bus/pci/drivers/nvidia") {
		m.missing = append(m.missing, "the nvidia module is not loaded")
	}
	if !root.Exists("/usr/bin/nvidia-vgpu-mgr") {
		m.missing = append(m.missing, "no /usr/bin/nvidia-vgpu-mgr")
	}
	if miss, note := daemonState(ctx, root, r); miss != "" {
		m.missing = append(m.missing, miss)
	} else {
		m.note = note
	}
	m.vfs = vfsNotEnabled(root, gpus)
	return m
}

// daemonState is what keeps the nvidia-vgpu-mgr daemon from counting as
// running (miss), or a note when whether it runs cannot be told: its
// process in the root's /proc, else systemd's answer where commands run.
func daemonState(ctx context.Context, root *host.Root, r host.Runner) (miss, note string) {
	running, known := vgpu.RunningDaemons(root)
	if running["nvidia-vgpu-mgr"] {
		return "", ""
	}
	out, err := r.Run(ctx, "systemctl", "is-active", "nvidia-vgpu-mgr.service")
	switch {
	case err == nil && strings.TrimSpace(string(out)) == "active":
		return "", ""
	case errors.Is(err, host.ErrNoCommands) && !known:
		return "", "whether nvidia-vgpu-mgr runs is not known: the root has no process list under /proc and systemctl does not run against it"
	case known:
		return "the nvidia-vgpu-mgr daemon is not running (no such process under /proc)", ""
	default:
		return "nvidia-vgpu-mgr.service is not active", ""
	}
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

// planInstall plans the vgpu-install step and reports whether the manager
// is installed and running with every VF enabled (no step). Without
// --driver, a manager that is installed and running but has VFs to enable
// gets the step that enables them (vgpu.PlanEnableVFs), not a reinstall.
func (p *Plan) planInstall(ctx context.Context, gpus []vgpu.GPUInfo) (bool, error) {
	r := p.runner()
	if p.opts.Driver == "" {
		m := readManager(ctx, p.root, r, gpus)
		if m.note != "" {
			p.Notes = append(p.Notes, m.note)
		}
		if len(m.missing) > 0 {
			miss := m.missing
			if len(m.vfs) > 0 {
				miss = append(miss, "VFs not all enabled: "+strings.Join(m.vfs, ", "))
			}
			return false, usage(StepVGPUInstall, fmt.Errorf("--driver FILE is required: the vGPU manager is not installed and running (%s); give the licensed NVIDIA-Linux-x86_64-<ver>-vgpu-kvm.run", strings.Join(miss, "; ")))
		}
		if len(m.vfs) == 0 {
			return p.planSRIOVUnit(ctx, gpus)
		}
		ip, err := vgpu.PlanEnableVFs(ctx, effect.Effector{Root: p.root, Runner: r}, gpus)
		if err != nil {
			return false, &PlanError{Step: StepVGPUInstall, Refused: true, Err: err}
		}
		if err := ip.Missing(); err != nil {
			return false, &PlanError{Step: StepVGPUInstall, Refused: true, Err: err}
		}
		s := &Step{ID: StepVGPUInstall, Title: "enable the SR-IOV VFs of " + strings.Join(m.vfs, ", ") + ", as gpuprep vgpu install does: the vGPU manager is installed and running"}
		p.addInstallSteps(s, ip)
		return false, nil
	}
	// package queries only read the file, so they run on this machine even
	// when a plan is made for another root
	ip, err := vgpu.PlanInstall(ctx, effect.Effector{Root: p.root, Runner: r, Query: host.ExecRunner{}}, vgpu.InstallOptions{Driver: p.opts.Driver, Previous: p.opts.PreviousDriver, GPUs: gpus})
	var held *vgpu.HeldError
	if errors.As(err, &held) {
		return false, &PlanError{Step: StepVGPUInstall, Refused: true, Err: err}
	}
	if err != nil {
		return false, usage(StepVGPUInstall, fmt.Errorf("--driver %s: %w", p.opts.Driver, err))
	}
	if err := ip.Missing(); err != nil {
		return false, &PlanError{Step: StepVGPUInstall, Refused: true, Err: err}
	}
	if len(ip.Steps) == 0 {
		return true, nil
	}
	s := &Step{ID: StepVGPUInstall, Title: fmt.Sprintf("install the vGPU manager %s (%s) as gpuprep vgpu install does", ip.Driver.Version, ip.Driver.Name())}
	p.addInstallSteps(s, ip)
	if c := ip.Change; c != nil {
		s.Title = fmt.Sprintf("change the vGPU manager %s to %s (%s) as gpuprep vgpu install does", c.From.Version, ip.Driver.Version, ip.Driver.Name())
		s.Notes = append(s.Notes, "gpuprep rollback undoes this change: "+c.From.Version+" installed again, with the vGPUs there are now")
		return false, nil
	}
	s.Notes = append(s.Notes, "gpuprep rollback does not uninstall the vGPU manager (a package operation); it restores the files this step writes")
	return false, nil
}

// planSRIOVUnit plans, for a manager installed and running with every VF
// enabled, the one thing gpuprep vgpu install would still do:
// vgpu.SRIOVUnit written and enabled, which enables the VFs again at boot
// (they are lost at every reboot, and the vGPUs the vgpu-devices step makes
// persistent are created on them: vgpu.ApplyUnit wants it). No sriov-manage
// runs (every VF is enabled: vgpu.PlanEnableVFs plans none), so live vGPUs
// are left alone. It reports the manager installed: the devices step is
// planned now.
func (p *Plan) planSRIOVUnit(ctx context.Context, gpus []vgpu.GPUInfo) (bool, error) {
	ip, err := vgpu.PlanEnableVFs(ctx, effect.Effector{Root: p.root, Runner: p.runner()}, gpus)
	if err != nil {
		return false, &PlanError{Step: StepVGPUInstall, Refused: true, Err: err}
	}
	if len(ip.Steps) == 0 {
		return true, nil
	}
	s := &Step{ID: StepVGPUInstall, Title: "enable the SR-IOV VFs at every boot (" + vgpu.SRIOVUnitName + "), as gpuprep vgpu install does: the vGPU manager is installed and running, every VF enabled"}
	p.addInstallSteps(s, ip)
	return true, nil
}

// addInstallSteps makes s the vgpu-install step that runs ip.
func (p *Plan) addInstallSteps(s *Step, ip *vgpu.InstallPlan) {
	for _, st := range ip.Steps {
		if st.File != nil {
			s.Files = append(s.Files, *st.File)
		}
		for _, c := range st.Commands {
			s.Commands = append(s.Commands, host.ShellQuote(c))
		}
	}
	s.Notes = append(s.Notes, ip.Notes...)
	p.vgpu.install = ip
	p.Steps = append(p.Steps, s)
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

// installVGPU runs the install plan, with an intent entry for each file it
// writes (the effector's clock is stopped at now so that its backups get
// the names the intents announce).
func (p *Plan) installVGPU(ctx context.Context, e effect.Effector) error {
	ip := p.vgpu.install
	if ip == nil {
		return nil
	}
	now := utcNow(e)
	for _, st := range ip.Steps {
		if st.File != nil {
			if err := fileIntent(e, st.File.Path, now); err != nil {
				return err
			}
		}
	}
	n := 0
	return ip.Execute(ctx, e.At(now), func(s vgpu.Step) {
		n++
		e.Logf("done %d/%d: %s", n, len(ip.Steps), s.Title)
	})
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
