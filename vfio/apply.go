package vfio

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"io/fs"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/u-root/u-root/pkg/kmodule"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kernelrelease"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/plural"
)

// Change is one device moved from one driver to another.
type Change struct {
	Device, Before, After string
}

// Result says what Bind or Unbind did.
type Result struct {
	Changed   []Change
	Unchanged []string      // devices left alone (already on a VFIO driver)
	Files     []change.File // as written: with the Backup and the directories Made
	Commands  [][]string
	Groups    map[string]bool // IOMMU group → /dev/vfio/<group> present
	Notes     []string
}

// loadModule loads m with the distribution's modprobe through the runner,
// which applies /etc/modprobe.d (options, softdeps). Where the host has no
// modprobe (a minimal or container image), u-root's kmodule loads m and its
// dependencies straight from modules.dep of the running kernel. It returns
// what it ran, for the report.
func loadModule(ctx context.Context, e effect.Effector, opts Options, m string) ([]string, error) {
	argv := []string{"modprobe", m}
	_, err := e.Runner.Run(ctx, argv...)
	if err == nil || !errors.Is(err, exec.ErrNotFound) {
		return argv, err
	}
	if !e.Root.IsLive() && opts.ModuleDryRun == nil {
		return argv, fmt.Errorf("no modprobe, and modules are never loaded from a root that is not /: %w", err)
	}
	kver, _ := kernelrelease.Running(e.Root)
	po := kmodule.ProbeOpts{KVer: kver, DryRunCB: opts.ModuleDryRun, IgnoreProcMods: !e.Root.IsLive()}
	if !e.Root.IsLive() {
		po.RootDir = e.Root.Dir()
	}
	if err := kmodule.ProbeOptions(m, "", po); err != nil {
		return []string{"(built-in loader)", m}, fmt.Errorf("no modprobe on this host; loading %s from modules.dep: %w", m, err)
	}
	return []string{"(built-in loader)", m}, nil
}

type writer struct {
	fs      effect.AttrWriter
	timeout time.Duration
}

// write performs one sysfs write in a goroutine and gives up after the
// timeout: a write to bind or unbind blocks while a driver probes or
// removes the device, and can hang.
func (w writer) write(p, v string) error {
	done := make(chan error, 1)
	go func() { done <- w.fs.WriteAttr(p, v) }()
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("write %q to %s: no answer after %s (the kernel may still be working on it)", strings.TrimSpace(v), p, w.timeout)
	}
}

func driverOf(e effect.Effector, addr string) string {
	return e.Root.LinkBase("/sys/bus/pci/devices/" + addr + "/driver")
}

// Bind applies a plan: loads the modules, then per device clears
// driver_override, unbinds it from its driver, sets driver_override and
// binds it to the VFIO driver, and verifies the driver link. Devices
// already on a VFIO driver are not touched. On any failure everything
// changed so far is rolled back and the error says so.
func Bind(ctx context.Context, e effect.Effector, inv *pci.Inventory, p *Plan, opts Options) (*Result, error) {
	res := &Result{Groups: map[string]bool{}}
	w := writer{fs: e.Attrs(), timeout: opts.timeout()}
	if err := loadModules(ctx, e, opts, p.Modules, res); err != nil {
		return res, err
	}
	todo, err := bindTargets(e, p, res)
	if err != nil {
		return res, err
	}
	var done []*Target
	fail := func(err error) (*Result, error) { return res, undoBind(e, w, done, opts, res, err) }
	for _, t := range todo {
		// the intent first (durable): killed after the driver changed,
		// the journal still names the driver to restore
		rec := journal.DriverRecord{Device: t.Dev.Address, Before: t.Driver, After: t.VFIO}
		if err := journal.Append(e.Root, rec.Intent("vfio bind", e.Now())); err != nil {
			return fail(err)
		}
		done = append(done, t)
		if err := bindOne(e, w, t); err != nil {
			return fail(err)
		}
		res.Changed = append(res.Changed, Change{Device: t.Dev.Address, Before: t.Driver, After: t.VFIO})
		if err := journal.Append(e.Root, rec.Done("vfio bind", e.Now())); err != nil {
			return fail(err)
		}
	}
	if p.Persist != nil {
		files, err := applyPersist(ctx, e, p.Persist, "vfio bind", opts, res)
		if err != nil {
			if rf := restoreFiles(e, files); len(rf) > 0 {
				err = fmt.Errorf("%w; files not restored: %s", err, strings.Join(rf, "; "))
			}
			return fail(err)
		}
	}
	waitGroups(e, p.Targets, res)
	return res, nil
}

