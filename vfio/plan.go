// Package vfio binds the functions of GPUs (and NVSwitches) to VFIO drivers
// for PCI passthrough: whole IOMMU groups, with the VFIO variant driver that
// modules.alias names for the device, verified, rolled back on failure,
// recorded in the journal, optionally made persistent, and reversible.
package vfio

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
)

// Sysfs writes one value to a sysfs attribute with one write(2). *host.Root
// is the real one; tests use a simulator (fixture.Kernel) that reacts to the
// writes as the kernel does. It is the effector's writer (effect.Effector.Sysfs).
type Sysfs = effect.AttrWriter

// DefaultModule is the generic VFIO PCI driver's module.
const DefaultModule = "vfio_pci"

// Options tune Plan and Apply.
type Options struct {
	NVSwitch bool          // bind NVSwitches with the GPUs
	Force    bool          // unbind nvidia (or vfio) even while its device nodes are held open
	Persist  bool          // make the binding survive reboot
	Timeout  time.Duration // per sysfs write; 0 means DefaultTimeout
	// BootIntents, when set, gives the journal entries for a command of a
	// bootloader edit (provision.BootArgIntents: what grubby, kernelstub…
	// change, for rollback); see CmdlineIDs.
	BootIntents func(boot *grub.Boot, gp *grub.Plan, argv []string, command string) []journal.Entry
	// ModuleDryRun, when set, receives the module files the built-in loader
	// would load instead of loading them (tests).
	ModuleDryRun func(path string)
	// Regenerate (Unbind), when no device is left to unbind: why the
	// initramfs is regenerated all the same (a caller whose journal shows an
	// earlier unbind removed gpuprep's files and stopped before
	// regenerating it); what remains of the files goes too.
	Regenerate string
	// AllowHostDevices lets host devices (HostDevice: storage, network,
	// USB and other controllers that are not functions of a GPU card) go to
	// VFIO when selected or in a selected device's group; without it they
	// are refused.
	AllowHostDevices bool
	// NoRestore (Unbind): drivers a device is not given back to (left
	// unbound): nouveau where containers take the GPUs next, whose binding
	// could bring up a console that keeps it from being unloaded.
	NoRestore []string
}

// DefaultTimeout bounds each sysfs write: a write to bind/unbind can hang
// in a driver's probe or remove.
const DefaultTimeout = 15 * time.Second

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// Target is one PCI function that goes to a VFIO driver.
type Target struct {
	Dev      *pci.Device
	Role     iommu.Role // gpu, function or selected (an NVSwitch or another selected GPU)
	For      string     // address of the selected device whose group brought it in
	Driver   string     // bound now; "" when unbound
	Override string     // driver_override now; "" when cleared
	Module   string     // VFIO module to use: vfio_pci, nvgrace_gpu_vfio_pci, …
	VFIO     string     // that module's driver name in /sys/bus/pci/drivers
	Alias    string     // the modules.alias pattern that chose Module; "" for the fallback
	Bound    bool       // already on a VFIO driver: left alone
}

// Step is one sysfs write of a plan.
type Step struct {
	Device string
	Path   string
	Value  string
}

func (s Step) String() string {
	return change.SysfsWrite(s.Path, s.Value)
}

// Plan is what bind will do.
type Plan struct {
	Kernel   string
	Targets  []*Target
	Modules  []string // modules to load first
	Steps    []Step   // sysfs writes, in order
	Persist  *Persist // nil without --persist
	Holders  []Holder // processes holding /dev/nvidia* (with --force)
	Warnings []string
}

// Refused is a plan that must not be applied: a group with a foreign
// endpoint, a host device (HostDevice) without AllowHostDevices, a device
// without an IOMMU group, a GPU that hosts vGPUs or has SR-IOV VFs enabled
// (even with Force), nvidia held open.
type Refused struct{ Reasons []string }

func (r *Refused) Error() string {
	return "refused:\n  " + strings.Join(r.Reasons, "\n  ")
}

// SelectError is a selector that matched nothing (a usage error).
type SelectError struct{ Err error }

