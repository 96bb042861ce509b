package provision

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/grub"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/initramfs"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/kube"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
)

var osRemove = os.Remove

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
		if e.Kind == KindUndone {
			if i, err := strconv.Atoi(e.Before); err == nil {
				m[i] = true
			}
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
func Rollback(ctx context.Context, e Env, o RollbackOptions) (*RollbackResult, error) {
	r := &rollbackRun{e: e, o: o, res: &RollbackResult{}, dirEntries: map[string][]int{}, bootArgs: &bootArgsUndo{},
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
	e       Env
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
	journal.KindFile:              gatherFile,
	journal.KindFileIntent:        gatherFile,
	journal.KindVGPU:              gatherVGPU,
	journal.KindVGPUIntent:        gatherVGPU,
	journal.KindVGPUMode:          func(r *rollbackRun, i int, en journal.Entry) *resource { return r.get("vgpu-mode", en.Device, i) },
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
	if en.Path == "" {
		return nil
	}
	res := r.get("file", en.Path, i)
	r.grubFiles = r.grubFiles || strings.HasPrefix(en.Command, "grub ")
	res.boot = res.boot || r.step == StepKernelArgs || strings.HasPrefix(en.Command, "grub")
	res.vfio = res.vfio || en.Path == vfio.ModprobeConf || en.Path == vfio.ModulesLoad || en.Path == vfio.UdevRule || en.Path == vgpu.NouveauBlacklist
	return res
}

func gatherVGPU(r *rollbackRun, i int, en journal.Entry) *resource {
	t := vgpuTarget(en)
	if t == "" {
		return nil
	}
	return r.get("vgpu", t, i)
}

func gatherManager(r *rollbackRun, i int, en journal.Entry) *resource {
	if en.Path == "" {
		return nil
	}
	return r.get("vgpu-manager", en.Path, i)
}

func gatherDriver(r *rollbackRun, i int, en journal.Entry) *resource {
	return r.get("driver", en.Driver().Device, i)
}

func gatherDir(r *rollbackRun, i int, en journal.Entry) *resource {
	r.dirs = appendNew(r.dirs, en.Path)
	r.dirEntries[en.Path] = append(r.dirEntries[en.Path], i)
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
		return resetHeteroMode(ctx, r.e, res.key, r.entries[res.oldest].Before, r.res)
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
		if r.entries[i].After != "" {
			wrote = append(wrote, r.entries[i].After)
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
	r.e.logf("run: %s", host.ShellQuote(argv))
	if out, err := r.e.Runner.Run(ctx, argv...); err != nil {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out)))
	}
}

// runUndo runs argv, recorded in Undone; a failure fails the rollback.
func (r *rollbackRun) runUndo(ctx context.Context, argv []string) {
	r.e.logf("run: %s", host.ShellQuote(argv))
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
	now := r.e.now()
	for _, i := range r.idx {
		if r.pending[i] {
			continue
		}
		en := r.entries[i]
		un := journal.UndoneRecord{Index: i, Kind: en.Kind, Path: en.Path, Device: en.Device}
		if en.Kind == journal.KindFile || en.Kind == KindFileIntent {
			un.Saved = r.saved[en.Path]
		}
		if err := r.e.record(un.Entry("rollback", now)); err != nil {
			return err
		}
	}
	return nil
}

// removeCreatedDir removes d, a directory gpuprep created (a journal.KindDir
// entry), when it is empty. One that is gone, or holds anything now
// (someone else's files, or a backup rollback saved there), is left as it
// is, said in a note.
// left says it is there still, holding something: a later rollback tries
// again.
func removeCreatedDir(e Env, d string, res *RollbackResult) (left bool, err error) {
	fi, err := e.Root.Lstat(d)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: %w", d, err)
	case !fi.IsDir():
		res.Notes = append(res.Notes, fmt.Sprintf("%s: gpuprep created it as a directory; not one now: left as it is", d))
		return false, nil
	}
	if names := e.Root.Names(d); len(names) > 0 {
		msg := fmt.Sprintf("%s: left (gpuprep created it; it holds %s now)", d, strings.Join(names, ", "))
		e.logf("%s", msg)
		res.Notes = append(res.Notes, msg)
		return true, nil
	}
	if err := e.Root.RemoveDir(d); err != nil {
		return false, fmt.Errorf("remove %s: %w", d, err)
	}
	e.logf("%s: removed (gpuprep created it; empty)", d)
	res.Undone = append(res.Undone, Undo{Kind: "dir", Target: d, Action: "removed (gpuprep created it; empty)"})
	return false, nil
}