// loadModules loads the modules Bind needs, before any change.
func loadModules(ctx context.Context, e effect.Effector, opts Options, modules []string, res *Result) error {
	for _, m := range modules {
		argv, err := loadModule(ctx, e, opts, m)
		res.Commands = append(res.Commands, argv)
		if err != nil {
			return fmt.Errorf("load %s: %w (nothing was changed)", m, err)
		}
	}
	return nil
}

// bindTargets are the targets of p that Bind moves (those on VFIO
// already are Unchanged), each with the VFIO driver its loaded module
// registers; an error when one is not registered.
func bindTargets(e effect.Effector, p *Plan, res *Result) ([]*Target, error) {
	var todo []*Target
	for _, t := range p.Targets {
		if t.Bound {
			res.Unchanged = append(res.Unchanged, t.Dev.Address)
			continue
		}
		t.VFIO = driverName(e.Root, t.Module) // the loaded module names its driver
		if !e.Root.Exists("/sys/bus/pci/drivers/" + t.VFIO) {
			return nil, fmt.Errorf("%s: driver %s (module %s) is not registered in /sys/bus/pci/drivers (nothing was changed)", t.Dev.Address, t.VFIO, t.Module)
		}
		todo = append(todo, t)
	}
	return todo, nil
}

// undoBind puts the devices done back on their drivers after Bind failed
// with err, journalling each one restored, and returns err saying so.
func undoBind(e effect.Effector, w writer, done []*Target, opts Options, res *Result, err error) error {
	rb := rollback(e, w, done)
	for _, t := range done {
		if d := driverOf(e, t.Dev.Address); d == t.Driver {
			_ = journal.Append(e.Root, journal.DriverRecord{Device: t.Dev.Address, Before: t.VFIO, After: t.Driver}.Done("vfio bind (rolled back)", e.Now()))
		}
	}
	res.Changed = nil
	if len(rb) > 0 {
		return fmt.Errorf("%w; rollback incomplete: %s", err, strings.Join(rb, "; "))
	}
	if len(done) > 0 {
		return fmt.Errorf("%w; rolled back: %s restored to their drivers", err, plural.N(len(done), "device"))
	}
	return err
}

func bindOne(e effect.Effector, w writer, t *Target) error {
	a := t.Dev.Address
	dev := "/sys/bus/pci/devices/" + a
	if t.Override != "" {
		if err := w.write(dev+"/driver_override", "\n"); err != nil {
			return fmt.Errorf("%s: clear driver_override: %w", a, err)
		}
	}
	if t.Driver != "" {
		if err := w.write(dev+"/driver/unbind", a); err != nil {
			return fmt.Errorf("%s: unbind from %s: %w", a, t.Driver, err)
		}
		if d := driverOf(e, a); d != "" {
			return fmt.Errorf("%s: still on %s after unbind", a, d)
		}
	}
	if err := w.write(dev+"/driver_override", t.VFIO); err != nil {
		return fmt.Errorf("%s: set driver_override: %w", a, err)
	}
	if err := w.write("/sys/bus/pci/drivers/"+t.VFIO+"/bind", a); err != nil {
		return fmt.Errorf("%s: bind to %s: %w", a, t.VFIO, err)
	}
	switch d := driverOf(e, a); d {
	case t.VFIO:
		return nil
	case "":
		return fmt.Errorf("%s: the bind to %s reported success but the device has no driver", a, t.VFIO)
	default:
		return fmt.Errorf("%s: on %s after the bind to %s", a, d, t.VFIO)
	}
}

