package provision

import (
	"context"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// nouveauStep (StepNouveau, container): nouveau blacklisted and the
// initramfs regenerated (planned by planNouveau), then nouveau unloaded,
// each device it drove recorded first (a driver-intent from nouveau to
// none). Rollback restores the files and regenerates the initramfs; it
// never loads nouveau again, nor takes a device from a driver that took it
// since.
type nouveauStep struct{}

func (nouveauStep) id() string { return StepNouveau }

func (nouveauStep) run(ctx context.Context, e Env, _ *Plan, s *Step) error {
	if err := writeFiles(e, s.Files); err != nil {
		return err
	}
	if err := runAll(ctx, e, s.argv); err != nil {
		return err
	}
	if !e.Root.Exists("/sys/module/nouveau") {
		return nil
	}
	// every device nouveau drives loses it (selected or not): recorded
	// first, so that rollback knows
	now := e.now()
	for _, a := range e.Root.Names("/sys/bus/pci/devices") {
		if e.Root.LinkBase("/sys/bus/pci/devices/"+a+"/driver") == "nouveau" {
			if err := e.record(journal.Entry{Time: now, Command: "apply", Kind: KindDriverIntent, Device: a, Before: "nouveau", After: ""}); err != nil {
				return err
			}
		}
	}
	// in use (a console, a display server): not a failure, the reboot
	// step after this one takes it away
	e.logf("run: %s", host.ShellQuote(unloadNouveau))
	if out, err := e.Runner.Run(ctx, unloadNouveau...); err != nil {
		e.logf("note: nouveau could not be unloaded (%v%s): it goes with the reboot", err, host.OutputTail(out))
	}
	return nil
}