// isUnit reports whether p is a systemd unit file gpuprep writes.
func isUnit(p string) bool {
	return strings.HasPrefix(p, "/etc/systemd/system/") && (strings.HasSuffix(p, ".service") || strings.HasSuffix(p, ".timer"))
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
		if en.Kind == KindStep && en.After == "done" && !undone[i] && !seen[en.Before] {
			seen[en.Before] = true
			out = append(out, en.Before)
		}
	}
	return out
}

// fileUndo is what rollback does with one file gpuprep changed.
type fileUndo struct {
	path    string
	action  string // "" nothing to do, "remove" (gpuprep created it), "restore"
	from    string // restore: the backup with the content before gpuprep
	data    []byte // its content
	save    bool   // remove: save the content found there first
	note    string // said when done
	problem string // why it is not undone (nor recorded undone)
}

// planFileUndo decides, from a file's entries in range (oldest first), what
// rollback does with it. The content before gpuprep is that of the first
// entry that says the file was new or whose backup is whole; an intent
// whose backup is torn or missing, and whose change did not happen, was
// interrupted before the file changed, so a later entry backs up the same
// content. A change that happened and whose backup is gone (or no longer
// holds what it backed up) cannot be undone: the file is left as it is. A
// file already as it was before gpuprep is left alone (an earlier rollback
// that failed further on restored it). Otherwise the file must still hold
// what gpuprep last wrote there (journal.Entry.Wrote): an edit made since
// is not undone unless force, and then saved first. Entries from before
// gpuprep recorded what it wrote cannot tell: the file is restored as
// before, its content saved, with a note.
func planFileUndo(e Env, entries []journal.Entry, idx []int, force bool) fileUndo {
	p := entries[idx[0]].Path
	u := fileUndo{path: p}
	cur, err := e.Root.ReadFile(p)
	curHash := journal.Absent
	switch {
	case err == nil:
		curHash = journal.Hash(cur)
	case !errors.Is(err, fs.ErrNotExist):
		u.problem = fmt.Sprintf("%s: %v", p, err)
		return u
	}
	o, found := findOrigin(e, entries, idx, curHash)
	if !found {
		return u // no change of it happened
	}
	if o.hash != "" && curHash == o.hash {
		return u // as it was before gpuprep
	}
	last := entries[idx[len(idx)-1]]
	known := last.Wrote != ""
	asLeft := curHash == last.Wrote || last.Kind == KindFileIntent && curHash == last.Before
	if o.missing != "" {
		u.problem = missingBackup(p, o, asLeft, known)
		return u
	}
	changed := known && !asLeft
	if changed && !force {
		if o.created {
			u.problem = fmt.Sprintf("%s: changed since gpuprep created it: not removed; remove it by hand, or pass --force-files (its content is saved first)", p)
		} else {
			u.problem = fmt.Sprintf("%s: changed since gpuprep wrote it: not restored; restore it by hand from %s, or pass --force-files (its content is saved first)", p, o.from)
		}
		return u
	}
	switch {
	case changed:
		u.note = "changed since gpuprep wrote it: undone anyway (--force-files)"
	case !known && !asLeft:
		u.note = "the journal does not record what gpuprep wrote there (an older gpuprep, or an interrupted change): undone without checking for edits made since"
	}
	if o.created {
		u.action, u.save = "remove", u.note != ""
	} else {
		u.action, u.from, u.data = "restore", o.from, o.data
	}
	return u
}

// fileOrigin is a file's content before gpuprep, as its entries in range
// and their backups say.
type fileOrigin struct {
	created bool   // gpuprep created it
	hash    string // its content's hash (journal.Absent: created)
	from    string // the backup that holds it
	data    []byte
	missing string // why the backup of a change that happened cannot give it
}