// rollback returns the devices, last first, to the driver and override they
// had; it returns what it could not restore.
func rollback(e effect.Effector, w writer, done []*Target) []string {
	var failed []string
	for i := len(done) - 1; i >= 0; i-- {
		t := done[i]
		a := t.Dev.Address
		if cur := driverOf(e, a); cur != t.Driver && cur != "" {
			if err := w.write("/sys/bus/pci/drivers/"+cur+"/unbind", a); err != nil {
				failed = append(failed, fmt.Sprintf("%s: unbind from %s: %v", a, cur, err))
				continue
			}
		}
		ov := t.Override
		if ov == "" {
			ov = "\n"
		}
		if err := w.write("/sys/bus/pci/devices/"+a+"/driver_override", ov); err != nil {
			failed = append(failed, fmt.Sprintf("%s: restore driver_override: %v", a, err))
		}
		if t.Driver != "" && driverOf(e, a) != t.Driver {
			if err := w.write("/sys/bus/pci/drivers/"+t.Driver+"/bind", a); err != nil {
				failed = append(failed, fmt.Sprintf("%s: rebind to %s: %v", a, t.Driver, err))
				continue
			}
			if d := driverOf(e, a); d != t.Driver {
				failed = append(failed, fmt.Sprintf("%s: on %q, not %s, after the rebind", a, d, t.Driver))
			}
		}
	}
	return failed
}

// applyPersist writes (or removes) the persistent files, each backed up and
// journalled, then regenerates the initramfs (also when no file changed but
// p.Regenerate says it must). It returns the files changed, for
// restoreFiles on a later failure.
func applyPersist(ctx context.Context, e effect.Effector, p *Persist, command string, opts Options, res *Result) ([]change.File, error) {
	var changed []change.File
	now := e.Now()
	for _, f := range p.Files {
		if f.Removed {
			bak, err := journal.RemoveFile(e.Root, f.Path, command, now)
			if bak != "" && (err == nil || !e.Root.Exists(f.Path)) {
				fc := f
				fc.Backup = bak
				changed = append(changed, fc)
				res.Files = append(res.Files, fc)
			}
			if err != nil {
				return changed, err
			}
			continue
		}
		made := journal.Missing(e.Root, path.Dir(f.Path))
		wr, err := journal.WriteFile(e.Root, f.Path, f.New, f.Perm(), command, now)
		if wr.Changed {
			fc := f
			fc.Backup, fc.Made = wr.Backup, made
			changed = append(changed, fc)
			res.Files = append(res.Files, fc)
		}
		if err != nil {
			return changed, fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	if err := applyCmdline(ctx, e, opts, p.Cmdline, now, res); err != nil {
		return changed, err
	}
	if (len(changed) > 0 || p.Regenerate != "") && p.Initramfs != nil {
		if out, err := e.Runner.Run(ctx, p.Initramfs...); err != nil {
			return changed, fmt.Errorf("regenerate the initramfs: %w\n%s", err, out)
		}
		res.Commands = append(res.Commands, p.Initramfs) // what ran (and did not fail)
		if len(changed) == 0 {
			res.Notes = append(res.Notes, "regenerated the initramfs: "+p.Regenerate)
		}
	}
	res.Notes = append(res.Notes, p.Warnings...)
	return changed, nil
}

// restoreFiles undoes applyPersist: files it created go away, the others
// get their backup's content back, each atomically (WriteFileAtomic: what
// gpuprep had written there is backed up in turn) with the mode the file had
// (a removed file: its backup's). It returns what it could not restore.
func restoreFiles(e effect.Effector, files []change.File) []string {
	var failed []string
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if f.Backup == "" {
			if err := e.Root.RemoveFile(f.Path); err != nil {
				failed = append(failed, fmt.Sprintf("remove %s: %v", f.Path, err))
				continue
			}
			// the directories made for it, when nothing else went there
			for j := len(f.Made) - 1; j >= 0; j-- {
				if e.Root.RemoveDir(f.Made[j]) != nil {
					break
				}
			}
			continue
		}
		old, err := e.Root.ReadFile(f.Backup)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: read its backup: %v (restore it from %s by hand)", f.Path, err, f.Backup))
			continue
		}
		mode := fs.FileMode(0o644)
		if fi, err := e.Root.Stat(f.Backup); err == nil {
			mode = fi.Mode().Perm()
		}
		if _, err := e.Root.WriteFileAtomic(f.Path, old, mode, restoreTime(e, f)); err != nil {
			failed = append(failed, fmt.Sprintf("restore %s from %s: %v", f.Path, f.Backup, err))
		}
	}
	return failed
}

