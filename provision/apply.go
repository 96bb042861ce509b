package provision

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/pci"
)

// Journal entries the workflow writes (besides those grub, vfio and label
// write themselves), all with Command "apply" or "rollback":
//
//	kind "step":          Before = step ID, After = "started" | "done"; for the reboot step (recorded when
//	                      apply stops there or runs systemctl reboot) Device = the boot ID of the boot that
//	                      asked (/proc/sys/kernel/random/boot_id, "" when unreadable) and Path = why
//	                      (RebootForKernelArgs, RebootForNouveau, RebootForVFIO; "" in older journals: kernel
//	                      arguments); After = "done" for the reboot step is an apply in a later boot answering
//	                      that ask (it found nothing unexplained), so that the ask is no longer diagnosed
//	kind "file-intent":   Path, Backup (the backup WriteFileAtomic is about to make) and Before = "sha256:…" of the
//	                      content it backs up; Backup "" and Before "absent" for a new file; Wrote, where the
//	                      writer knows it beforehand, what the change is to leave there (as a "file" entry's)
//	kind "file":          (every writer's, after the change) Path, Backup ("" for a new file), Wrote = "sha256:…"
//	                      of the content written, or "absent" for a file removed (none in older journals)
//	kind "dir":           (every writer's, journal.MkdirAll) Path = a directory about to be created, written
//	                      before the mkdir; rollback removes it once empty (never one that holds anything)
//	kind "driver-intent": Device, Before = its driver before the step ("" unbound), After = the driver it goes to;
//	                      vfio.Bind and vfio.Unbind write their own too ("vfio bind", "vfio unbind"), each
//	                      just before a device's first sysfs write, and a "driver" entry once it is done
//	kind "label":         Device = Node name, Path = kubeconfig, Before = labels before ("k=v,…"), After = the keys changed ("k,…")
//	kind "undone":        Before = the index (in journal.Read order) of an entry rollback undid; Backup, for
//	                      a file rollback overwrote or removed, where it saved the content it found there
//	kind "bootargs-intent": written before each command of a bootloader whose own tool changes the kernel
//	                      arguments: Device = the bootloader kind (grub-bls: grubby, systemd-boot: kernel-install,
//	                      kernelstub, rpm-ostree), After = one argument the command adds that was not there, or
//	                      Before = one it removes; Path, for the kinds whose tool changes several boot entries
//	                      (grubby --update-kernel=ALL, rpm-ostree), the entries it leaves as they were for that
//	                      argument, space-separated: undoing it over every entry would change those too
//
// Intent entries are written before the change they announce, so that a
// crash between a change and its own record still leaves rollback enough.
const (
	KindStep         = journal.KindStep
	KindFileIntent   = journal.KindFileIntent
	KindDriverIntent = journal.KindDriverIntent
	KindLabel        = journal.KindLabel
	KindUndone       = journal.KindUndone
	KindBootArgs     = journal.KindBootArgs
)

// utcNow is e's clock in UTC: the time provision stamps its journal
// entries and backups with.
func utcNow(e effect.Effector) time.Time { return e.Now().UTC() }

// StepResult is what became of one step.
type StepResult struct {
	ID     string `json:"id"`
	Status string `json:"status"` // done, failed, stopped (the reboot), rebooting, skipped (a reboot no longer needed), interrupted
	Error  string `json:"error,omitempty"`
}

// Outcome is what Apply did.
type Outcome struct {
	Steps  []StepResult `json:"steps"`
	Reboot bool         `json:"rebootRequired"` // stopped at the reboot step
	// RebootFor, with Reboot: why apply asks for the reboot
	// (RebootForKernelArgs, RebootForNouveau or RebootForVFIO), as the
	// journal records the ask.
	RebootFor string `json:"rebootFor,omitempty"`
	// BootID is the boot this apply ran in (/proc/sys/kernel/random/boot_id;
	// "" when unreadable): with Reboot, the boot that asked. An apply run
	// again that reports another boot ID ran after a reboot.
	BootID string `json:"bootID,omitempty"`
	// RebootedFor are the reasons of reboots earlier applies asked for that
	// the node has booted since, which this apply or an earlier one in the
	// same boot answered (the journal's "done" for them, with this boot's
	// ID): the node rebooted since it asked, whatever boot ID the caller
	// saw. Asked again for one of these reasons, that reboot did not make
	// its change effective.
	RebootedFor []string `json:"rebootedFor,omitempty"`
	// Resumed names steps a previous apply started and did not finish.
	Resumed []string `json:"resumed,omitempty"`
}

// ApplyOptions tune Apply.
type ApplyOptions struct {
	Reboot bool // run `systemctl reboot` at the reboot step instead of stopping
	// Interrupted, when set, is asked before each step: true (the user
	// interrupted) stops there, the step before it finished, with
	// ErrInterrupted.
	Interrupted func() bool
	// Again is the command line that continues after the reboot (the same
	// flags), as a shell shows it; "" says "gpuprep apply".
	Again string
}