// findOrigin finds the content before gpuprep of the file of entries idx
// (oldest first), which now hashes curHash: that of the first entry that
// says the file was new or whose backup is whole; found false, no change
// of it happened.
func findOrigin(e Env, entries []journal.Entry, idx []int, curHash string) (o fileOrigin, found bool) {
	done, backedUp := fileBackups(entries, idx)
	for _, i := range idx {
		en := entries[i]
		if en.Backup == "" {
			return fileOrigin{created: true, hash: journal.Absent}, true
		}
		happened := done[en.Backup] || en.Kind == KindFileIntent && en.Wrote != "" && en.Wrote != en.Before && curHash == en.Wrote
		want := backedUp[en.Backup]
		b, err := e.Root.ReadFile(en.Backup)
		switch {
		case err == nil && (want == "" || journal.Hash(b) == want):
			return fileOrigin{data: b, from: en.Backup, hash: journal.Hash(b)}, true
		case !happened:
			continue
		case err != nil:
			o = fileOrigin{missing: fmt.Sprintf("its backup %s is missing", en.Backup), hash: want}
			if !errors.Is(err, fs.ErrNotExist) {
				o.missing = fmt.Sprintf("its backup %s cannot be read (%v)", en.Backup, err)
			}
			return o, true
		default:
			return fileOrigin{missing: fmt.Sprintf("its backup %s no longer holds the content it backed up (%s)", en.Backup, want), hash: want}, true
		}
	}
	return fileOrigin{}, false
}

// fileBackups are the backups of changes that happened ("file" entries)
// and the hash each intent announced for its backup.
func fileBackups(entries []journal.Entry, idx []int) (done map[string]bool, backedUp map[string]string) {
	done, backedUp = map[string]bool{}, map[string]string{}
	for _, i := range idx {
		en := entries[i]
		if en.Kind == journal.KindFile && en.Backup != "" {
			done[en.Backup] = true
		}
		if en.Kind == KindFileIntent && en.Backup != "" && strings.HasPrefix(en.Before, "sha256:") {
			backedUp[en.Backup] = en.Before
		}
	}
	return done, backedUp
}

// missingBackup is why file p, changed by gpuprep, cannot be restored: the
// backup o names is missing or no longer whole.
func missingBackup(p string, o fileOrigin, asLeft, known bool) string {
	state := "changed since gpuprep wrote it"
	switch {
	case asLeft:
		state = "as gpuprep left it"
	case !known:
		state = "the journal does not record what gpuprep wrote"
	}
	msg := fmt.Sprintf("%s: cannot restore it: %s; the file is left as it is (%s): put the backup back and run rollback again", p, o.missing, state)
	if o.hash != "" {
		msg += fmt.Sprintf(", or restore the file's content from before gpuprep (%s) by hand", o.hash)
	}
	return msg
}

// do carries u out. It records in saved where it saved what a file held.
func (u fileUndo) do(e Env, res *RollbackResult, saved map[string]string) error {
	p := u.path
	defer removeStaleTemps(e.Root, p)
	if u.problem != "" {
		return errors.New(u.problem)
	}
	now := e.now()
	switch u.action {
	case "remove":
		cur, err := e.Root.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		how, bak := "removed (gpuprep created it)", ""
		if u.save {
			perm := os.FileMode(0o600)
			if fi, err := e.Root.Stat(p); err == nil {
				perm = fi.Mode().Perm()
			}
			if bak, err = e.Root.WriteBackup(p, cur, perm, now); err != nil {
				return fmt.Errorf("%s: save its content before removing it: %w", p, err)
			}
			how += "; what it held is saved in " + bak
		}
		if err := e.Root.RemoveFile(p); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		u.report(e, res, saved, how, bak)
	case "restore":
		perm := os.FileMode(0o644)
		if fi, err := e.Root.Stat(u.from); err == nil {
			perm = fi.Mode().Perm()
		}
		wr, err := e.Root.WriteFileAtomic(p, u.data, perm, now)
		if err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		how := "restored from " + u.from
		if wr.Backup != "" {
			how += "; what it held is saved in " + wr.Backup
		}
		u.report(e, res, saved, how, wr.Backup)
	}
	return nil
}

func (u fileUndo) report(e Env, res *RollbackResult, saved map[string]string, how, bak string) {
	if u.note != "" {
		res.Notes = append(res.Notes, u.path+": "+u.note+" ("+how+")")
	}
	if bak != "" {
		saved[u.path] = bak
	}
	e.logf("%s: %s", u.path, how)
	res.Undone = append(res.Undone, Undo{Kind: "file", Target: u.path, Action: how, Backup: bak})
}