// restoreTime is when restoreFiles writes f back, by the effector's clock:
// the backup it makes of what it undoes must not take the name of the
// backup being restored, which a clock stopped at the apply's time (At)
// would give it, so such a clock's time is moved on by a nanosecond (the
// backup name's precision).
func restoreTime(e effect.Effector, f change.File) time.Time {
	now := e.Now()
	for host.BackupName(f.Path, now) == f.Backup {
		now = now.Add(time.Nanosecond)
	}
	return now
}

// groupPolls and groupPoll bound waitGroups: 100 looks 50 ms apart, 5 s
// for all the groups together.
const (
	groupPolls = 100
	groupPoll  = 50 * time.Millisecond
)

// waitGroups waits (briefly: devtmpfs creates the node asynchronously) for
// /dev/vfio/<group> of each target's group, through the effector's Pause:
// counted looks, not a deadline on a clock, which an effector's clock
// stopped at the apply's time (At) would never reach.
func waitGroups(e effect.Effector, ts []*Target, res *Result) {
	polls := 0
	for _, t := range ts {
		g := t.Dev.IOMMUGroup
		if _, ok := res.Groups[g]; ok || g == "" {
			continue
		}
		for !e.Root.Exists("/dev/vfio/"+g) && e.Root.IsLive() && polls < groupPolls {
			e.Sleep(groupPoll)
			polls++
		}
		res.Groups[g] = e.Root.Exists("/dev/vfio/" + g)
	}
}

// ErrNothing is returned by Unbind when no selected device is on a VFIO
// driver or persisted.
var ErrNothing = errors.New("nothing to unbind")

// UnbindTargets are the functions Unbind moves off VFIO: every endpoint of
// the selected devices' groups that is on (or overridden to) a VFIO driver
// or in gpuprep's persistent configuration, or unbound by an unbind that
// the journal shows started and not done — of another slot than a selected
// device only when it is on a VFIO driver or so left unbound.
func UnbindTargets(root *host.Root, inv *pci.Inventory, selected []*pci.Device) []*pci.Device {
	persisted := Persisted(root)
	entries, _ := journal.Read(root) // unreadable: only what sysfs shows
	var targets []*pci.Device
	seen := map[string]bool{}
	for _, s := range selected {
		members := inv.Group(s.IOMMUGroup)
		if s.IOMMUGroup == "" {
			members = []*pci.Device{s}
		}
		for _, d := range members {
			if d.IsBridge() || seen[d.Address] {
				continue
			}
			drv, ov := current(root, d.Address)
			// unbound by an unbind killed before its record: still to go back
			pending := drv == "" && unbindPending(entries, d.Address)
			if d.Slot() != s.Slot() && !containsDev(selected, d) && !pci.DriverIsVFIO(drv) && !pending {
				continue // another device of the group that gpuprep did not bind
			}
			if pci.DriverIsVFIO(drv) || pci.DriverIsVFIO(ov) || persisted[d.Address] != "" || pending {
				seen[d.Address] = true
				targets = append(targets, d)
			}
		}
	}
	return targets
}

