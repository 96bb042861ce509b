package provision

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

// RollbackOptions tune Rollback.
type RollbackOptions struct {
	// To keeps the changes up to and including the last completed step To
	// and undoes those after it; "" undoes everything.
	To         string
	Force      bool   // unbind from VFIO (remove a vGPU) even while a process (a VM) holds it open
	Kubeconfig string // for labels set through the API (default: the kubeconfig apply used)
	ForceFiles bool   // restore (remove) a file even when it no longer holds what gpuprep wrote, saving its content first
}

// Undo is one thing Rollback restored.
type Undo struct {
	Kind   string `json:"kind"` // file, dir, driver, vgpu, label, command
	Target string `json:"target"`
	Action string `json:"action"`
	// Backup is where rollback saved the content it found in a file it
	// overwrote or removed.
	Backup string `json:"backup,omitempty"`
}

// RollbackResult is what Rollback did.
type RollbackResult struct {
	Undone []Undo `json:"undone"`
	// Reboot: the next boot differs from the running system in something
	// rollback put back (its kernel arguments, a device's driver):
	// RebootReasons says what.
	Reboot        bool     `json:"rebootRequired"`
	RebootReasons []string `json:"rebootReasons,omitempty"`
	// Left are the devices rollback did not put back on their driver from
	// before gpuprep (now, or at all): the journal keeps their entries, not
	// recorded undone, so that a later rollback finishes them.
	Left   []Left    `json:"left,omitempty"`
	Notes  []string  `json:"notes,omitempty"`
	Failed []string  `json:"failed,omitempty"`
	Time   time.Time `json:"-"`
}

// Left is a device that rollback left off its driver from before gpuprep.
type Left struct {
	Kind   string `json:"kind"`   // "driver"
	Target string `json:"target"` // PCI address
	Driver string `json:"driver"` // its driver now ("" unbound)
	Want   string `json:"want"`   // its driver before gpuprep ("" none)
	Why    string `json:"why"`
	// Until is what puts it back: LeftUntilReboot (the next boot),
	// LeftUntilForce (rollback --force), LeftUntilManual (the user: Why says how).
	Until string `json:"until"`
}

// Left.Until values.
const (
	LeftUntilReboot = "reboot"
	LeftUntilForce  = "force"
	LeftUntilManual = "manual"
)

// State is Left's device state as a phrase: "unbound" or "on DRIVER".
func (l Left) State() string {
	if l.Driver == "" {
		return "unbound"
	}
	return "on " + l.Driver
}

func (res *RollbackResult) rebootFor(why string) {
	res.Reboot = true
	if !slices.Contains(res.RebootReasons, why) {
		res.RebootReasons = append(res.RebootReasons, why)
	}
}

func undoneSet(entries []journal.Entry) map[int]bool {
	m := map[int]bool{}
	for _, e := range entries {
		if u, ok := e.Undone(); e.Kind == KindUndone && ok {
			m[u.Index] = true
		}
	}
	return m
}

type resource struct {
	kind   string // file, driver, label
	key    string
	all    []int // indices of its entries in range, oldest first
	oldest int   // index of the oldest entry in range: what it was before gpuprep
	newest int
	boot   bool // a kernel-arguments file
	vfio   bool // in the initramfs: gpuprep's persistent VFIO configuration, the nouveau blacklist
}