// restoreDriver puts addr back on driver want ("" unbound). known are the
// drivers gpuprep's journal moved it from and to: a device on none of them
// (nor unbound, which every move passes through) was moved by something
// else since (the GPU Operator's driver container binding a GPU gpuprep
// left unbound), and is left where it is unless force: an error, as for a
// file edited since, so that the journal keeps it and rollback --force can
// still move it. On an NVSwitch board (hgx) a device on VFIO is left for
// the next boot unless force; a device whose driver is not loaded (nouveau,
// which apply unloaded and rollback never loads) is left unbound. Either is
// listed in res.Left, and left reports it: its entries are not recorded
// undone, so that a later rollback (--force, or after the boot) finishes it.
// Every outcome is logged on one line saying what became of the device.
func restoreDriver(e Env, addr, want string, known []string, hgx, force bool, res *RollbackResult) (left bool, err error) {
	dev := "/sys/bus/pci/devices/" + addr
	if !e.Root.Exists(dev) {
		return false, fmt.Errorf("%s: no such device", addr)
	}
	cur := e.Root.LinkBase(dev + "/driver")
	if cur != "" && cur != want && !slices.Contains(known, cur) && !force {
		return true, movedSince(e, addr, cur, want, res)
	}
	if pci.DriverIsVFIO(cur) && !pci.DriverIsVFIO(want) && !force && hgx {
		leaveForBoot(e, addr, cur, want, res)
		return true, nil
	}
	ov, wantOv := overrides(e, dev, want)
	if cur == want && (ov == wantOv || want != "" && ov == "") {
		return false, nil
	}
	if cur != "" && cur != want {
		if err := unbindFrom(e, dev, addr, cur, force); err != nil {
			return false, err
		}
	}
	if ov != wantOv {
		v := wantOv
		if v == "" {
			v = "\n"
		}
		if err := writeAttr(e, dev+"/driver_override", v); err != nil {
			return false, fmt.Errorf("%s: driver_override: %w", addr, err)
		}
	}
	return bindBack(e, dev, addr, cur, want, res)
}

// movedSince: addr is on cur, a driver gpuprep never moved it to; left
// there (until rollback --force), said in the error.
func movedSince(e Env, addr, cur, want string, res *RollbackResult) error {
	why := fmt.Sprintf("on %s now, a driver gpuprep never moved it to: something moved it since", cur)
	hint := "rollback --force puts it back on " + orNone(want)
	if want != "" && !e.Root.Exists("/sys/bus/pci/drivers/"+want) {
		hint = fmt.Sprintf("rollback --force takes it off %s; %s is not loaded", cur, want)
	}
	msg := fmt.Sprintf("%s: left on %s, not put back on %s: %s (%s)", addr, cur, orNone(want), why, hint)
	e.logf("%s", msg)
	res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Driver: cur, Want: want, Why: why, Until: LeftUntilForce})
	return errors.New(msg)
}

// leaveForBoot leaves addr, on VFIO on a board with NVSwitches, for the
// next boot.
func leaveForBoot(e Env, addr, cur, want string, res *RollbackResult) {
	// not live on a board with NVSwitches (as apply and vfio unbind):
	// the files restored above leave it to its driver at the next boot
	why := "on a board with NVSwitches, moving a GPU off vfio-pci while the system runs starts NVLink training that can hang it"
	e.logf("%s: left on %s until the next boot, which gives it back to %s: %s (rollback --force moves it now)", addr, cur, orNone(want), why)
	res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Driver: cur, Want: want, Why: why, Until: LeftUntilReboot})
	res.rebootFor("the devices left on vfio-pci go back to their driver at the next boot")
}

// overrides are addr's driver_override now and the one want needs.
func overrides(e Env, dev, want string) (ov, wantOv string) {
	ov, _ = e.Root.ReadString(dev + "/driver_override")
	if ov == "(null)" {
		ov = ""
	}
	if pci.DriverIsVFIO(want) {
		wantOv = want
	}
	return ov, wantOv
}