func (e *SelectError) Error() string { return e.Err.Error() }

// Selection returns the selected devices: the GPUs of sel, and with
// nvswitch every NVSwitch.
func Selection(inv *pci.Inventory, sel pci.Selector, nvswitch bool) ([]*pci.Device, error) {
	gpus, err := sel.Select(inv)
	if err != nil {
		return nil, &SelectError{err}
	}
	if nvswitch {
		for _, s := range pci.NVSwitches(inv) {
			if !containsDev(gpus, s) {
				gpus = append(gpus, s)
			}
		}
	}
	return gpus, nil
}

func containsDev(ds []*pci.Device, d *pci.Device) bool {
	for _, x := range ds {
		if x.Address == d.Address {
			return true
		}
	}
	return false
}

// NewPlan computes, per selected device, every endpoint function of its
// IOMMU group and the VFIO driver for each, and the sysfs writes that bind
// them. A group that holds an endpoint that is neither a function of the
// selected device nor selected itself is refused, naming that endpoint; so
// is, without Options.AllowHostDevices, every host device (HostDevice) the
// plan would bind, selected or brought in by a group; and, even with
// Options.Force, a device the plan would take from its driver while it
// hosts NVIDIA vGPU: live vGPUs or enabled SR-IOV VFs (ReadVGPUUse), which
// the unbind would destroy.
func NewPlan(root *host.Root, inv *pci.Inventory, sel pci.Selector, opts Options) (*Plan, error) {
	selected, err := Selection(inv, sel, opts.NVSwitch)
	if err != nil {
		return nil, err
	}
	p := &Plan{Kernel: kernel(root)}
	if len(selected) == 0 {
		return nil, &Refused{Reasons: []string{"no device selected (no NVIDIA GPU on this host; use --select)"}}
	}
	aliases, aerr := readAliases(root, p.Kernel)
	if aerr != nil {
		p.Warnings = append(p.Warnings, aerr.Error()+": using "+DefaultModule)
	}
	pl := planner{root: root, inv: inv, opts: opts, p: p, aliases: aliases, selected: selected, seen: map[string]bool{}}
	var refused []string
	for _, s := range selected {
		refused = append(refused, pl.group(s)...)
	}
	if len(refused) > 0 {
		return nil, &Refused{Reasons: refused}
	}
	sort.SliceStable(p.Targets, func(i, j int) bool { return p.Targets[i].Dev.Address < p.Targets[j].Dev.Address })

	// a GPU hosting vGPUs (or SR-IOV VFs) loses them with its driver
	var devs []*pci.Device
	for _, t := range p.Targets {
		devs = append(devs, t.Dev)
	}
	if refused = VGPURefusals(root, devs); len(refused) > 0 {
		return nil, &Refused{Reasons: refused}
	}
	p.planSteps(root)
	if len(p.Holders) > 0 && !opts.Force {
		return nil, &Refused{Reasons: []string{"the NVIDIA driver is in use: /dev/nvidia* is held open by " + holderList(p.Holders) +
			"; stop them (nvidia-persistenced, nv-fabricmanager, dcgm, GPU containers; systemctl disable --now for the services, or they start again at boot) or pass --force (unbinds under them: what holds the GPU may fail)"}}
	}
	if opts.Persist {
		p.Persist, err = planPersist(root, inv, p.Targets, nil)
		if err != nil {
			return nil, err
		}
		p.Warnings = append(p.Warnings, builtinWarnings(root, p.Targets, p.Persist)...)
	}
	return p, nil
}

// planner is NewPlan's state while it takes in the groups of the selected
// devices.
type planner struct {
	root     *host.Root
	inv      *pci.Inventory
	opts     Options
	p        *Plan
	aliases  []alias
	selected []*pci.Device
	seen     map[string]bool // endpoints already targets
}

