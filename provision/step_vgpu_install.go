package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
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