// unbindFrom takes addr off cur; not off VFIO while its IOMMU group is
// held open (a VM), unless force.
func unbindFrom(e Env, dev, addr, cur string, force bool) error {
	if pci.DriverIsVFIO(cur) && !force {
		if g := e.Root.LinkBase(dev + "/iommu_group"); g != "" {
			if hs := vfio.Holders(e.Root, vfio.GroupNode(g)); len(hs) > 0 {
				var names []string
				for _, h := range hs {
					names = append(names, fmt.Sprintf("%s (pid %d)", h.Comm, h.PID))
				}
				return fmt.Errorf("%s: IOMMU group %s is in use (a VM?): /dev/vfio/%s is held open by %s; stop it or pass --force", addr, g, g, strings.Join(names, ", "))
			}
		}
	}
	if err := writeAttr(e, dev+"/driver/unbind", addr); err != nil {
		return fmt.Errorf("%s: unbind from %s: %w", addr, cur, err)
	}
	return nil
}

// bindBack binds addr, off cur, to want; left: want is not loaded, and
// addr stays unbound.
func bindBack(e Env, dev, addr, cur, want string, res *RollbackResult) (left bool, err error) {
	w := func(p, v string) error { return writeAttr(e, p, v) }
	action := "left unbound (it had no driver)"
	if want != "" && e.Root.LinkBase(dev+"/driver") != want {
		if !e.Root.Exists("/sys/bus/pci/drivers/" + want) {
			why, until := driverNotLoaded(e.Root, want)
			if cur != "" {
				e.logf("%s: %s -> none: left unbound, not put back on %s: %s", addr, cur, want, why)
				res.Undone = append(res.Undone, Undo{Kind: "driver", Target: addr, Action: "left unbound (" + want + " not loaded)"})
			} else {
				e.logf("%s: left unbound, not put back on %s: %s", addr, want, why)
			}
			res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Want: want, Why: why, Until: until})
			if until == LeftUntilReboot {
				res.rebootFor(fmt.Sprintf("the next boot loads %s for the devices left unbound (or: modprobe %s)", want, want))
			}
			return true, nil
		}
		if err := w("/sys/bus/pci/drivers/"+want+"/bind", addr); err != nil {
			return false, fmt.Errorf("%s: bind to %s: %w", addr, want, err)
		}
		if d := e.Root.LinkBase(dev + "/driver"); d != want {
			return false, fmt.Errorf("%s: on %q, not %s, after the bind", addr, d, want)
		}
		action = "back on " + want
	} else if want != "" {
		action = "back on " + want
	}
	e.logf("%s: %s -> %s", addr, orNone(cur), orNone(want))
	res.Undone = append(res.Undone, Undo{Kind: "driver", Target: addr, Action: action})
	return false, nil
}

// driverNotLoaded says why a device is left off drv, a driver that is not
// loaded, and what puts it back: the next boot, which loads it, unless a
// modprobe.d file other than gpuprep's (which rollback removes) blacklists
// it.
func driverNotLoaded(root *host.Root, drv string) (why, until string) {
	why = fmt.Sprintf("%s, its driver before gpuprep, is not loaded", drv)
	if drv == "nouveau" {
		why += " (apply unloaded it; rollback does not load it)"
		if !vgpu.PlanNouveauBlacklist(root, vgpu.NouveauBlacklist, vfio.ModprobeConf).Write {
			return why + "; modprobe.d blacklists it, not gpuprep: load it yourself (modprobe nouveau)", LeftUntilManual
		}
	}
	return why + "; the next boot loads it (or: modprobe " + drv + ")", LeftUntilReboot
}

// nvswitchBoard reports whether the host has NVIDIA NVSwitches: an HGX
// board, where GPUs do not leave vfio-pci live.
func nvswitchBoard(root *host.Root) bool {
	inv, err := pci.Discover(root)
	return err == nil && len(pci.NVSwitches(inv)) > 0
}

// writeAttr is one sysfs write with a time limit (a bind can hang in a probe).
func writeAttr(e Env, p, v string) error {
	done := make(chan error, 1)
	go func() { done <- e.Sysfs.WriteAttr(p, v) }()
	t := time.NewTimer(vfio.DefaultTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("write %q to %s: no answer after %s", strings.TrimSpace(v), p, vfio.DefaultTimeout)
	}
}