// Rollback undoes, newest first, every change the journal records that is
// not undone yet (or only those after step opts.To): each file back to the
// content before gpuprep's first change in that range (byte-identical, from
// its backup; a file gpuprep created is removed), each device back to the
// driver it had, each label back to its value (removed when it was not
// there), then the boot menu and initramfs regenerated, and the kernel
// arguments apply changed through a bootloader's own tool (grubby,
// kernel-install, kernelstub, rpm-ostree: its bootargs-intent entries)
// changed back through that tool. What it undid is recorded ("undone"
// entries), so a second run is a no-op.
//
// It is a loop over the journal's entries, each gathered by its kind
// (undoKinds), then one over what they changed, each undone by its
// resource kind (undoers), then the commands what was undone needs
// (afterUndo).
func Rollback(ctx context.Context, e effect.Effector, o RollbackOptions) (*RollbackResult, error) {
	r := &rollbackRun{e: e, o: o, res: &RollbackResult{Undone: []Undo{}}, dirEntries: map[string][]int{}, bootArgs: &bootArgsUndo{},
		resources: map[string]*resource{}, saved: map[string]string{}, pending: map[int]bool{}}
	entries, jerr := journal.Read(e.Root)
	if jerr != nil {
		r.res.Notes = append(r.res.Notes, jerr.Error())
	}
	r.entries = entries
	undone := undoneSet(entries)
	from, err := rollbackFrom(entries, undone, o.To)
	if err != nil {
		return nil, err
	}
	for i, en := range entries {
		r.gather(i, en, i < from || undone[i])
	}
	if len(r.idx) == 0 {
		return r.res, nil
	}
	r.undoResources(ctx)
	r.undoDirs()
	r.afterUndo(ctx)
	if len(r.res.Failed) > 0 {
		return r.res, fmt.Errorf("rollback incomplete: %s", strings.Join(r.res.Failed, "; "))
	}
	return r.res, r.recordUndone()
}

// rollbackFrom is the index of the first entry a rollback --to step undoes
// (0: every one).
func rollbackFrom(entries []journal.Entry, undone map[int]bool, to string) (int, error) {
	if to == "" {
		return 0, nil
	}
	from := -1
	for i, en := range entries {
		if s := en.Step(); en.Kind == KindStep && s.ID == to && s.State == journal.StepDone && !undone[i] {
			from = i + 1
		}
	}
	if from < 0 {
		return 0, &ToError{Step: to, Done: doneSteps(entries, undone)}
	}
	return from, nil
}

// rollbackRun is one Rollback: what it gathered from the journal and what
// it did so far.
type rollbackRun struct {
	e       effect.Effector
	o       RollbackOptions
	res     *RollbackResult
	entries []journal.Entry

	idx        []int            // the entries in range, oldest first
	dirs       []string         // directories gpuprep created
	dirEntries map[string][]int // each directory's KindDir entries
	manager    bool             // the journal in range records a vGPU manager install
	bootArgs   *bootArgsUndo
	// gpuprep grub ensure/remove changed files in range, and journalled no
	// bootloader command (a gpuprep from before they were: those stay)
	grubFiles, grubIntents bool
	resources              map[string]*resource
	order                  []*resource
	step                   string // the step in progress at the entry gathered

	bootFiles, vfioFiles, units bool
	saved                       map[string]string // file → where rollback saved what it held
	pending                     map[int]bool      // entries of devices left for later: not recorded undone
	hgx                         *bool             // an NVSwitch board (nvswitchBoard), read at the first driver to restore
}

// undoKind is how Rollback gathers one kind of journal entry: the resource
// it changed (nil: none to undo by resource, or the entry is gathered some
// other way).
type undoKind func(r *rollbackRun, i int, en journal.Entry) *resource

// undoKinds registers, for each journal kind, how its entries are
// gathered for their undo; a kind not here (step, command-intent) has
// nothing of its own to undo.
var undoKinds = map[string]undoKind{
	journal.KindFile:       gatherFile,
	journal.KindFileIntent: gatherFile,
	journal.KindVGPU:       gatherVGPU,
	journal.KindVGPUIntent: gatherVGPU,
	journal.KindVGPUMode: func(r *rollbackRun, i int, en journal.Entry) *resource {
		return r.get("vgpu-mode", en.VGPUMode().GPU, i)
	},
	journal.KindVGPUManagerIntent: gatherManager,
	journal.KindVGPUManager:       gatherManager,
	journal.KindDriver:            gatherDriver,
	journal.KindDriverIntent:      gatherDriver,
	journal.KindLabel:             func(r *rollbackRun, i int, en journal.Entry) *resource { return r.get("label", en.Label().Node, i) },
	journal.KindDir:               gatherDir,
	journal.KindBootArgs:          gatherBootArgs,
}

// gather takes entry i into the rollback (unless out of range).
func (r *rollbackRun) gather(i int, en journal.Entry, out bool) {
	if en.Kind == KindStep {
		r.step = ""
		if s := en.Step(); s.State == journal.StepStarted {
			r.step = s.ID
		}
	}
	if out || en.Kind == KindUndone {
		return
	}
	if en.Kind == KindStep && en.Step().ID == StepVGPUInstall || en.Command == "vgpu install" {
		r.manager = true
	}
	r.idx = append(r.idx, i)
	g := undoKinds[en.Kind]
	if g == nil {
		return
	}
	if res := g(r, i, en); res != nil {
		res.newest = i
		res.all = append(res.all, i)
	}
}