// Unbind returns every endpoint of the selected devices' groups that is on a
// VFIO driver to the driver the journal recorded before bind (or leaves it
// unbound, saying so), clears driver_override, and removes the devices from
// gpuprep's persistent configuration.
func Unbind(ctx context.Context, e effect.Effector, inv *pci.Inventory, sel pci.Selector, opts Options) (*Result, error) {
	selected, err := Selection(inv, sel, opts.NVSwitch)
	if err != nil {
		return nil, err
	}
	res := &Result{Groups: map[string]bool{}}
	targets := UnbindTargets(e.Root, inv, selected)
	if len(targets) == 0 {
		return res, unbindLeftovers(ctx, e, inv, opts, res)
	}
	if refused := groupsInUse(e.Root, targets, opts.Force); len(refused) > 0 {
		return res, &Refused{Reasons: refused}
	}
	entries, jerr := journal.Read(e.Root)
	if jerr != nil {
		res.Notes = append(res.Notes, "journal: "+jerr.Error())
	}
	u := unbinder{e: e, w: writer{fs: e.Attrs(), timeout: opts.timeout()}, opts: opts, res: res, entries: entries}
	var failed, unbound []string
	for _, d := range targets {
		if msg := u.unbind(d.Address); msg != "" {
			failed = append(failed, msg)
			continue
		}
		unbound = append(unbound, d.Address)
	}
	if len(unbound) > 0 && len(Persisted(e.Root)) > 0 {
		if msg, err := unpersistUnbound(ctx, e, inv, unbound, opts, res); err != nil {
			return res, err
		} else if msg != "" {
			failed = append(failed, msg)
		}
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("unbind failed: %s", strings.Join(failed, "; "))
	}
	return res, nil
}

// unbindLeftovers is Unbind with no device on VFIO: what an earlier
// unbind left undone, or ErrNothing.
func unbindLeftovers(ctx context.Context, e effect.Effector, inv *pci.Inventory, opts Options, res *Result) error {
	if opts.Regenerate == "" {
		// An earlier unbind that removed the files and then failed
		// to regenerate the initramfs left one that still binds the
		// GPUs to VFIO at boot.
		opts.Regenerate = InitramfsStale(e.Root)
	}
	pp, err := planPersist(e.Root, inv, nil, nil)
	if err != nil {
		return err
	}
	// An earlier unbind killed while it removed the files (its
	// modprobe.d file gone, the others not): no device is persisted,
	// and what is left of gpuprep's files goes.
	var left []change.File
	if len(Persisted(e.Root)) == 0 {
		left, _ = pp.Pending(e.Root)
	}
	if opts.Regenerate == "" && len(left) == 0 {
		return ErrNothing
	}
	pp.Regenerate = opts.Regenerate
	_, err = applyPersist(ctx, e, pp, "vfio unbind", opts, res)
	return err
}

// groupsInUse says, for each IOMMU group of targets whose /dev/vfio node a
// process holds open, why it is not unbound (nothing with force).
func groupsInUse(root *host.Root, targets []*pci.Device, force bool) []string {
	var refused []string
	for _, g := range uniqGroups(targets) {
		if hs := Holders(root, GroupNode(g)); len(hs) > 0 && !force {
			refused = append(refused, fmt.Sprintf("IOMMU group %s is in use (a VM?): /dev/vfio/%s is held open by %s; stop it or pass --force", g, g, holderList(hs)))
		}
	}
	return refused
}

// unpersistUnbound drops the devices unbound from gpuprep's persistent
// configuration; msg is why that failed (err: it could not be planned).
func unpersistUnbound(ctx context.Context, e effect.Effector, inv *pci.Inventory, unbound []string, opts Options, res *Result) (msg string, err error) {
	pp, err := planPersist(e.Root, inv, nil, unbound)
	if err != nil {
		return "", err
	}
	changed, err := applyPersist(ctx, e, pp, "vfio unbind", opts, res)
	if err == nil {
		return "", nil
	}
	msg = err.Error()
	if len(changed) > 0 {
		msg += "\ngpuprep's persistent VFIO files changed (backed up, in the journal) but the initramfs still holds the old ones, which early boot applies: fix the cause and run vfio unbind again (it regenerates an initramfs older than the change)"
	}
	return msg, nil
}

// unbinder takes devices off VFIO for Unbind.
type unbinder struct {
	e       effect.Effector
	w       writer
	opts    Options
	res     *Result
	entries []journal.Entry
}