func restoreLabels(ctx context.Context, first journal.Entry, kubeconfig string, res *RollbackResult) error {
	if kubeconfig == "" {
		kubeconfig = first.Path
	}
	was, err := kube.ParseLabels(first.Before)
	if err != nil {
		return fmt.Errorf("label %s: journal: %w", first.Device, err)
	}
	had := map[string]bool{}
	for _, l := range was {
		had[l.Key] = true
	}
	var remove []string
	for _, k := range strings.Split(first.After, ",") {
		if k != "" && !had[k] {
			remove = append(remove, k)
		}
	}
	client, err := kube.NewClient(kubeconfig)
	if err != nil {
		return fmt.Errorf("label %s: %w", first.Device, err)
	}
	r, err := client.LabelNode(ctx, first.Device, was, remove, false)
	if err != nil {
		return fmt.Errorf("label %s: %w", first.Device, err)
	}
	if r.Changed {
		res.Undone = append(res.Undone, Undo{Kind: "label", Target: "Node " + first.Device, Action: fmt.Sprintf("restored %s, removed %s", kube.FormatLabels(was), strings.Join(remove, ","))})
	}
	return nil
}

// rebootNeeded: the configured IOMMU arguments differ from the running ones.
func rebootNeeded(e Env, boot *grub.Boot) bool {
	if boot == nil {
		return true
	}
	want, err := wanted(e.Root)
	if err != nil {
		return true
	}
	kver, _ := e.Root.ReadString("/proc/sys/kernel/osrelease")
	conf, _, err := boot.ConfiguredArgs(strings.TrimSpace(kver))
	if err != nil {
		return true
	}
	running := runningArgs(e.Root)
	for _, w := range want {
		if kargs.Satisfied(conf, w) != kargs.Satisfied(running, w) {
			return true
		}
	}
	// an argument that turns the IOMMU or interrupt remapping off, put back
	// (or taken out) by the rollback, changes the next boot too
	for _, k := range []string{"intel_iommu", "amd_iommu", "iommu", "intremap", "nointremap"} {
		c, cok := kargs.Last(conf, k)
		r, rok := kargs.Last(running, k)
		if cok != rok || cok && c.String() != r.String() {
			return true
		}
	}
	return false
}

// bootArgsUndo is what the journal's bootargs-intent entries in range say
// apply's bootloader commands changed, per bootloader kind, in order.
type bootArgsUndo struct {
	kinds []string
	by    map[string]*kindArgs
}

type kindArgs struct {
	remove, readd []string          // undone over every entry (the tool's own way)
	keepAdded     map[string]string // argument → entries it was already in: not removed
	keepRemoved   map[string]string // argument → entries that never had it: not put back
	order         []string          // kept arguments, in order
}

func (b *bootArgsUndo) add(en journal.Entry) {
	if b.by == nil {
		b.by = map[string]*kindArgs{}
	}
	k := b.by[en.Device]
	if k == nil {
		k = &kindArgs{keepAdded: map[string]string{}, keepRemoved: map[string]string{}}
		b.by[en.Device] = k
		b.kinds = append(b.kinds, en.Device)
	}
	switch {
	case en.After != "" && en.Path != "":
		if _, ok := k.keepAdded[en.After]; !ok {
			k.order = append(k.order, "+"+en.After)
		}
		k.keepAdded[en.After] = en.Path
	case en.After != "":
		k.remove = appendNew(k.remove, en.After)
	case en.Before != "" && en.Path != "":
		if _, ok := k.keepRemoved[en.Before]; !ok {
			k.order = append(k.order, "-"+en.Before)
		}
		k.keepRemoved[en.Before] = en.Path
	case en.Before != "":
		k.readd = appendNew(k.readd, en.Before)
	}
}

func (b *bootArgsUndo) any() bool            { return len(b.kinds) > 0 }
func (b *bootArgsUndo) has(kind string) bool { return b.by[kind] != nil }

func appendNew(ss []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(ss, a) {
			ss = append(ss, a)
		}
	}
	return ss
}

