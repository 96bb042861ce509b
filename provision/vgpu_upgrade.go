package provision

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuprep/gpuprep/vgpu"
)

// revertUpgrade undoes the version change of the vGPU manager recorded at
// record (the Path of its vgpu.KindUpgradeIntent entry): vgpu.PlanRevert's
// steps, run as gpuprep vgpu install runs them — the version installed now
// uninstalled the way it was installed, the kept previous one installed
// again, the vGPUs of before the change made again, verified. A VM holding
// a vGPU refuses it (the journal keeps its entries: run rollback again).
func revertUpgrade(ctx context.Context, e Env, record string, res *RollbackResult) error {
	now := e.now()
	env := &vgpu.Env{Root: e.Root, Runner: e.Runner, Attrs: e.Sysfs, Undoing: true, Now: func() time.Time { return now }}
	ip, err := vgpu.PlanRevert(ctx, env, record)
	if err != nil {
		return fmt.Errorf("the vGPU manager's version change (%s): %w", record, err)
	}
	if err := ip.Missing(); err != nil {
		return fmt.Errorf("the vGPU manager's version change (%s): %w", record, err)
	}
	n := 0
	err = ip.Execute(ctx, env, func(s vgpu.Step) {
		n++
		e.logf("done %d/%d: %s", n, len(ip.Steps), s.Title)
	})
	if err != nil {
		return fmt.Errorf("putting back the vGPU manager %s: %w", ip.Driver.Version, err)
	}
	res.Undone = append(res.Undone, Undo{Kind: "vgpu-manager", Target: record, Action: "back to the vGPU manager " + ip.Driver.Version})
	res.Notes = append(res.Notes, fmt.Sprintf("the vGPU manager is back at %s (%s), with the vGPUs it had", ip.Driver.Version, ip.Driver.Name()))
	return nil
}