func gatherFile(r *rollbackRun, i int, en journal.Entry) *resource {
	f := en.File()
	if f.Path == "" {
		return nil
	}
	res := r.get("file", f.Path, i)
	r.grubFiles = r.grubFiles || strings.HasPrefix(en.Command, "grub ")
	res.boot = res.boot || r.step == StepKernelArgs || strings.HasPrefix(en.Command, "grub")
	res.vfio = res.vfio || isVFIOFile(f.Path) || f.Path == vgpu.NouveauBlacklist
	return res
}

// isVFIOFile reports whether p is one of gpuprep's persistent VFIO files.
func isVFIOFile(p string) bool {
	return p == vfio.ModprobeConf || p == vfio.ModulesLoad || p == vfio.UdevRule
}

func gatherVGPU(r *rollbackRun, i int, en journal.Entry) *resource {
	t := vgpuTarget(en.VGPU())
	if t == "" {
		return nil
	}
	return r.get("vgpu", t, i)
}

func gatherManager(r *rollbackRun, i int, en journal.Entry) *resource {
	rec := en.VGPUManager().Record
	if rec == "" {
		return nil
	}
	return r.get("vgpu-manager", rec, i)
}

func gatherDriver(r *rollbackRun, i int, en journal.Entry) *resource {
	return r.get("driver", en.Driver().Device, i)
}

func gatherDir(r *rollbackRun, i int, en journal.Entry) *resource {
	d := en.Dir().Path
	r.dirs = appendNew(r.dirs, d)
	r.dirEntries[d] = append(r.dirEntries[d], i)
	return nil
}

func gatherBootArgs(r *rollbackRun, _ int, en journal.Entry) *resource {
	r.bootArgs.add(en)
	r.grubIntents = r.grubIntents || strings.HasPrefix(en.Command, "grub ")
	return nil
}

func (r *rollbackRun) get(kind, key string, i int) *resource {
	return get(r.resources, &r.order, kind, key, i)
}

// undoer undoes one resource gpuprep changed.
type undoer func(ctx context.Context, r *rollbackRun, res *resource) error

// undoers registers, for each resource kind, how it is undone.
var undoers = map[string]undoer{
	"file": undoFile,
	"vgpu": undoVGPU,
	"vgpu-mode": func(ctx context.Context, r *rollbackRun, res *resource) error {
		return resetHeteroMode(ctx, r.e, res.key, r.entries[res.oldest].VGPUMode().Mode, r.res)
	},
	"vgpu-manager": func(ctx context.Context, r *rollbackRun, res *resource) error {
		return revertUpgrade(ctx, r.e, res.key, r.res)
	},
	"driver": undoDriver,
	"label": func(ctx context.Context, r *rollbackRun, res *resource) error {
		return restoreLabels(ctx, r.entries[res.oldest], r.o.Kubeconfig, r.res)
	},
}

// undoResources undoes each resource, the one changed last first.
func (r *rollbackRun) undoResources(ctx context.Context) {
	sort.SliceStable(r.order, func(a, b int) bool { return r.order[a].newest > r.order[b].newest })
	if r.manager {
		r.res.Notes = append(r.res.Notes, "the vGPU manager stays installed: rollback restores the files gpuprep wrote and removes the vGPUs it created, but uninstalling the driver is a package operation (nvidia-installer --uninstall, or the package manager); a version change gpuprep made is undone (the previous version installed again), and the installer of each version gpuprep installed stays in "+vgpu.UpgradeDir+" for a later one")
	}
	for _, res := range r.order {
		if err := undoers[res.kind](ctx, r, res); err != nil {
			r.res.Failed = append(r.res.Failed, err.Error())
		}
	}
}