// undo runs, through each bootloader's own tool, the inverse of what apply's
// commands changed: the arguments they added removed, those they removed put
// back (in that order, as separate commands, so no tool's ordering of one
// command's options matters). systemd-boot's entries are made from
// /etc/kernel/cmdline, which the file rollback restored: kernel-install add
// makes them again for every installed kernel. It reports whether the next
// boot's arguments now differ from the running kernel's (a reboot is needed).
func (b *bootArgsUndo) undo(ctx context.Context, e Env, res *RollbackResult) bool {
	running := runningArgs(e.Root)
	reboot := false
	for _, kind := range b.kinds {
		k := b.by[kind]
		mk := undoCommands[kind]
		if mk == nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: the journal records kernel arguments changed through its own tool, which gpuprep cannot undo: check them with gpuprep grub show", kind))
			continue
		}
		cmds, ok := mk(e, k, res)
		if !ok {
			continue
		}
		if runBootUndo(ctx, e, cmds, res) {
			// a reboot is needed when the next boot (as the commands, and
			// the arguments left alone, make it) differs from the running
			// kernel in an argument apply touched; the configuration as
			// read now says so too, once the tool has run
			reboot = k.changedReboot(e, kind, running) || reboot
		}
		reboot = k.keptReboot(running) || reboot
		res.Notes = append(res.Notes, k.keptNotes(kind)...)
	}
	return reboot
}

// bootCmd is one command of a bootloader's tool rollback runs, and why.
type bootCmd struct {
	argv []string
	why  string
}

// undoCommands are, for each bootloader kind whose own tool changes the
// kernel arguments, the commands that undo what apply's did; ok false: the
// kind's undo failed or cannot run (said in res).
var undoCommands = map[string]func(e Env, k *kindArgs, res *RollbackResult) (cmds []bootCmd, ok bool){
	grub.KindBLS: func(_ Env, k *kindArgs, _ *RollbackResult) ([]bootCmd, bool) {
		return k.removeReadd(func(a []string) []string {
			return []string{"grubby", "--update-kernel=ALL", "--remove-args=" + strings.Join(a, " ")}
		}, func(a []string) []string {
			return []string{"grubby", "--update-kernel=ALL", "--args=" + strings.Join(a, " ")}
		}), true
	},
	grub.KindKernelstub: func(_ Env, k *kindArgs, _ *RollbackResult) ([]bootCmd, bool) {
		return k.removeReadd(func(a []string) []string { return []string{"kernelstub", "--delete-options", strings.Join(a, " ")} },
			func(a []string) []string { return []string{"kernelstub", "--add-options", strings.Join(a, " ")} }), true
	},
	// -if-present / -if-missing: a second run (after a failure further
	// on) finds them done and changes nothing
	grub.KindRpmOstree: func(_ Env, k *kindArgs, _ *RollbackResult) ([]bootCmd, bool) {
		return k.removeReadd(func(a []string) []string { return prefixed([]string{"rpm-ostree", "kargs"}, "--delete-if-present=", a) },
			func(a []string) []string { return prefixed([]string{"rpm-ostree", "kargs"}, "--append-if-missing=", a) }), true
	},
	grub.KindSystemdBoot: systemdBootUndo,
}

func prefixed(argv []string, prefix string, args []string) []string {
	for _, a := range args {
		argv = append(argv, prefix+a)
	}
	return argv
}

// removeReadd are the commands that remove the arguments apply added and
// put back those it removed, in that order, as separate commands (so no
// tool's ordering of one command's options matters).
func (k *kindArgs) removeReadd(remove, readd func([]string) []string) []bootCmd {
	var cmds []bootCmd
	if len(k.remove) > 0 {
		cmds = append(cmds, bootCmd{remove(k.remove), "removes " + strings.Join(k.remove, " ") + " (apply added them)"})
	}
	if len(k.readd) > 0 {
		cmds = append(cmds, bootCmd{readd(k.readd), "puts back " + strings.Join(k.readd, " ") + " (apply removed them)"})
	}
	return cmds
}