// ErrInterrupted is Apply's error when it stopped between steps because the
// user interrupted it.
var ErrInterrupted = errors.New("interrupted: stopped between steps, every change so far complete")

// Unfinished returns the steps the journal shows started and not done (a
// crash or a kill), oldest first.
func Unfinished(entries []journal.Entry) []string {
	open := map[string]bool{}
	var order []string
	undone := undoneSet(entries)
	for i, e := range entries {
		s := e.Step()
		if e.Kind != KindStep || undone[i] || s.ID == StepReboot {
			continue
		}
		switch s.State {
		case journal.StepStarted:
			if !open[s.ID] {
				order = append(order, s.ID)
			}
			open[s.ID] = true
		case journal.StepDone:
			open[s.ID] = false
		}
	}
	var out []string
	for _, s := range order {
		if open[s] {
			out = append(out, s)
		}
	}
	return out
}

// Apply runs the plan's steps in order and stops at the reboot step.
func Apply(ctx context.Context, e effect.Effector, p *Plan, o ApplyOptions) (*Outcome, error) {
	out := &Outcome{Steps: []StepResult{}, BootID: readBootID(e.Root)}
	entries, jerr := journal.Read(e.Root)
	if jerr != nil {
		e.Logf("note: %v", jerr)
	}
	out.Resumed = Unfinished(entries)
	if p.rebootErr != nil {
		// rebooted since the last ask and still not in effect: another
		// reboot would only repeat it; nothing runs
		out.Steps = append(out.Steps, StepResult{ID: StepReboot, Status: "failed", Error: p.rebootErr.Error()})
		return out, p.rebootErr
	}
	for _, s := range out.Resumed {
		e.Logf("resuming: step %s was started by an earlier run that did not finish", s)
	}
	if err := answerReboots(e, entries, out); err != nil {
		return out, err
	}
	p.resumeKernelArgs(out.Resumed)
	for _, s := range p.Steps {
		stop, err := p.applyStep(ctx, e, s, entries, o, out)
		if stop || err != nil {
			return out, err
		}
	}
	return out, nil
}

// answerReboots records answered the reboots asked for before the boot the
// node runs now: this plan found no diagnosis to make (p.rebootErr), so an
// old ask never blames a later state on that reboot (a mode switch, a
// change made since). out.RebootedFor gets those, and those an earlier
// apply answered in this same boot: every answer from this boot says so,
// not only the first (a fleet client may have lost that one with its
// connection).
func answerReboots(e effect.Effector, entries []journal.Entry, out *Outcome) error {
	for _, why := range rebootReasons {
		if _, rebooted, _ := askState(e.Root, entries, why); rebooted {
			s := journal.StepRecord{ID: StepReboot, State: journal.StepDone, Reason: why, BootID: out.BootID}
			if err := e.Record(s.Entry("apply", time.Time{})); err != nil {
				return err
			}
			out.RebootedFor = append(out.RebootedFor, why)
		}
	}
	if out.BootID == "" {
		return nil
	}
	for _, en := range entries {
		s := en.Step()
		if en.Kind == KindStep && s.ID == StepReboot && s.State == journal.StepDone && s.BootID == out.BootID && !slices.Contains(out.RebootedFor, s.Reason) {
			out.RebootedFor = append(out.RebootedFor, s.Reason)
		}
	}
	return nil
}

// resumeKernelArgs: a kernel-args step interrupted after its file edits but
// before the boot menu was regenerated: the edit is now "already
// configured", so the plan has no step; regenerate again.
func (p *Plan) resumeKernelArgs(resumed []string) {
	if slices.Contains(resumed, StepKernelArgs) && p.Step(StepKernelArgs) == nil && p.boot != nil && p.boot.Regenerate != nil {
		s := &Step{ID: StepKernelArgs, Title: "regenerate the boot menu (an earlier run was interrupted)", argv: [][]string{p.boot.Regenerate}}
		p.Steps = append([]*Step{s}, p.Steps...)
	}
}