func undoFile(ctx context.Context, r *rollbackRun, res *resource) error {
	e := r.e
	u := planFileUndo(e, r.entries, res.all, r.o.ForceFiles)
	if u.action == "remove" && isUnit(u.path) {
		// a unit gpuprep created and enabled: disabled before its file goes
		argv := []string{"systemctl", "disable", path.Base(u.path)}
		if strings.HasSuffix(u.path, ".timer") { // a timer runs on until stopped
			argv = []string{"systemctl", "disable", "--now", path.Base(u.path)}
		}
		r.runNote(ctx, argv)
	}
	err := u.do(e, r.res, r.saved)
	// not only when restored by this run: an earlier rollback that
	// restored the file and then failed (or was killed) may not have
	// regenerated the boot menu or initramfs, and its reboot note
	// was not seen
	r.bootFiles = r.bootFiles || res.boot
	r.vfioFiles = r.vfioFiles || res.vfio
	r.units = r.units || isUnit(res.key)
	return err
}

func undoVGPU(_ context.Context, r *rollbackRun, res *resource) error {
	var wrote []string // the type ids gpuprep wrote to a VF
	for _, i := range res.all {
		if v := r.entries[i].VGPU().Value; v != "" {
			wrote = append(wrote, v)
		}
	}
	return removeVGPU(r.e, res.key, wrote, r.o.Force, r.res)
}

func undoDriver(_ context.Context, r *rollbackRun, res *resource) error {
	var known []string // every driver gpuprep's entries moved it from or to
	for _, i := range res.all {
		d := r.entries[i].Driver()
		known = append(known, d.Before, d.After)
	}
	if r.hgx == nil {
		b := nvswitchBoard(r.e.Root)
		r.hgx = &b
	}
	left, err := restoreDriver(r.e, res.key, r.entries[res.oldest].Driver().Before, known, *r.hgx, r.o.Force, r.res)
	if left {
		for _, i := range res.all {
			r.pending[i] = true
		}
	}
	return err
}

// undoDirs removes the directories gpuprep created, once the files in them
// are gone: the innermost first.
func (r *rollbackRun) undoDirs() {
	dirs := r.dirs
	sort.SliceStable(dirs, func(a, b int) bool { return strings.Count(dirs[a], "/") > strings.Count(dirs[b], "/") })
	for _, d := range dirs {
		left, err := removeCreatedDir(r.e, d, r.res)
		if err != nil {
			r.res.Failed = append(r.res.Failed, err.Error())
		}
		if left { // not undone: a later rollback removes it once it is empty
			for _, i := range r.dirEntries[d] {
				r.pending[i] = true
			}
		}
	}
}

// runNote runs argv; a failure is a note.
func (r *rollbackRun) runNote(ctx context.Context, argv []string) {
	r.e.Logf("run: %s", host.ShellQuote(argv))
	if out, err := r.e.Runner.Run(ctx, argv...); err != nil {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out)))
	}
}

// runUndo runs argv, recorded in Undone; a failure fails the rollback.
func (r *rollbackRun) runUndo(ctx context.Context, argv []string) {
	r.e.Logf("run: %s", host.ShellQuote(argv))
	if out, err := r.e.Runner.Run(ctx, argv...); err != nil {
		r.res.Failed = append(r.res.Failed, fmt.Sprintf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out)))
	} else {
		r.res.Undone = append(r.res.Undone, Undo{Kind: "command", Target: host.ShellQuote(argv), Action: "ran"})
	}
}

// afterUndo runs what the restored files need: systemd reloaded, the
// initramfs regenerated, the bootloader's arguments changed back and its
// menu regenerated, and says whether the next boot differs.
func (r *rollbackRun) afterUndo(ctx context.Context) {
	if r.units {
		r.runNote(ctx, []string{"systemctl", "daemon-reload"})
	}
	if r.vfioFiles {
		r.afterVFIOFiles(ctx)
	}
	// first, so that the configuration read below is the one they leave
	cmdReboot := r.bootArgs.any() && r.bootArgs.undo(ctx, r.e, r.res)
	if r.bootFiles {
		cmdReboot = r.afterBootFiles(ctx) || cmdReboot
	}
	if cmdReboot {
		r.res.rebootFor("the kernel arguments of the next boot differ from the running ones")
	}
}