// systemdBootUndo: systemd-boot's entries are made from
// /etc/kernel/cmdline, which the file rollback restored: kernel-install
// add makes them again for every installed kernel.
func systemdBootUndo(e Env, _ *kindArgs, res *RollbackResult) ([]bootCmd, bool) {
	boot, err := grub.Detect(e.Root)
	switch {
	case err != nil:
		res.Failed = append(res.Failed, "systemd-boot: cannot regenerate the boot entries from the restored "+kernelCmdline+": "+err.Error())
		return nil, false
	case boot.Kind != grub.KindSystemdBoot:
		res.Failed = append(res.Failed, fmt.Sprintf("systemd-boot: apply changed the arguments through kernel-install, but this root now looks like %s: regenerate the entries from %s yourself (kernel-install add KVER /lib/modules/KVER/vmlinuz for each kernel)", boot.Kind, kernelCmdline))
		return nil, false
	case len(boot.Kernels) == 0:
		res.Notes = append(res.Notes, "systemd-boot: no kernel image under /lib/modules/*/vmlinuz: run kernel-install add for each installed kernel yourself, so that its entry takes the restored "+kernelCmdline)
	}
	var cmds []bootCmd
	for _, kv := range boot.Kernels {
		// as grub.Boot.PlanEdit runs it: the entry is made again from the restored file
		cmds = append(cmds, bootCmd{[]string{"kernel-install", "add", kv, "/lib/modules/" + kv + "/vmlinuz"}, "makes the entry of " + kv + " again from the restored " + kernelCmdline})
	}
	return cmds, true
}

// runBootUndo runs cmds in order until one fails; ok: all ran.
func runBootUndo(ctx context.Context, e Env, cmds []bootCmd, res *RollbackResult) bool {
	for _, c := range cmds {
		e.logf("run: %s", host.ShellQuote(c.argv))
		if out, err := e.Runner.Run(ctx, c.argv...); err != nil {
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %v%s", host.ShellQuote(c.argv), err, host.OutputTail(out)))
			return false
		}
		res.Undone = append(res.Undone, Undo{Kind: "command", Target: host.ShellQuote(c.argv), Action: "ran: " + c.why})
	}
	return true
}

// changedReboot: the arguments rollback changed back differ from the
// running kernel's, or the configuration of kind, read now, does.
func (k *kindArgs) changedReboot(e Env, kind string, running []kargs.Param) bool {
	reboot := false
	for _, a := range k.remove {
		reboot = reboot || kargs.Satisfied(running, kargs.ParseOne(a))
	}
	for _, d := range k.readd {
		reboot = reboot || !kargs.Satisfied(running, kargs.ParseOne(d))
	}
	if boot, err := grub.Detect(e.Root); err == nil && boot.Kind == kind {
		reboot = reboot || rebootNeeded(e, boot)
	}
	return reboot
}

// keptReboot: an argument rollback left as apply made it differs from the
// running kernel's.
func (k *kindArgs) keptReboot(running []kargs.Param) bool {
	reboot := false
	for a := range k.keepAdded {
		reboot = reboot || !kargs.Satisfied(running, kargs.ParseOne(a))
	}
	for d := range k.keepRemoved {
		reboot = reboot || kargs.Satisfied(running, kargs.ParseOne(d))
	}
	return reboot
}

// keptNotes say, for each argument left as apply made it, why and how to
// undo it by hand.
func (k *kindArgs) keptNotes(kind string) []string {
	var notes []string
	for _, o := range k.order {
		arg := o[1:]
		if o[0] == '+' {
			notes = append(notes, fmt.Sprintf("%s: %s not removed: %s already had %s before apply, and removing it the way apply added it (%s) would take it from there too: remove it yourself where it should not be (%s)",
				kind, arg, k.keepAdded[arg], kargs.ParseOne(arg).Key, toolName(kind), removeHint(kind, arg)))
		} else {
			notes = append(notes, fmt.Sprintf("%s: %s not put back: %s did not have it before apply, and putting it back the way apply removed it (%s) would add it there: put it back yourself where it was (%s)",
				kind, arg, k.keepRemoved[arg], toolName(kind), addHint(kind, arg)))
		}
	}
	return notes
}

const kernelCmdline = "/etc/kernel/cmdline"

func toolName(kind string) string {
	if kind == grub.KindRpmOstree {
		return "rpm-ostree kargs"
	}
	return "grubby --update-kernel=ALL"
}

func removeHint(kind, arg string) string {
	if kind == grub.KindRpmOstree {
		return "rpm-ostree kargs --delete-if-present=" + arg
	}
	return "grubby --update-kernel=/boot/vmlinuz-VERSION --remove-args=" + host.ShellQuote([]string{arg})
}

func addHint(kind, arg string) string {
	if kind == grub.KindRpmOstree {
		return "rpm-ostree kargs --append-if-missing=" + arg
	}
	return "grubby --update-kernel=/boot/vmlinuz-VERSION --args=" + host.ShellQuote([]string{arg})
}