// applyStep runs s, its start and end journalled; stop says apply ends
// here (the reboot, or an interrupt).
func (p *Plan) applyStep(ctx context.Context, e effect.Effector, s *Step, entries []journal.Entry, o ApplyOptions, out *Outcome) (stop bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if o.Interrupted != nil && o.Interrupted() {
		out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "interrupted"})
		return true, fmt.Errorf("before step %s: %w", s.ID, ErrInterrupted)
	}
	if s.Reboot && rebootNeedless(e, s) && !askedThisBoot(e.Root, entries, s.rebootFor) {
		// nouveau was unloaded (or no device is on VFIO any more):
		// nothing left for a reboot to do. Not once apply asked for the
		// reboot in this boot: the unload may succeed only because the
		// node is going down (fleet apply --reboot runs apply again until
		// it is back), and what apply would then check is a node about
		// to reboot.
		out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "skipped"})
		return false, nil
	}
	if s.Reboot {
		return true, rebootAt(ctx, e, s, o, out)
	}
	if s.Deferred && s.ID != StepVGPUDevices { // vgpu-devices is planned when it runs, after the install
		return true, fmt.Errorf("%s: deferred step reached without the reboot before it", s.ID)
	}
	e.Logf("step %s: %s", s.ID, s.Title)
	if err := e.Record(journal.StepRecord{ID: s.ID, State: journal.StepStarted}.Entry("apply", time.Time{})); err != nil {
		return true, err
	}
	if err := p.run(ctx, e, s); err != nil {
		out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "failed", Error: err.Error()})
		return true, fmt.Errorf("%s: %w", s.ID, err)
	}
	if err := e.Record(journal.StepRecord{ID: s.ID, State: journal.StepDone}.Entry("apply", time.Time{})); err != nil {
		return true, err
	}
	out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "done"})
	return false, nil
}

// rebootNeedless: the reboot step s follows leaves nothing for a reboot to
// do (no GPU left on nouveau, or on VFIO).
func rebootNeedless(e effect.Effector, s *Step) bool {
	return len(s.offNouveau) > 0 && len(devicesOn(e.Root, s.offNouveau, isNouveau)) == 0 ||
		len(s.offVFIO) > 0 && len(devicesOn(e.Root, s.offVFIO, pci.DriverIsVFIO)) == 0
}

// rebootAt is the reboot step s: the ask journalled with the boot ID (it
// tells the next run whether the node has booted since), then apply stops,
// or runs systemctl reboot (o.Reboot).
func rebootAt(ctx context.Context, e effect.Effector, s *Step, o ApplyOptions, out *Outcome) error {
	ask := journal.StepRecord{ID: s.ID, State: journal.StepStarted, BootID: out.BootID, Reason: s.rebootFor}
	if err := e.Record(ask.Entry("apply", time.Time{})); err != nil {
		return err
	}
	out.RebootFor = s.rebootFor
	if !o.Reboot {
		again := o.Again
		if again == "" {
			again = "gpuprep apply"
		}
		e.Logf("reboot required: reboot the node, then run %s again to continue", again)
		out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "stopped"})
		out.Reboot = true
		return nil
	}
	e.Logf("run: systemctl reboot")
	if _, err := e.Runner.Run(ctx, "systemctl", "reboot"); err != nil {
		out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "failed", Error: err.Error()})
		return fmt.Errorf("%s: systemctl reboot: %w", s.ID, err)
	}
	out.Steps = append(out.Steps, StepResult{ID: s.ID, Status: "rebooting"})
	out.Reboot = true
	return nil
}

// askedThisBoot tells whether apply asked for a reboot for reason during
// the boot the node runs now.
func askedThisBoot(root *host.Root, entries []journal.Entry, reason string) bool {
	asked, rebooted, _ := askState(root, entries, reason)
	return asked && !rebooted
}

// fileIntent records that p is about to be replaced (its backup will be
// host.BackupName(p, now)) or created.
func fileIntent(e effect.Effector, p string, now time.Time) error {
	return fileIntentBy(e, p, now, "apply", "")
}

// fileIntentBy is fileIntent for the entry of command; wrote, when known,
// is what the change is to leave there (journal.Entry.Wrote).
func fileIntentBy(e effect.Effector, p string, now time.Time, command, wrote string) error {
	old, err := e.Root.ReadFile(p)
	return e.Record(journal.ReplaceIntent(p, old, err == nil, wrote, now).Intent(command, now))
}

// writeFile replaces p with data, atomically and backed up, with an intent
// entry before and a file entry after.
func writeFile(e effect.Effector, p string, data []byte) error {
	return writeFileBy(e, p, data, "apply")
}

// writeFileBy is writeFile for the entries of command.
func writeFileBy(e effect.Effector, p string, data []byte, command string) error {
	res, err := journal.WriteFile(e.Root, p, data, 0o644, command, utcNow(e))
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if res.Changed {
		e.Logf("wrote %s%s", p, backupNote(res.Backup))
	}
	return nil
}

func backupNote(b string) string {
	if b == "" {
		return ""
	}
	return " (backup " + b + ")"
}

// removeStaleTemps removes the temporary files a killed atomic write of p
// left beside it.
func removeStaleTemps(root *host.Root, p string) {
	rp, err := root.Path(path.Dir(p))
	if err != nil {
		return
	}
	stale, _ := filepath.Glob(filepath.Join(rp, "."+path.Base(p)+".gpuprep-tmp-*"))
	for _, f := range stale {
		_ = removeIfExists(f)
	}
}

func removeIfExists(p string) error {
	err := os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
