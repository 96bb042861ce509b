package vgpu

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vfio"
)

// Files and programs the install step owns or uses.
const (
	NouveauBlacklist = "/etc/modprobe.d/gpuprep-blacklist-nouveau.conf"
	SRIOVUnit        = "/etc/systemd/system/" + SRIOVUnitName
	SRIOVUnitName    = vfio.VGPUSRIOVUnitName
	SRIOVManage      = "/usr/lib/nvidia/sriov-manage"
	InstallerLog     = "/var/log/nvidia-installer.log"
)

// Services are the vGPU manager's daemons, in start order. nvidia-vgpud is
// optional: a build without its unit file skips it.
var Services = []string{"nvidia-vgpud.service", "nvidia-vgpu-mgr.service"}

// conflicting are the modules unloaded before the installer runs, users
// first (modprobe -r fails on a module still in use by another).
var conflicting = []string{"nvidia_vgpu_vfio", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem", "nvidia", "nouveau"}

// InstallOptions are the choices of `gpuprep vgpu install`.
type InstallOptions struct {
	Driver      string
	GPUs        []GPUInfo
	NoDKMS      bool
	SigningKey  string // module signing key pair (host paths) for Secure Boot
	SigningCert string
	// Previous is the installer (or package) of the vGPU manager installed
	// now, kept so that rollback can put it back when Driver is another
	// version (see PlanUpgrade); not needed where gpuprep kept it already.
	Previous string
	change   *managerChange // RevertUpgrade's: the version change being undone
	// SRIOVAttempts bounds sriov-manage runs per GPU (0: 6), waiting
	// SRIOVBackoff × attempt between them (0: 5 s).
	SRIOVAttempts int
	SRIOVBackoff  time.Duration
}

// env is what the install's planning and steps act through: the effector
// (root, runner, package queries, sysfs, clock), and while a plan runs
// (Execute) that plan's own knobs.
type env struct {
	effect.Effector
	// undoing: the plan undoes what the journal records (gpuprep rollback
	// running PlanRevert): its commands are not journalled again, as
	// rollback records only what it undid, once done.
	undoing bool
	// sriovAttempts bounds sriov-manage runs per GPU (0: 6), waiting
	// sriovBackoff × attempt between them (0: 5 s).
	sriovAttempts int
	sriovBackoff  time.Duration
}

// Step is one planned change.
type Step struct {
	Title    string       `json:"title"`
	Commands [][]string   `json:"commands,omitempty"` // what it runs (some only where needed, see Title)
	File     *change.File `json:"file,omitempty"`     // a file it writes
	Remedy   string       `json:"remedy"`             // what to do when it fails
	run      func(ctx context.Context, e *env) error
}

// InstallPlan is every step of an install, planned before anything changes.
type InstallPlan struct {
	Driver  *Driver
	Prereqs []Prereq
	SRIOV   []string // GPUs whose VFs are enabled
	Steps   []Step
	Notes   []string
	// Change is the version change the plan makes, nil when none: the
	// manager installed now is another version (see planChange)
	Change *UpgradeRecord
	// Undoing says the plan undoes what the journal records (gpuprep
	// rollback running PlanRevert): its commands are not journalled again,
	// as rollback records only what it undid, once done.
	Undoing bool

	sriovAttempts int
	sriovBackoff  time.Duration
}

// Missing returns the prerequisites that fail, as an error (nil when none).
func (p *InstallPlan) Missing() error {
	var miss []Prereq
	for _, q := range p.Prereqs {
		if !q.OK {
			miss = append(miss, q)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	return &PrereqError{Missing: miss}
}

// StepError is a failed step: what failed and what to do.
type StepError struct {
	N, Of  int
	Title  string
	Err    error
	Remedy string
}

func (e *StepError) Error() string {
	s := fmt.Sprintf("step %d/%d (%s) failed: %v", e.N, e.Of, e.Title, e.Err)
	if e.Remedy != "" {
		s += "\nto do: " + e.Remedy
	}
	if e.N > 1 {
		s += fmt.Sprintf("\nsteps 1–%d are done and stay in place; run gpuprep vgpu install again after fixing this (done steps are skipped)", e.N-1)
	}
	return s
}

func (e *StepError) Unwrap() error { return e.Err }

// InstalledVersion is the version of the loaded nvidia module ("" when none
// is loaded).
func InstalledVersion(root *host.Root) string {
	v, _ := root.ReadString("/sys/module/nvidia/version")
	return v
}

// unitPath returns the host path of a systemd unit file, or "".
func unitPath(root *host.Root, unit string) string {
	for _, d := range []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"} {
		if root.Exists(d + "/" + unit) {
			return d + "/" + unit
		}
	}
	return ""
}

// unitState asks systemd whether unit is enabled and active. Commands that
// cannot run (another root) answer "unknown": false, false.
func unitState(ctx context.Context, r host.Runner, unit string) (enabled, active bool) {
	out, err := r.Run(ctx, "systemctl", "is-enabled", unit)
	enabled = err == nil && strings.TrimSpace(string(out)) == "enabled"
	out, err = r.Run(ctx, "systemctl", "is-active", unit)
	active = err == nil && strings.TrimSpace(string(out)) == "active"
	return enabled, active
}

// NouveauBlacklistContent is what gpuprep writes to NouveauBlacklist.
var NouveauBlacklistContent = []byte("# Written by gpuprep: the GPUs go to NVIDIA's driver (the vGPU manager's, or the GPU Operator's driver\n# container), not nouveau.\nblacklist nouveau\noptions nouveau modeset=0\n")

// NouveauWork is what keeps nouveau off the GPUs at the next boot: the
// blacklist to write (Write: none in modprobe.d yet), and whether the
// initramfs must be regenerated (Regenerate: after the write, or because
// it predates gpuprep's blacklist: a run that stopped in between), by
// Initramfs (nil: no tool found).
type NouveauWork struct {
	Write, Regenerate bool
	Initramfs         []string
}

// PlanNouveauBlacklist says what NouveauWork is left on root.
//
// gone are files of /etc/modprobe.d that a step before this one removes
// (gpuprep's VFIO configuration, which blacklists nouveau too): their
// blacklist does not count.
func PlanNouveauBlacklist(root *host.Root, gone ...string) NouveauWork {
	w := NouveauWork{Write: !nouveauBlacklisted(root, gone...), Initramfs: initramfs.Command(root)}
	w.Regenerate = w.Write || len(InitramfsOlderThanBlacklist(root)) > 0
	return w
}

func nouveauBlacklisted(root *host.Root, gone ...string) bool {
	for _, dir := range []string{"/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"} {
		for _, n := range root.Names(dir) {
			if !strings.HasSuffix(n, ".conf") || slices.Contains(gone, dir+"/"+n) {
				continue
			}
			b, _ := root.ReadFile(dir + "/" + n)
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "blacklist" && f[1] == "nouveau" {
					return true
				}
			}
		}
	}
	return false
}

// InitramfsOlderThanBlacklist returns the initramfs images when every one
// was made before gpuprep's nouveau blacklist was written, so that early
// boot may still load nouveau (see initramfs.OlderThan); nil without the
// blacklist, or when an image is as new as it.
func InitramfsOlderThanBlacklist(root *host.Root) []string {
	bl, err := root.Stat(NouveauBlacklist)
	if err != nil {
		return nil
	}
	return initramfs.OlderThan(root, bl.ModTime())
}

// InstallerArgs are the arguments the .run is given. --silent implies
// --ui=none --no-questions --accept-license. Unlike NVIDIA's vgpu-manager
// container, no --no-systemd: on a host the installer's nvidia-vgpud and
// nvidia-vgpu-mgr units are what keep the daemons running across reboots.
// --dkms registers the modules so kernel updates rebuild them; the signing
// options sign them for Secure Boot.
func InstallerArgs(root *host.Root, d *Driver, opts InstallOptions) []string {
	argv := []string{"sh", d.Path, "--silent"}
	if !opts.NoDKMS {
		argv = append(argv, "--dkms")
	}
	if on, _ := SecureBoot(root); on {
		if key, cert := SigningKeys(root, opts); key != "" {
			argv = append(argv, "--module-signing-secret-key="+key, "--module-signing-public-key="+cert)
		}
	}
	return argv
}

// InstallerArgsFor is argv (InstallerArgs) run from the verified copy at
// run instead of the file the user named.
func InstallerArgsFor(argv []string, run string) []string {
	out := append([]string(nil), argv...)
	out[1] = run
	return out
}

// SRIOVUnitContent is the systemd unit that enables the VFs of gpus at boot,
// after the vGPU manager's daemons. Each GPU gets sriov-manage, retried (it
// races the driver at boot and has exited 0 on failure) until sriov_numvfs
// equals sriov_totalvfs.
func SRIOVUnitContent(gpus []string) []byte {
	var b strings.Builder
	b.WriteString(`# Written by gpuprep vgpu install: enables the SR-IOV virtual functions that
# vGPUs are created on (VFs do not survive a reboot or a driver reload).
[Unit]
Description=gpuprep: enable SR-IOV VFs for NVIDIA vGPU
After=nvidia-vgpud.service nvidia-vgpu-mgr.service
Wants=nvidia-vgpud.service nvidia-vgpu-mgr.service

[Service]
Type=oneshot
RemainAfterExit=yes
TimeoutStartSec=15min
`)
	for _, g := range gpus {
		dev := "/sys/bus/pci/devices/" + g
		fmt.Fprintf(&b, "ExecStart=/bin/sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do %s -e %s; [ \"$$(cat %s/sriov_numvfs)\" = \"$$(cat %s/sriov_totalvfs)\" ] && exit 0; sleep 6; done; echo \"%s: VFs not enabled\" >&2; exit 1'\n",
			SRIOVManage, g, dev, dev, g)
	}
	b.WriteString("\n[Install]\nWantedBy=multi-user.target\n")
	return []byte(b.String())
}

// PlanInstall verifies the driver, checks prerequisites and plans every step
// that is not already in place. A host where everything is in place gets a
// plan with no steps.
func PlanInstall(ctx context.Context, fx effect.Effector, opts InstallOptions) (*InstallPlan, error) {
	return planInstall(ctx, &env{Effector: fx}, opts)
}

func planInstall(ctx context.Context, e *env, opts InstallOptions) (*InstallPlan, error) {
	r := e.Runner
	if isPackage(opts.Driver) {
		r = e.Queries()
	}
	d, err := InspectDriver(ctx, opts.Driver, r)
	if err != nil {
		return nil, err
	}
	root := e.Root
	if err := checkInstallOptions(root, d, opts); err != nil {
		return nil, err
	}
	p := &InstallPlan{Driver: d, sriovAttempts: opts.SRIOVAttempts, sriovBackoff: opts.SRIOVBackoff}
	for _, g := range opts.GPUs {
		if UsesSRIOV(root, g) {
			p.SRIOV = append(p.SRIOV, g.Address)
		}
	}
	sort.Strings(p.SRIOV)
	p.Prereqs = CheckPrereqs(root, opts, d.Format, p.SRIOV)
	kver := KernelRelease(root)
	p.planNouveau(root)
	ch, err := planChange(ctx, e, opts, d)
	if err != nil {
		return nil, err
	}
	if ch != nil {
		p.Change = ch.rec
		p.Steps = append(p.Steps, ch.before(e)...)
		p.Notes = append(p.Notes, ch.notes()...)
	}
	installed := InstalledVersion(root) == d.Version && root.Exists("/usr/bin/nvidia-vgpu-mgr")
	if !installed {
		p.planInstaller(ctx, e, d, opts, kver, ch)
	}
	p.planModules(root, d, kver, installed)
	p.planServices(ctx, e, installed)
	// a version change reloads nvidia, which takes the VFs with it
	reload := ch != nil && !installed
	if err := planSRIOV(ctx, e, p, installed, d.Version, reload); err != nil {
		return nil, err
	}
	if ch != nil {
		p.Steps = append(p.Steps, ch.after()...)
	}
	return p, nil
}

// checkInstallOptions refuses the options that do not apply to driver d's
// format, and module signing files that do not go together or are not
// there.
func checkInstallOptions(root *host.Root, d *Driver, opts InstallOptions) error {
	signing := opts.SigningKey != "" || opts.SigningCert != ""
	if d.Format != FormatRun {
		switch {
		case opts.NoDKMS:
			return fmt.Errorf("--no-dkms applies to the .run only: the .%s builds its modules with DKMS, which it depends on", d.Format)
		case signing:
			return fmt.Errorf("--signing-key/--signing-cert apply to the .run only: DKMS signs the modules the .%s builds with its own key (mok_signing_key in /etc/dkms/framework.conf, by default /var/lib/dkms/mok.key)", d.Format)
		}
	}
	if !signing {
		return nil
	}
	if opts.SigningKey == "" || opts.SigningCert == "" {
		return errors.New("--signing-key and --signing-cert go together")
	}
	for _, f := range []string{opts.SigningKey, opts.SigningCert} {
		if !root.Exists(f) {
			return fmt.Errorf("module signing file %s: not found", f)
		}
	}
	return nil
}

// planNouveau plans nouveau blacklisted and kept out of early boot (the
// initramfs regenerated), or only the initramfs regenerated where an
// earlier install stopped between the two.
func (p *InstallPlan) planNouveau(root *host.Root) {
	ic := initramfs.Command(root)
	regen := func(title string) {
		p.Steps = append(p.Steps, Step{Title: title, Commands: [][]string{ic},
			Remedy: "run `" + strings.Join(ic, " ") + "` by hand and read its errors",
			run:    runCmd(ic)})
	}
	if nouveauBlacklisted(root) {
		if ic != nil && len(InitramfsOlderThanBlacklist(root)) > 0 {
			// an install that wrote the blacklist stopped (failed, killed)
			// before the initramfs was regenerated: the blacklist is there,
			// so the step below is not planned again
			regen("regenerate the initramfs (it is older than " + NouveauBlacklist + ")")
		}
		return
	}
	content := NouveauBlacklistContent
	p.Steps = append(p.Steps, Step{Title: "blacklist nouveau", File: ptr(change.Between(NouveauBlacklist, nil, false, content)),
		Remedy: "check that /etc/modprobe.d is writable",
		run: func(_ context.Context, e *env) error {
			return writeFile(e, NouveauBlacklist, content)
		}})
	if ic != nil {
		regen("regenerate the initramfs (so nouveau stays out of early boot)")
	} else {
		p.Notes = append(p.Notes, "no initramfs tool (update-initramfs, dracut, mkinitcpio) found: if the initramfs loads nouveau, regenerate it by hand")
	}
}

// planInstaller plans the install of d where it is not installed: the
// daemons stopped, the conflicting modules unloaded, the version before
// uninstalled (a change ch), and the installer or package run.
func (p *InstallPlan) planInstaller(ctx context.Context, e *env, d *Driver, opts InstallOptions, kver string, ch *managerChange) {
	root := e.Root
	var stop []string
	for _, s := range Services {
		if unitPath(root, s) != "" {
			stop = append(stop, s)
		}
	}
	if len(stop) > 0 {
		argv := append([]string{"systemctl", "stop"}, stop...)
		p.Steps = append(p.Steps, Step{Title: "stop the running vGPU manager daemons", Commands: [][]string{argv},
			Remedy: "stop them by hand (" + strings.Join(argv, " ") + ") and read `journalctl -u nvidia-vgpu-mgr`",
			run:    runCmd(argv)})
	}
	for _, m := range conflicting {
		if !root.Exists("/sys/module/" + m) {
			continue
		}
		argv := []string{"modprobe", "-r", m}
		p.Steps = append(p.Steps, Step{Title: "unload " + m, Commands: [][]string{argv},
			Remedy: "something still uses the GPU: stop VMs with vGPUs, nvidia-persistenced, DCGM, a display manager (see `lsof /dev/nvidia*`), or reboot (nouveau is blacklisted now), then run gpuprep vgpu install again",
			run:    runCmd(argv)})
	}
	if ch != nil {
		p.Steps = append(p.Steps, ch.uninstall(ctx, e)...)
	}
	if d.Format != FormatRun {
		p.Steps = append(p.Steps, packageStep(root, d, kver))
	} else {
		p.Steps = append(p.Steps, installerStep(root, d, opts, kver))
	}
}

// planModules plans nvidia (of d's version) and, where the build has it,
// nvidia_vgpu_vfio loaded.
func (p *InstallPlan) planModules(root *host.Root, d *Driver, kver string, installed bool) {
	if !installed || !root.Exists("/sys/module/nvidia") {
		p.Steps = append(p.Steps, Step{Title: "load nvidia", Commands: [][]string{{"modprobe", "nvidia"}},
			Remedy: "read `dmesg | grep -i nvidia` (Secure Boot refusing an unsigned module, or nouveau still holding the GPU, are the usual causes)",
			run: func(ctx context.Context, e *env) error {
				if err := runCmd([]string{"modprobe", "nvidia"})(ctx, e); err != nil {
					return err
				}
				if v := InstalledVersion(e.Root); v != d.Version {
					return fmt.Errorf("the loaded nvidia module is version %q, not %s: an old module is still loaded", v, d.Version)
				}
				return nil
			}})
	}
	vfioLoaded := root.Exists("/sys/module/nvidia_vgpu_vfio")
	if !installed || (!vfioLoaded && ModuleAvailable(root, kver, "nvidia_vgpu_vfio")) {
		p.Steps = append(p.Steps, Step{Title: "load nvidia_vgpu_vfio (where this build has it: the mdev interface)", Commands: [][]string{{"modprobe", "nvidia_vgpu_vfio"}},
			Remedy: "read `dmesg | grep -i nvidia`; the mdev interface needs kernel support for mediated devices (CONFIG_VFIO_MDEV)",
			run: func(ctx context.Context, e *env) error {
				if e.Root.Exists("/sys/module/nvidia_vgpu_vfio") || !ModuleAvailable(e.Root, KernelRelease(e.Root), "nvidia_vgpu_vfio") {
					return nil // vendor-specific VFIO builds: nvidia.ko itself is the VFIO provider
				}
				return runCmd([]string{"modprobe", "nvidia_vgpu_vfio"})(ctx, e)
			}})
	}
}

// planServices plans each vGPU manager service enabled and started, but
// those already so on an installed manager.
func (p *InstallPlan) planServices(ctx context.Context, e *env, installed bool) {
	for _, s := range Services {
		if installed {
			if unitPath(e.Root, s) == "" {
				if s == "nvidia-vgpu-mgr.service" {
					p.Notes = append(p.Notes, "nvidia-vgpu-mgr.service has no unit file: the daemon is not managed by systemd")
				}
				continue
			}
			if en, act := unitState(ctx, e.Runner, s); en && act {
				continue
			}
		}
		p.Steps = append(p.Steps, serviceStep(s))
	}
}

// serviceStep enables and starts the service s.
func serviceStep(s string) Step {
	argv := []string{"systemctl", "enable", "--now", s}
	return Step{Title: "enable and start " + s, Commands: [][]string{{"systemctl", "daemon-reload"}, argv},
		Remedy: "read `journalctl -u " + s + "` (nvidia-vgpu-mgr needs the nvidia module of the same version loaded)",
		run: func(ctx context.Context, e *env) error {
			if unitPath(e.Root, s) == "" {
				if s == "nvidia-vgpud.service" {
					return nil // not in every build
				}
				return fmt.Errorf("no unit file for %s after the install", s)
			}
			if err := runCmd([]string{"systemctl", "daemon-reload"})(ctx, e); err != nil {
				return err
			}
			return runCmd(argv)(ctx, e)
		}}
}

// planSRIOV plans what makes the VFs of p.SRIOV's GPUs enabled, now and at
// every boot: sriov-manage -e where sriov_numvfs is short of
// sriov_totalvfs, and SRIOVUnit enabled. installed says the vGPU manager
// (of version) is installed already, so its sriov-manage must be there.
//
// reload says nvidia is unloaded and loaded again before: its VFs go with
// it (facts §6), so sriov-manage -e is planned for every GPU.
func planSRIOV(ctx context.Context, e *env, p *InstallPlan, installed bool, version string, reload bool) error {
	for _, g := range p.SRIOV {
		g := g
		dev := "/sys/bus/pci/devices/" + g
		if tot := readInt(e.Root, dev+"/sriov_totalvfs"); !reload && tot > 0 && readInt(e.Root, dev+"/sriov_numvfs") == tot {
			continue
		}
		if err := refuseLiveVGPUs(e, g, reload); err != nil {
			return err
		}
		if installed && !e.Root.Exists(SRIOVManage) {
			mgr := "the vGPU manager"
			if version != "" {
				mgr += " " + version
			}
			return fmt.Errorf("%s uses SR-IOV but %s is missing although %s is installed: reinstall it", g, SRIOVManage, mgr)
		}
		p.Steps = append(p.Steps, Step{Title: "enable the SR-IOV VFs of " + g, Commands: [][]string{{SRIOVManage, "-e", g}},
			Remedy: "an NVML client (nvidia-smi, DCGM, nvidia-persistenced) may hold the GPU: stop it and run gpuprep vgpu install again; if " + g + " lost its driver, rebind it: echo " + g + " > /sys/bus/pci/drivers/nvidia/bind; see `dmesg` for pci-pf-stub errors",
			run:    func(ctx context.Context, e *env) error { return enableVFs(ctx, e, g) }})
	}

	if len(p.SRIOV) > 0 {
		content := SRIOVUnitContent(p.SRIOV)
		old, err := e.Root.ReadFile(SRIOVUnit)
		unit := change.Between(SRIOVUnit, old, err == nil, content)
		changed := unit.Pending()
		if changed {
			p.Steps = append(p.Steps, Step{Title: "make the VFs survive reboots (" + SRIOVUnitName + ")", File: &unit,
				Remedy: "check that /etc/systemd/system is writable",
				run:    func(_ context.Context, e *env) error { return writeFile(e, SRIOVUnit, content) }})
		}
		if en, _ := unitState(ctx, e.Runner, SRIOVUnitName); changed || !en {
			p.Steps = append(p.Steps, Step{Title: "enable " + SRIOVUnitName, Commands: [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", SRIOVUnitName}},
				Remedy: "run `systemctl enable " + SRIOVUnitName + "` by hand and read its errors",
				run: func(ctx context.Context, e *env) error {
					if err := runCmd([]string{"systemctl", "daemon-reload"})(ctx, e); err != nil {
						return err
					}
					return runCmd([]string{"systemctl", "enable", SRIOVUnitName})(ctx, e)
				}})
		}
	}
	return nil
}

// PlanEnableVFs plans, for a host whose vGPU manager is installed and
// running, what gpuprep vgpu install would still do: enable the SR-IOV VFs
// of the GPUs that use them (sriov-manage -e, verified and retried) and
// keep them enabled across reboots (SRIOVUnit). Its prerequisite is
// pci-pf-stub, which sriov-manage needs. A host with every VF enabled and
// the unit in place gets a plan with no steps.
func PlanEnableVFs(ctx context.Context, fx effect.Effector, gpus []GPUInfo) (*InstallPlan, error) {
	e := &env{Effector: fx}
	p := &InstallPlan{}
	for _, g := range gpus {
		if UsesSRIOV(e.Root, g) {
			p.SRIOV = append(p.SRIOV, g.Address)
		}
	}
	sort.Strings(p.SRIOV)
	if err := planSRIOV(ctx, e, p, true, InstalledVersion(e.Root), false); err != nil {
		return nil, err
	}
	for _, s := range p.Steps {
		if len(s.Commands) > 0 && s.Commands[0][0] == SRIOVManage {
			p.Prereqs = []Prereq{pfStubPrereq(e.Root, KernelRelease(e.Root), p.SRIOV)}
			break
		}
	}
	return p, nil
}

func runCmd(argv []string) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		_, err := e.Runner.Run(ctx, argv...)
		return err
	}
}

