package provision

import (
	"context"

	"github.com/gpuprep/gpuprep/internal/effect"
)

// nfdTimerStep (StepNFDTimer, --nfd-timer): the NFD feature file's
// refresher installed (nfd_timer.go); rollback disables and removes the
// units it created, then reloads systemd.
type nfdTimerStep struct{}

func (nfdTimerStep) id() string { return StepNFDTimer }

func (nfdTimerStep) run(ctx context.Context, e effect.Effector, p *Plan, s *Step) error {
	return p.installNFDTimer(ctx, e, s)
}