// group adds the endpoints of the IOMMU group of the selected device s as
// targets, and returns why those that cannot go are refused.
func (pl *planner) group(s *pci.Device) []string {
	if s.IOMMUGroup == "" {
		return []string{fmt.Sprintf("%s has no IOMMU group: the IOMMU is off in the kernel (see gpuprep check --mode vm-passthrough)", s.Address)}
	}
	v := iommu.Viability(pl.inv, s, pl.selected)
	if r := pl.foreign(s, v); r != "" {
		return []string{r}
	}
	var refused []string
	for _, m := range v.Members {
		if m.Role == iommu.RoleBridge || pl.seen[m.Dev.Address] {
			continue
		}
		pl.seen[m.Dev.Address] = true
		if r := pl.member(s, m); r != "" {
			refused = append(refused, r)
		}
	}
	return refused
}

// foreign is why the group of s (verdict v) is refused for the endpoints
// it holds that are neither selected nor functions of a selected device;
// "" for none.
func (pl *planner) foreign(s *pci.Device, v iommu.Verdict) string {
	var names, hostDevs []string
	for _, f := range v.Foreign {
		if covered(pl.selected, f) {
			continue
		}
		names = append(names, describe(f))
		if u, ok := HostDevice(pl.inv, f); ok {
			hostDevs = append(hostDevs, fmt.Sprintf("%s (%s) %s", f.Address, u.Kind, u.Why))
		}
	}
	if len(names) == 0 {
		return ""
	}
	hint := "select it too, or move the card to a slot with its own group"
	if len(hostDevs) > 0 && !pl.opts.AllowHostDevices {
		hint = "move the card to a slot with its own IOMMU group: a CPU root port with ACS, or ACS enabled in the BIOS; " +
			strings.Join(hostDevs, ", ") + ", and gpuprep does not give storage, network, USB or other host controllers to VMs"
	}
	return fmt.Sprintf("%s: IOMMU group %s also holds %s, which would have to leave the host with it (%s)",
		s.Address, v.Group, strings.Join(names, ", "), hint)
}

// member adds the group member m (of selected device s's group) as a
// target, or returns why it is refused.
func (pl *planner) member(s *pci.Device, m iommu.Member) string {
	if m.Dev.IsBridge() {
		// selected itself: vfio-pci takes no bridge
		return fmt.Sprintf("%s is a PCI bridge (class %s, %s): vfio-pci does not take bridges; select the devices behind it", m.Dev.Address, m.Dev.Class, driverLabel(m.Dev.Driver))
	}
	if u, ok := HostDevice(pl.inv, m.Dev); ok {
		if !pl.opts.AllowHostDevices {
			return hostDeviceReason(m.Dev, u, containsDev(pl.selected, m.Dev), s.Address)
		}
		pl.p.Warnings = append(pl.p.Warnings, fmt.Sprintf("--allow-host-devices: %s (%s, %s) goes to VFIO: the host loses it (it %s)",
			m.Dev.Address, u.Kind, driverLabel(m.Dev.Driver), u.Why))
	}
	root := pl.root
	t := &Target{Dev: m.Dev, Role: m.Role, For: s.Address}
	t.Driver, t.Override = current(root, m.Dev.Address)
	t.Module, t.Alias = chooseModule(pl.aliases, modalias(root, m.Dev.Address))
	t.VFIO = driverName(root, t.Module)
	t.Bound = pci.DriverIsVFIO(t.Driver)
	if t.Bound && t.Driver != t.VFIO {
		pl.p.Warnings = append(pl.p.Warnings, fmt.Sprintf("%s is on %s while modules.alias names %s: left alone (unbind it first to switch)", t.Dev.Address, t.Driver, t.VFIO))
	}
	pl.p.Targets = append(pl.p.Targets, t)
	return ""
}

// planSteps plans the sysfs writes that bind the targets not on VFIO yet,
// the modules to load first, and (for one on nvidia) the processes that
// hold the NVIDIA driver.
func (p *Plan) planSteps(root *host.Root) {
	var mods []string
	for _, t := range p.Targets {
		if t.Bound {
			continue
		}
		if t.Driver == "nvidia" && p.Holders == nil {
			p.Holders = Holders(root, NVIDIANode)
		}
		mods = append(mods, t.Module)
		p.Steps = append(p.Steps, bindSteps(t)...)
	}
	if len(mods) > 0 {
		mods = append([]string{"vfio_iommu_type1"}, mods...)
	}
	for _, m := range uniq(mods) {
		if !root.Exists("/sys/module/" + m) {
			p.Modules = append(p.Modules, m)
		}
	}
}