func writeFile(e *env, p string, content []byte) error {
	_, err := journal.WriteFile(e.Root, p, content, 0o644, "vgpu install", e.Now())
	return err
}

// enableVFs runs sriov-manage -e on g until sriov_numvfs == sriov_totalvfs:
// it retries on "Cannot obtain unbindLock" (an NVML client holds the GPU for
// a moment) and on a run that reports success without enabling the VFs (vGPU
// 17.2's sriov-manage exited 0 on failure).
func enableVFs(ctx context.Context, e *env, g string) error {
	dev := "/sys/bus/pci/devices/" + g
	attempts := e.sriovAttempts
	if attempts <= 0 {
		attempts = 6
	}
	backoff := e.sriovBackoff
	if backoff <= 0 {
		backoff = 5 * time.Second
	}
	var last string
	for i := 1; i <= attempts; i++ {
		out, err := e.Runner.Run(ctx, SRIOVManage, "-e", g)
		tot, num := readInt(e.Root, dev+"/sriov_totalvfs"), readInt(e.Root, dev+"/sriov_numvfs")
		if err == nil && tot > 0 && num == tot {
			return nil
		}
		msg := strings.TrimSpace(string(out))
		if err != nil {
			msg = strings.TrimSpace(err.Error() + " " + msg)
		}
		if err != nil && !strings.Contains(msg, "unbindLock") {
			return fmt.Errorf("%s -e %s: %s", SRIOVManage, g, msg)
		}
		if err == nil {
			last = fmt.Sprintf("sriov-manage exited 0 but sriov_numvfs is %d of %d", num, tot)
		} else {
			last = msg
		}
		if i < attempts {
			e.Sleep(time.Duration(i) * backoff)
		}
	}
	if e.Root.LinkBase(dev+"/driver") == "" {
		last += "; " + g + " has no driver now"
	}
	return fmt.Errorf("VFs of %s not enabled after %d attempts: %s", g, attempts, last)
}

