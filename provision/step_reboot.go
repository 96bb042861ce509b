package provision

import (
	"context"
	"fmt"
)

// rebootStep (StepReboot) is where apply stops, or runs systemctl reboot:
// Apply handles it itself (rebootAt), recording the ask with the boot ID;
// it is never run as the other steps are. Nothing it does is undone.
type rebootStep struct{}

func (rebootStep) id() string { return StepReboot }

func (rebootStep) run(context.Context, Env, *Plan, *Step) error {
	return fmt.Errorf("%s: run by Apply, not as a step", StepReboot)
}
