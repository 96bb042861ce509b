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
func Rollback(ctx context.Context, e Env, o RollbackOptions) (*RollbackResult, error) {
	res := &RollbackResult{Undone: []Undo{}}
	entries, jerr := journal.Read(e.Root)
	if jerr != nil {
		res.Notes = append(res.Notes, jerr.Error())
	}
	undone := undoneSet(entries)
	from := 0
	if o.To != "" {
		from = -1
		for i, en := range entries {
			if en.Kind == KindStep && en.Before == o.To && en.After == "done" && !undone[i] {
				from = i + 1
			}
		}
		if from < 0 {
			return nil, &ToError{Step: o.To, Done: doneSteps(entries, undone)}
		}
	}
	var idx []int
	var dirs []string                // directories gpuprep created
	dirEntries := map[string][]int{} // each directory's KindDir entries
	manager := false                 // the journal in range records a vGPU manager install
	bootArgs := &bootArgsUndo{}
	// gpuprep grub ensure/remove changed files in range, and journalled no
	// bootloader command (a gpuprep from before they were: those stay)
	grubFiles, grubIntents := false, false
	res_ := map[string]*resource{}
	var order []*resource
	step := ""
	for i, en := range entries {
		if en.Kind == KindStep {
			if en.After == "started" {
				step = en.Before
			} else {
				step = ""
			}
		}
		if i < from || undone[i] || en.Kind == KindUndone {
			continue
		}
		if en.Kind == KindStep && en.Before == StepVGPUInstall || en.Command == "vgpu install" {
			manager = true
		}
		idx = append(idx, i)
		var r *resource
		switch en.Kind {
		case "file", KindFileIntent:
			if en.Path == "" {
				continue
			}
			r = get(res_, &order, "file", en.Path, i)
			grubFiles = grubFiles || strings.HasPrefix(en.Command, "grub ")
			r.boot = r.boot || step == StepKernelArgs || strings.HasPrefix(en.Command, "grub")
			r.vfio = r.vfio || en.Path == vfio.ModprobeConf || en.Path == vfio.ModulesLoad || en.Path == vfio.UdevRule || en.Path == vgpu.NouveauBlacklist
		case KindVGPU, KindVGPUIntent:
			t := vgpuTarget(en)
			if t == "" {
				continue
			}
			r = get(res_, &order, "vgpu", t, i)
		case vgpu.KindMode:
			r = get(res_, &order, "vgpu-mode", en.Device, i)
		case vgpu.KindUpgradeIntent, vgpu.KindUpgrade:
			if en.Path == "" {
				continue
			}
			r = get(res_, &order, "vgpu-manager", en.Path, i)
		case "driver", KindDriverIntent:
			r = get(res_, &order, "driver", en.Device, i)
		case KindLabel:
			r = get(res_, &order, "label", en.Device, i)
		case journal.KindDir:
			dirs = appendNew(dirs, en.Path)
			dirEntries[en.Path] = append(dirEntries[en.Path], i)
			continue
		case KindBootArgs:
			bootArgs.add(en)
			grubIntents = grubIntents || strings.HasPrefix(en.Command, "grub ")
			continue
		default:
			continue
		}
		r.newest = i
		r.all = append(r.all, i)
	}
	if len(idx) == 0 {
		return res, nil
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].newest > order[b].newest })
	if manager {
		res.Notes = append(res.Notes, "the vGPU manager stays installed: rollback restores the files gpuprep wrote and removes the vGPUs it created, but uninstalling the driver is a package operation (nvidia-installer --uninstall, or the package manager); a version change gpuprep made is undone (the previous version installed again), and the installer of each version gpuprep installed stays in "+vgpu.UpgradeDir+" for a later one")
	}
	bootFiles, vfioFiles, units := false, false, false
	saved := map[string]string{} // file → where rollback saved what it held
	pending := map[int]bool{}    // entries of devices left for later: not recorded undone
	var hgx *bool                // an NVSwitch board (nvswitchBoard), read at the first driver to restore
	for _, r := range order {
		first := entries[r.oldest]
		var err error
		switch r.kind {
		case "file":
			u := planFileUndo(e, entries, r.all, o.ForceFiles)
			if u.action == "remove" && isUnit(u.path) {
				// a unit gpuprep created and enabled: disabled before its file goes
				argv := []string{"systemctl", "disable", path.Base(u.path)}
				if strings.HasSuffix(u.path, ".timer") { // a timer runs on until stopped
					argv = []string{"systemctl", "disable", "--now", path.Base(u.path)}
				}
				e.logf("run: %s", host.ShellQuote(argv))
				if out, err := e.Runner.Run(ctx, argv...); err != nil {
					res.Notes = append(res.Notes, fmt.Sprintf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out)))
				}
			}
			err = u.do(e, res, saved)
			// not only when restored by this run: an earlier rollback that
			// restored the file and then failed (or was killed) may not have
			// regenerated the boot menu or initramfs, and its reboot note
			// was not seen
			bootFiles = bootFiles || r.boot
			vfioFiles = vfioFiles || r.vfio
			units = units || isUnit(r.key)
		case "vgpu":
			var wrote []string // the type ids gpuprep wrote to a VF
			for _, i := range r.all {
				if entries[i].After != "" {
					wrote = append(wrote, entries[i].After)
				}
			}
			err = removeVGPU(e, r.key, wrote, o.Force, res)
		case "vgpu-mode":
			// newest first: the vGPUs made after the mode are gone
			err = resetHeteroMode(ctx, e, r.key, first.Before, res)
		case "vgpu-manager":
			err = revertUpgrade(ctx, e, r.key, res)
		case "driver":
			var known []string // every driver gpuprep's entries moved it from or to
			for _, i := range r.all {
				known = append(known, entries[i].Before, entries[i].After)
			}
			if hgx == nil {
				b := nvswitchBoard(e.Root)
				hgx = &b
			}
			var left bool
			left, err = restoreDriver(e, r.key, first.Before, known, *hgx, o.Force, res)
			if left {
				for _, i := range r.all {
					pending[i] = true
				}
			}
		case "label":
			err = restoreLabels(ctx, first, o.Kubeconfig, res)
		}
		if err != nil {
			res.Failed = append(res.Failed, err.Error())
		}
	}
	// the directories gpuprep created, once the files in them are gone:
	// the innermost first
	sort.SliceStable(dirs, func(a, b int) bool { return strings.Count(dirs[a], "/") > strings.Count(dirs[b], "/") })
	for _, d := range dirs {
		left, err := removeCreatedDir(e, d, res)
		if err != nil {
			res.Failed = append(res.Failed, err.Error())
		}
		if left { // not undone: a later rollback removes it once it is empty
			for _, i := range dirEntries[d] {
				pending[i] = true
			}
		}
	}
	if units {
		argv := []string{"systemctl", "daemon-reload"}
		e.logf("run: %s", host.ShellQuote(argv))
		if out, err := e.Runner.Run(ctx, argv...); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out)))
		}
	}
	if vfioFiles {
		if c := initramfs.Command(e.Root); c != nil {
			e.logf("run: %s", host.ShellQuote(c))
			if out, err := e.Runner.Run(ctx, c...); err != nil {
				res.Failed = append(res.Failed, fmt.Sprintf("%s: %v%s", host.ShellQuote(c), err, host.OutputTail(out)))
			} else {
				res.Undone = append(res.Undone, Undo{Kind: "command", Target: host.ShellQuote(c), Action: "ran"})
			}
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
	// first, so that the configuration read below is the one they leave
	cmdReboot := bootArgs.any() && bootArgs.undo(ctx, e, res)
	if bootFiles {
		boot, err := grub.Detect(e.Root)
		switch {
		case err != nil:
			res.Failed = append(res.Failed, "kernel arguments: "+err.Error())
		case boot.Kind == grub.KindGRUB || boot.Kind == grub.KindGRUB2 || boot.Kind == grub.KindProxmox:
			// proxmox-boot-tool: refresh copies the restored files to the ESPs
			if boot.Regenerate != nil {
				e.logf("run: %s", host.ShellQuote(boot.Regenerate))
				if out, err := e.Runner.Run(ctx, boot.Regenerate...); err != nil {
					res.Failed = append(res.Failed, fmt.Sprintf("%s: %v%s", host.ShellQuote(boot.Regenerate), err, host.OutputTail(out)))
				} else {
					res.Undone = append(res.Undone, Undo{Kind: "command", Target: host.ShellQuote(boot.Regenerate), Action: "ran"})
				}
			} else {
				res.Notes = append(res.Notes, "regenerate the boot menu yourself (no update-grub or grub-mkconfig under the root)")
			}
		case !bootArgs.has(boot.Kind):
			res.Notes = append(res.Notes, boot.Kind+": the files are restored; arguments applied by the bootloader's own tool (grubby, kernel-install, kernelstub, rpm-ostree) are not: remove them with gpuprep grub remove")
		case grubFiles && !grubIntents:
			res.Notes = append(res.Notes, boot.Kind+": the files are restored and apply's arguments removed through the bootloader's own tool; those an older gpuprep grub ensure/remove applied with it were not journalled and stay: remove them with gpuprep grub remove")
		}
		cmdReboot = cmdReboot || rebootNeeded(e, boot)
	}
	if cmdReboot {
		res.rebootFor("the kernel arguments of the next boot differ from the running ones")
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("rollback incomplete: %s", strings.Join(res.Failed, "; "))
	}
	now := e.now()
	for _, i := range idx {
		if pending[i] {
			continue
		}
		en := entries[i]
		un := journal.Entry{Time: now, Command: "rollback", Kind: KindUndone, Before: strconv.Itoa(i), Path: en.Path, Device: en.Device, After: en.Kind}
		if en.Kind == "file" || en.Kind == KindFileIntent {
			un.Backup = saved[en.Path]
		}
		if err := e.record(un); err != nil {
			return res, err
		}
	}
	return res, nil
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
	done := map[string]bool{} // backups of changes that happened ("file" entries)
	backedUp := map[string]string{}
	for _, i := range idx {
		en := entries[i]
		if en.Kind == "file" && en.Backup != "" {
			done[en.Backup] = true
		}
		if en.Kind == KindFileIntent && en.Backup != "" && strings.HasPrefix(en.Before, "sha256:") {
			backedUp[en.Backup] = en.Before
		}
	}
	found, created := false, false
	origHash, missing, from := "", "", ""
	var orig []byte
	for _, i := range idx {
		en := entries[i]
		if en.Backup == "" {
			found, created, origHash = true, true, journal.Absent
			break
		}
		happened := done[en.Backup] || en.Kind == KindFileIntent && en.Wrote != "" && en.Wrote != en.Before && curHash == en.Wrote
		want := backedUp[en.Backup]
		b, err := e.Root.ReadFile(en.Backup)
		switch {
		case err == nil && (want == "" || journal.Hash(b) == want):
			orig, from, origHash = b, en.Backup, journal.Hash(b)
		case !happened:
			continue
		case err != nil:
			missing, origHash = fmt.Sprintf("its backup %s is missing", en.Backup), want
			if !errors.Is(err, fs.ErrNotExist) {
				missing = fmt.Sprintf("its backup %s cannot be read (%v)", en.Backup, err)
			}
		default:
			missing, origHash = fmt.Sprintf("its backup %s no longer holds the content it backed up (%s)", en.Backup, want), want
		}
		found = true
		break
	}
	if !found {
		return u // no change of it happened
	}
	if origHash != "" && curHash == origHash {
		return u // as it was before gpuprep
	}
	last := entries[idx[len(idx)-1]]
	known := last.Wrote != ""
	asLeft := curHash == last.Wrote || last.Kind == KindFileIntent && curHash == last.Before
	if missing != "" {
		state := "changed since gpuprep wrote it"
		switch {
		case asLeft:
			state = "as gpuprep left it"
		case !known:
			state = "the journal does not record what gpuprep wrote"
		}
		u.problem = fmt.Sprintf("%s: cannot restore it: %s; the file is left as it is (%s): put the backup back and run rollback again", p, missing, state)
		if origHash != "" {
			u.problem += fmt.Sprintf(", or restore the file's content from before gpuprep (%s) by hand", origHash)
		}
		return u
	}
	changed := known && !asLeft
	if changed && !force {
		if created {
			u.problem = fmt.Sprintf("%s: changed since gpuprep created it: not removed; remove it by hand, or pass --force-files (its content is saved first)", p)
		} else {
			u.problem = fmt.Sprintf("%s: changed since gpuprep wrote it: not restored; restore it by hand from %s, or pass --force-files (its content is saved first)", p, from)
		}
		return u
	}
	switch {
	case changed:
		u.note = "changed since gpuprep wrote it: undone anyway (--force-files)"
	case !known && !asLeft:
		u.note = "the journal does not record what gpuprep wrote there (an older gpuprep, or an interrupted change): undone without checking for edits made since"
	}
	if created {
		u.action, u.save = "remove", u.note != ""
	} else {
		u.action, u.from, u.data = "restore", from, orig
	}
	return u
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
		why := fmt.Sprintf("on %s now, a driver gpuprep never moved it to: something moved it since", cur)
		hint := "rollback --force puts it back on " + orNone(want)
		if want != "" && !e.Root.Exists("/sys/bus/pci/drivers/"+want) {
			hint = fmt.Sprintf("rollback --force takes it off %s; %s is not loaded", cur, want)
		}
		msg := fmt.Sprintf("%s: left on %s, not put back on %s: %s (%s)", addr, cur, orNone(want), why, hint)
		e.logf("%s", msg)
		res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Driver: cur, Want: want, Why: why, Until: LeftUntilForce})
		return true, errors.New(msg)
	}
	if pci.DriverIsVFIO(cur) && !pci.DriverIsVFIO(want) && !force && hgx {
		// not live on a board with NVSwitches (as apply and vfio unbind):
		// the files restored above leave it to its driver at the next boot
		why := "on a board with NVSwitches, moving a GPU off vfio-pci while the system runs starts NVLink training that can hang it"
		e.logf("%s: left on %s until the next boot, which gives it back to %s: %s (rollback --force moves it now)", addr, cur, orNone(want), why)
		res.Left = append(res.Left, Left{Kind: "driver", Target: addr, Driver: cur, Want: want, Why: why, Until: LeftUntilReboot})
		res.rebootFor("the devices left on vfio-pci go back to their driver at the next boot")
		return true, nil
	}
	ov, _ := e.Root.ReadString(dev + "/driver_override")
	if ov == "(null)" {
		ov = ""
	}
	wantOv := ""
	if pci.DriverIsVFIO(want) {
		wantOv = want
	}
	if cur == want && (ov == wantOv || want != "" && ov == "") {
		return false, nil
	}
	w := func(p, v string) error { return writeAttr(e, p, v) }
	if cur != "" && cur != want {
		if pci.DriverIsVFIO(cur) && !force {
			if g := e.Root.LinkBase(dev + "/iommu_group"); g != "" {
				if hs := vfio.Holders(e.Root, vfio.GroupNode(g)); len(hs) > 0 {
					var names []string
					for _, h := range hs {
						names = append(names, fmt.Sprintf("%s (pid %d)", h.Comm, h.PID))
					}
					return false, fmt.Errorf("%s: IOMMU group %s is in use (a VM?): /dev/vfio/%s is held open by %s; stop it or pass --force", addr, g, g, strings.Join(names, ", "))
				}
			}
		}
		if err := w(dev+"/driver/unbind", addr); err != nil {
			return false, fmt.Errorf("%s: unbind from %s: %w", addr, cur, err)
		}
	}
	if ov != wantOv {
		v := wantOv
		if v == "" {
			v = "\n"
		}
		if err := w(dev+"/driver_override", v); err != nil {
			return false, fmt.Errorf("%s: driver_override: %w", addr, err)
		}
	}
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
		var cmds [][]string
		var why []string
		join := strings.Join
		switch kind {
		case grub.KindBLS:
			if len(k.remove) > 0 {
				cmds = append(cmds, []string{"grubby", "--update-kernel=ALL", "--remove-args=" + join(k.remove, " ")})
				why = append(why, "removes "+join(k.remove, " ")+" (apply added them)")
			}
			if len(k.readd) > 0 {
				cmds = append(cmds, []string{"grubby", "--update-kernel=ALL", "--args=" + join(k.readd, " ")})
				why = append(why, "puts back "+join(k.readd, " ")+" (apply removed them)")
			}
		case grub.KindKernelstub:
			if len(k.remove) > 0 {
				cmds = append(cmds, []string{"kernelstub", "--delete-options", join(k.remove, " ")})
				why = append(why, "removes "+join(k.remove, " ")+" (apply added them)")
			}
			if len(k.readd) > 0 {
				cmds = append(cmds, []string{"kernelstub", "--add-options", join(k.readd, " ")})
				why = append(why, "puts back "+join(k.readd, " ")+" (apply removed them)")
			}
		case grub.KindRpmOstree:
			// -if-present / -if-missing: a second run (after a failure
			// further on) finds them done and changes nothing
			if len(k.remove) > 0 {
				argv := []string{"rpm-ostree", "kargs"}
				for _, a := range k.remove {
					argv = append(argv, "--delete-if-present="+a)
				}
				cmds = append(cmds, argv)
				why = append(why, "removes "+join(k.remove, " ")+" (apply added them)")
			}
			if len(k.readd) > 0 {
				argv := []string{"rpm-ostree", "kargs"}
				for _, d := range k.readd {
					argv = append(argv, "--append-if-missing="+d)
				}
				cmds = append(cmds, argv)
				why = append(why, "puts back "+join(k.readd, " ")+" (apply removed them)")
			}
		case grub.KindSystemdBoot:
			boot, err := grub.Detect(e.Root)
			switch {
			case err != nil:
				res.Failed = append(res.Failed, "systemd-boot: cannot regenerate the boot entries from the restored "+kernelCmdline+": "+err.Error())
				continue
			case boot.Kind != grub.KindSystemdBoot:
				res.Failed = append(res.Failed, fmt.Sprintf("systemd-boot: apply changed the arguments through kernel-install, but this root now looks like %s: regenerate the entries from %s yourself (kernel-install add KVER /lib/modules/KVER/vmlinuz for each kernel)", boot.Kind, kernelCmdline))
				continue
			case len(boot.Kernels) == 0:
				res.Notes = append(res.Notes, "systemd-boot: no kernel image under /lib/modules/*/vmlinuz: run kernel-install add for each installed kernel yourself, so that its entry takes the restored "+kernelCmdline)
			}
			for _, kv := range boot.Kernels {
				// as grub.Boot.PlanEdit runs it: the entry is made again from the restored file
				cmds = append(cmds, []string{"kernel-install", "add", kv, "/lib/modules/" + kv + "/vmlinuz"})
				why = append(why, "makes the entry of "+kv+" again from the restored "+kernelCmdline)
			}
		default:
			res.Notes = append(res.Notes, fmt.Sprintf("%s: the journal records kernel arguments changed through its own tool, which gpuprep cannot undo: check them with gpuprep grub show", kind))
			continue
		}
		ok := true
		for i, argv := range cmds {
			e.logf("run: %s", host.ShellQuote(argv))
			if out, err := e.Runner.Run(ctx, argv...); err != nil {
				res.Failed = append(res.Failed, fmt.Sprintf("%s: %v%s", host.ShellQuote(argv), err, host.OutputTail(out)))
				ok = false
				break
			}
			res.Undone = append(res.Undone, Undo{Kind: "command", Target: host.ShellQuote(argv), Action: "ran: " + why[i]})
		}
		// a reboot is needed when the next boot (as the commands, and the
		// arguments left alone, make it) differs from the running kernel in
		// an argument apply touched; the configuration as read now says so
		// too, once the tool has run
		if ok {
			for _, a := range k.remove {
				reboot = reboot || kargs.Satisfied(running, kargs.ParseOne(a))
			}
			for _, d := range k.readd {
				reboot = reboot || !kargs.Satisfied(running, kargs.ParseOne(d))
			}
			if boot, err := grub.Detect(e.Root); err == nil && boot.Kind == kind {
				reboot = reboot || rebootNeeded(e, boot)
			}
		}
		for a := range k.keepAdded {
			reboot = reboot || !kargs.Satisfied(running, kargs.ParseOne(a))
		}
		for d := range k.keepRemoved {
			reboot = reboot || kargs.Satisfied(running, kargs.ParseOne(d))
		}
		for _, o := range k.order {
			arg := o[1:]
			if o[0] == '+' {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: %s not removed: %s already had %s before apply, and removing it the way apply added it (%s) would take it from there too: remove it yourself where it should not be (%s)",
					kind, arg, k.keepAdded[arg], kargs.ParseOne(arg).Key, toolName(kind), removeHint(kind, arg)))
			} else {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: %s not put back: %s did not have it before apply, and putting it back the way apply removed it (%s) would add it there: put it back yourself where it was (%s)",
					kind, arg, k.keepRemoved[arg], toolName(kind), addHint(kind, arg)))
			}
		}
	}
	return reboot
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