// Execute performs the plan's steps in order and stops at the first that
// fails, with a StepError. done receives each step as it completes.
func (p *InstallPlan) Execute(ctx context.Context, fx effect.Effector, done func(Step)) error {
	e := &env{Effector: fx, undoing: p.Undoing, sriovAttempts: p.sriovAttempts, sriovBackoff: p.sriovBackoff}
	if err := p.Missing(); err != nil {
		return err
	}
	for i, s := range p.Steps {
		if len(s.Commands) > 0 && !e.undoing {
			if err := journal.Append(e.Root, journal.CommandRecord{What: s.Title}.Intent("vgpu install", e.Now())); err != nil {
				return &StepError{N: i + 1, Of: len(p.Steps), Title: s.Title, Err: err}
			}
		}
		if err := s.run(ctx, e); err != nil {
			return &StepError{N: i + 1, Of: len(p.Steps), Title: s.Title, Err: err, Remedy: s.Remedy}
		}
		if len(s.Commands) > 0 && !e.undoing {
			_ = journal.Append(e.Root, journal.CommandRecord{What: s.Title}.Ran("vgpu install", e.Now()))
		}
		if done != nil {
			done(s)
		}
	}
	return nil
}

// installerStep runs the .run installer.
func installerStep(root *host.Root, d *Driver, opts InstallOptions, kver string) Step {
	argv := InstallerArgs(root, d, opts)
	return Step{Title: "run the NVIDIA installer " + d.TargetDir, Commands: [][]string{argv},
		Remedy: "read " + InstallerLog + " (a kernel module build error usually means headers that do not match " + kver + " or an unsupported kernel for this driver branch)",
		run: func(ctx context.Context, e *env) error {
			// what runs is a root-only copy whose hash is that of the
			// file checked: not the path, which may hold another file now
			run, done, err := verifiedCopy(d.Path, d.SHA256, e.Root)
			if err != nil {
				return err
			}
			defer done()
			if err := runCmd(InstallerArgsFor(argv, run))(ctx, e); err != nil {
				return err
			}
			if !e.Root.Exists("/usr/bin/nvidia-vgpu-mgr") {
				return errors.New("the installer succeeded but /usr/bin/nvidia-vgpu-mgr is not there")
			}
			return keepInstalled(e, d, run)
		}}
}