// bindSteps: clear driver_override → unbind from the current driver → set
// driver_override → bind.
func bindSteps(t *Target) []Step {
	a := t.Dev.Address
	dev := "/sys/bus/pci/devices/" + a
	var s []Step
	if t.Override != "" {
		s = append(s, Step{a, dev + "/driver_override", "\n"})
	}
	if t.Driver != "" {
		s = append(s, Step{a, dev + "/driver/unbind", a})
	}
	return append(s, Step{a, dev + "/driver_override", t.VFIO}, Step{a, "/sys/bus/pci/drivers/" + t.VFIO + "/bind", a})
}

// covered: d is selected or a function of a selected device (the group
// goes to the VM whole).
func covered(selected []*pci.Device, d *pci.Device) bool {
	for _, s := range selected {
		if s.Address == d.Address || s.Slot() == d.Slot() {
			return true
		}
	}
	return false
}

func describe(d *pci.Device) string {
	return fmt.Sprintf("%s [%s:%s class %s, driver %s]", d.Address, d.VendorID, d.DeviceID, d.Class, driverOr(d.Driver))
}

func driverOr(d string) string {
	if d == "" {
		return "none"
	}
	return d
}

func uniq(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func kernel(root *host.Root) string {
	k, _ := kernelrelease.Running(root)
	return k
}

// current reads a device's driver and driver_override.
func current(root *host.Root, addr string) (driver, override string) {
	driver = root.LinkBase("/sys/bus/pci/devices/" + addr + "/driver")
	override, _ = root.ReadString("/sys/bus/pci/devices/" + addr + "/driver_override")
	if override == "(null)" {
		override = ""
	}
	return driver, override
}

func modalias(root *host.Root, addr string) string {
	s, _ := root.ReadString("/sys/bus/pci/devices/" + addr + "/modalias")
	return s
}

type alias struct{ pattern, module string }

// readAliases returns the `alias vfio_pci:… MODULE` lines of the running
// kernel's modules.alias.
func readAliases(root *host.Root, kver string) ([]alias, error) {
	p := "/lib/modules/" + kver + "/modules.alias"
	b, err := root.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s", p)
	}
	var out []alias
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "alias" && strings.HasPrefix(f[1], "vfio_pci:") {
			out = append(out, alias{pattern: f[1], module: f[2]})
		}
	}
	return out, nil
}

// chooseModule picks the module whose vfio_pci: alias matches the device's
// modalias (pci:v…) with the fewest wildcards; vfio_pci when none does.
func chooseModule(aliases []alias, modalias string) (module, pattern string) {
	module, best := DefaultModule, -1
	if !strings.HasPrefix(modalias, "pci:") {
		return module, ""
	}
	name := "vfio_" + modalias
	for _, a := range aliases {
		ok, err := path.Match(a.pattern, name)
		if err != nil || !ok {
			continue
		}
		n := strings.Count(a.pattern, "*") + strings.Count(a.pattern, "?")
		if best < 0 || n < best {
			module, pattern, best = a.module, a.pattern, n
		}
	}
	return module, pattern
}

// driverName maps a module to its PCI driver's directory name: from
// /sys/module/MOD/drivers/pci:NAME when the module is loaded, else an
// existing /sys/bus/pci/drivers entry, else the module name with `_` → `-`
// (vfio_pci → vfio-pci).
func driverName(root *host.Root, module string) string {
	for _, n := range root.Names("/sys/module/" + module + "/drivers") {
		if strings.HasPrefix(n, "pci:") {
			return strings.TrimPrefix(n, "pci:")
		}
	}
	dashed := strings.ReplaceAll(module, "_", "-")
	for _, n := range []string{dashed, module} {
		if root.Exists("/sys/bus/pci/drivers/" + n) {
			return n
		}
	}
	return dashed
}
