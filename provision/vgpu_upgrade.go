package provision

import (
	"context"
	"fmt"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/vgpu"
)

// revertUpgrade undoes the version change of the vGPU manager recorded at
// record (the Path of its vgpu.KindUpgradeIntent entry): vgpu.PlanRevert's
// steps, run as gpuprep vgpu install runs them — the version installed now
// uninstalled the way it was installed, the kept previous one installed
// again, the vGPUs of before the change made again, verified. A VM holding
// a vGPU refuses it (the journal keeps its entries: run rollback again).
func revertUpgrade(ctx context.Context, e effect.Effector, record string, res *RollbackResult) error {
	env := e.At(utcNow(e))
	ip, err := vgpu.PlanRevert(ctx, env, record)
	if err != nil {
		return fmt.Errorf("the vGPU manager's version change (%s): %w", record, err)
	}
	if err := ip.Missing(); err != nil {
		return fmt.Errorf("the vGPU manager's version change (%s): %w", record, err)
	}
	ip.Undoing = true
	n := 0
	err = ip.Execute(ctx, env, func(s vgpu.Step) {
		n++
		e.Logf("done %d/%d: %s", n, len(ip.Steps), s.Title)
	})
	if err != nil {
		return fmt.Errorf("putting back the vGPU manager %s: %w", ip.Driver.Version, err)
	}
	res.Undone = append(res.Undone, Undo{Kind: "vgpu-manager", Target: record, Action: "back to the vGPU manager " + ip.Driver.Version})
	res.Notes = append(res.Notes, fmt.Sprintf("the vGPU manager is back at %s (%s), with the vGPUs it had", ip.Driver.Version, ip.Driver.Name()))
	return nil
}