// isPackage reports whether the file at path starts as a .deb or an .rpm
// does (InspectDriver then checks its contents).
func isPackage(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(debMagic))
	n, _ := io.ReadFull(f, head)
	return strings.HasPrefix(string(head[:n]), debMagic) || strings.HasPrefix(string(head[:n]), rpmMagic)
}

// PackageCommands are the commands that install a .deb or .rpm of the vGPU
// manager in the root, with its dependencies (DKMS, which builds and signs
// the modules): apt-get (dpkg -i where there is no apt-get), dnf (rpm -Uvh
// where there is no dnf; --replacepkgs makes a half-done install's re-run
// work). The file is given as a path (./FILE), which apt-get needs to take
// it for a file rather than a package name.
func PackageCommands(root *host.Root, d *Driver) [][]string {
	file := d.Path
	if !strings.Contains(file, "/") {
		file = "./" + file
	}
	switch {
	case d.Format == FormatDeb && root.FindProgram("apt-get") != "":
		return [][]string{{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", file}}
	case d.Format == FormatDeb:
		return [][]string{{"dpkg", "-i", file}}
	case root.FindProgram("dnf") != "":
		return [][]string{{"dnf", "install", "-y", file}}
	}
	return [][]string{{"rpm", "-Uvh", "--replacepkgs", file}}
}

// packageArgsFor is argv (a PackageCommands command) with the package file
// named by the verified copy run (an absolute path, which apt-get also takes
// for a file).
func packageArgsFor(argv []string, path, run string) []string {
	out := append([]string(nil), argv...)
	for i, a := range out {
		if a == path || a == "./"+path {
			out[i] = run
		}
	}
	return out
}

// packageStep installs a .deb or .rpm with the distribution's tool.
func packageStep(root *host.Root, d *Driver, kver string) Step {
	cmds := PackageCommands(root, d)
	tool := cmds[0][0]
	if tool == "env" {
		tool = cmds[0][2]
	}
	remedy := "read " + tool + "'s output above"
	switch tool {
	case "apt-get", "dpkg":
		remedy += " and /var/log/apt/term.log"
	case "dnf":
		remedy += " and /var/log/dnf.log"
	}
	remedy += "; a kernel module build error is in /var/lib/dkms/nvidia*/*/build/make.log (headers that do not match " + kver + ", or a kernel this driver branch does not support)"
	if tool == "dpkg" || tool == "rpm" {
		remedy += "; " + tool + " does not install dependencies: install dkms and the kernel headers first"
	}
	return Step{Title: "install the package " + d.Name() + " (" + tool + ")", Commands: cmds, Remedy: remedy,
		run: func(ctx context.Context, e *env) error {
			// what the package manager installs is a root-only copy whose
			// hash is that of the file checked, as for a .run
			run, done, err := verifiedCopy(d.Path, d.SHA256, e.Root)
			if err != nil {
				return err
			}
			defer done()
			for _, argv := range cmds {
				if err := runCmd(packageArgsFor(argv, d.Path, run))(ctx, e); err != nil {
					return err
				}
			}
			if !e.Root.Exists("/usr/bin/nvidia-vgpu-mgr") {
				return errors.New(tool + " succeeded but /usr/bin/nvidia-vgpu-mgr is not there")
			}
			return keepInstalled(e, d, run)
		}}
}

func ptr[T any](v T) *T { return &v }
