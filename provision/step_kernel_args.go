package provision

import (
	"context"
	"fmt"

	"github.com/gpuprep/gpuprep/internal/host"
)

// kernelArgsStep (StepKernelArgs, vm-passthrough and vm-vgpu): the IOMMU
// kernel arguments in the bootloader's configuration (planned by
// planKernelArgs through grub.Plan): its files written (journalled file
// intents), then its commands, each bootloader tool's announced first by
// one bootargs-intent per argument it changes. Rollback restores the files,
// regenerates the menu, and runs each tool's inverse (bootArgsUndo).
type kernelArgsStep struct{}

func (kernelArgsStep) id() string { return StepKernelArgs }

func (kernelArgsStep) run(ctx context.Context, e Env, p *Plan, s *Step) error {
	if err := writeFiles(e, s.Files); err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, argv := range s.argv {
		// what the bootloader's own tool is about to change, so that
		// rollback can run its inverse
		for _, en := range p.bootArgIntents(argv) {
			k := en.Before + "\x00" + en.After
			if recorded[k] {
				continue
			}
			recorded[k] = true
			if err := e.record(en); err != nil {
				return err
			}
		}
		if err := runLogged(ctx, e, argv); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes each planned file, journalled (writeFile).
func writeFiles(e Env, fs []FileDiff) error {
	for _, f := range fs {
		if err := writeFile(e, f.Path, f.data); err != nil {
			return err
		}
	}
	return nil
}

// runLogged runs argv, logged; its failure carries the tail of its output.
func runLogged(ctx context.Context, e Env, argv []string) error {
	e.logf("run: %s", host.ShellQuote(argv))
	if out, err := e.Runner.Run(ctx, argv...); err != nil {
		return fmt.Errorf("%s: %w%s", host.ShellQuote(argv), err, host.OutputTail(out))
	}
	return nil
}