// afterVFIOFiles regenerates the initramfs the VFIO configuration (or the
// nouveau blacklist) rollback restored is in.
func (r *rollbackRun) afterVFIOFiles(ctx context.Context) {
	e, res := r.e, r.res
	if c := initramfs.Command(e.Root); c != nil {
		r.runUndo(ctx, c)
	}
	// the restored configuration binds at boot devices that are not on
	// VFIO now (an at-boot unbind rolled back after its reboot): the
	// next boot differs from the running one
	var off []string
	for a := range vfio.Persisted(e.Root) {
		if e.Root.Exists("/sys/bus/pci/devices/"+a) && !pci.DriverIsVFIO(e.Root.LinkBase("/sys/bus/pci/devices/"+a+"/driver")) {
			off = append(off, a)
		}
	}
	if len(off) > 0 {
		sort.Strings(off)
		res.Notes = append(res.Notes, fmt.Sprintf("%s: gpuprep's restored VFIO configuration binds them to vfio-pci at the next boot; they are not on it now (reboot, or gpuprep vfio bind)", strings.Join(off, ", ")))
		res.rebootFor(fmt.Sprintf("gpuprep's restored VFIO configuration binds %s to vfio-pci at the next boot", strings.Join(off, ", ")))
	}
}

// afterBootFiles regenerates the boot menu from the restored bootloader
// files; it reports whether the next boot's arguments differ from the
// running ones.
func (r *rollbackRun) afterBootFiles(ctx context.Context) bool {
	e, res := r.e, r.res
	boot, err := grub.Detect(e.Root)
	switch {
	case err != nil:
		res.Failed = append(res.Failed, "kernel arguments: "+err.Error())
	case boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2 || boot.Kind == grub.KindProxmox:
		// proxmox-boot-tool: refresh copies the restored files to the ESPs
		if boot.Regenerate != nil {
			r.runUndo(ctx, boot.Regenerate)
		} else {
			res.Notes = append(res.Notes, "regenerate the boot menu yourself (no update-grub or grub-mkconfig under the root)")
		}
	case !r.bootArgs.has(boot.Kind):
		res.Notes = append(res.Notes, boot.Kind+": the files are restored; arguments applied by the bootloader's own tool (grubby, kernel-install, kernelstub, rpm-ostree) are not: remove them with gpuprep grub remove")
	case r.grubFiles && !r.grubIntents:
		res.Notes = append(res.Notes, boot.Kind+": the files are restored and apply's arguments removed through the bootloader's own tool; those an older gpuprep grub ensure/remove applied with it were not journalled and stay: remove them with gpuprep grub remove")
	}
	return rebootNeeded(e, boot)
}

// recordUndone records each entry in range undone, but those of what was
// left for later.
func (r *rollbackRun) recordUndone() error {
	now := utcNow(r.e)
	for _, i := range r.idx {
		if r.pending[i] {
			continue
		}
		en := r.entries[i]
		un := journal.UndoneOf(i, en)
		if en.Kind == journal.KindFile || en.Kind == KindFileIntent {
			un.Saved = r.saved[en.File().Path]
		}
		if err := r.e.Record(un.Entry("rollback", now)); err != nil {
			return err
		}
	}
	return nil
}

func get(m map[string]*resource, order *[]*resource, kind, key string, i int) *resource {
	k := kind + "\x00" + key
	if r, ok := m[k]; ok {
		return r
	}
	r := &resource{kind: kind, key: key, oldest: i}
	m[k] = r
	*order = append(*order, r)
	return r
}

// ToError is a --to naming a step that is not done in the journal.
type ToError struct {
	Step string
	Done []string
}

func (e *ToError) Error() string {
	if len(e.Done) == 0 {
		return fmt.Sprintf("--to %s: no step is recorded done in the journal", e.Step)
	}
	return fmt.Sprintf("--to %s: not a step recorded done in the journal (done: %s)", e.Step, strings.Join(e.Done, ", "))
}

func doneSteps(entries []journal.Entry, undone map[int]bool) []string {
	seen := map[string]bool{}
	var out []string
	for i, en := range entries {
		s := en.Step()
		if en.Kind == KindStep && s.State == journal.StepDone && !undone[i] && !seen[s.ID] {
			seen[s.ID] = true
			out = append(out, s.ID)
		}
	}
	return out
}

func appendNew(ss []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(ss, a) {
			ss = append(ss, a)
		}
	}
	return ss
}
