package provision

import (
	"context"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/effect"
)

// stepKind is one kind of step of the workflow (k0sctl's phase.Manager is
// the model: an ordered list of phases, each one type): each in a file of
// its own, step_ID.go, with how it runs (and beside it, how it is
// planned). What it changes it journals (intents before, done after);
// Rollback undoes it by the journal's kinds (rollback.go's undoKinds), so
// that a journal from any gpuprep is undone the same.
type stepKind interface {
	id() string
	// run carries out s, planned by p, through e.
	run(ctx context.Context, e effect.Effector, p *Plan, s *Step) error
}

// stepKinds are the workflow's steps in the order they run (Steps).
var stepKinds = []stepKind{kernelArgsStep{}, rebootStep{}, vfioBindStep{}, vfioUnbindStep{}, nouveauStep{},
	vgpuInstallStep{}, vgpuDevicesStep{}, labelStep{}, nfdTimerStep{}}

// kindOf is the kind of step id, or nil.
func kindOf(id string) stepKind {
	for _, k := range stepKinds {
		if k.id() == id {
			return k
		}
	}
	return nil
}

func (p *Plan) run(ctx context.Context, e effect.Effector, s *Step) error {
	k := kindOf(s.ID)
	if k == nil {
		return fmt.Errorf("unknown step %q", s.ID)
	}
	return k.run(ctx, e, p, s)
}

// runAll runs argv, each logged; the first that fails is the error.
func runAll(ctx context.Context, e effect.Effector, argvs [][]string) error {
	for _, argv := range argvs {
		if err := runLogged(ctx, e, argv); err != nil {
			return err
		}
	}
	return nil
}