// unbind takes the device a off its VFIO driver and gives it back the
// driver the journal recorded before bind, journalled before and after;
// it returns why it failed ("" done).
func (u unbinder) unbind(a string) string {
	e, w := u.e, u.w
	dev := "/sys/bus/pci/devices/" + a
	drv, ov := current(e.Root, a)
	before, known := DriverBefore(u.entries, a)
	// the intent first (durable): killed after the unbind, the journal
	// still says the device is to go back to before
	if err := journal.Append(e.Root, journal.DriverRecord{Device: a, Before: drv, After: restoreTo(before, known, u.opts.NoRestore)}.Intent("vfio unbind", u.e.Now())); err != nil {
		return fmt.Sprintf("%s: journal: %v (not unbound)", a, err)
	}
	if pci.DriverIsVFIO(drv) {
		if err := w.write(dev+"/driver/unbind", a); err != nil {
			return fmt.Sprintf("%s: unbind from %s: %v", a, drv, err)
		}
		if cur := driverOf(e, a); cur != "" {
			return fmt.Sprintf("%s: still on %s after unbind", a, cur)
		}
	}
	if ov != "" {
		if err := w.write(dev+"/driver_override", "\n"); err != nil {
			return fmt.Sprintf("%s: clear driver_override: %v", a, err)
		}
	}
	after := u.restore(a, before, known)
	if drv != after {
		u.res.Changed = append(u.res.Changed, Change{Device: a, Before: drv, After: after})
	}
	_ = journal.Append(e.Root, journal.DriverRecord{Device: a, Before: drv, After: after}.Done("vfio unbind", u.e.Now()))
	return ""
}

// restore binds the unbound device a to before, its driver before bind
// (known: the journal records it), where that is wanted and possible,
// noting why not; it returns the driver a ends on ("" none).
func (u unbinder) restore(a, before string, known bool) string {
	e, res := u.e, u.res
	switch {
	case !known:
		res.Notes = append(res.Notes, fmt.Sprintf("%s: the journal has no record of its driver before bind: left unbound (`echo %s > /sys/bus/pci/drivers_probe` lets the kernel choose)", a, a))
	case before == "":
		res.Notes = append(res.Notes, fmt.Sprintf("%s: had no driver before bind: left unbound", a))
	case driverOf(e, a) == before:
		return before // on it already (a boot gave it back): nothing to bind
	case slices.Contains(u.opts.NoRestore, before):
		res.Notes = append(res.Notes, fmt.Sprintf("%s: its driver before bind, %s, is not wanted back here: left unbound", a, before))
	case !e.Root.Exists("/sys/bus/pci/drivers/" + before):
		res.Notes = append(res.Notes, fmt.Sprintf("%s: its driver before bind, %s, is not loaded: left unbound", a, before))
	default:
		err := u.w.write("/sys/bus/pci/drivers/"+before+"/bind", a)
		if cur := driverOf(e, a); err == nil && cur == before {
			return before
		} else if err == nil {
			err = fmt.Errorf("bind reported success, the device is on %q", cur)
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%s: could not restore %s (%v): left unbound", a, before, err))
	}
	return ""
}

// Unpersist removes addrs from gpuprep's persistent VFIO configuration and
// regenerates the initramfs, leaving every live binding as it is: the next
// boot gives the devices to their own drivers. It is how devices leave VFIO
// on a board with NVSwitches, where rebinding a GPU from vfio-pci to nvidia
// while the system runs starts NVLink training that can hang for long and
// leave the GPU to no driver (facts §1).
func Unpersist(ctx context.Context, e effect.Effector, inv *pci.Inventory, addrs []string, opts Options) (*Result, error) {
	res := &Result{Groups: map[string]bool{}}
	pp, err := planPersist(e.Root, inv, nil, addrs)
	if err != nil {
		return res, err
	}
	pp.Regenerate = opts.Regenerate
	_, err = applyPersist(ctx, e, pp, "vfio unbind", opts, res)
	return res, err
}

func uniqGroups(ds []*pci.Device) []string {
	var gs []string
	for _, d := range ds {
		if d.IOMMUGroup != "" {
			gs = append(gs, d.IOMMUGroup)
		}
	}
	return uniq(gs)
}
