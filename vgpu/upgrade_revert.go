package vgpu

import (
	"context"
	"fmt"

	"github.com/gpuprep/gpuprep/internal/effect"
)

// PlanRevert plans undoing the version change recorded at recordPath (a
// KindUpgradeIntent entry's Path): the same flow as the change, back to the
// version it left — the vGPUs there are now removed (refused while a VM
// holds one), the daemons stopped, the modules unloaded, the version
// installed now uninstalled the way it was installed, the kept installer
// (or package) of the previous version installed from its checked copy,
// the vGPUs of before the change made again, and verified. gpuprep rollback
// runs it for an upgrade's entries.
func PlanRevert(ctx context.Context, fx effect.Effector, recordPath string) (*InstallPlan, error) {
	e := &env{Effector: fx}
	rec, err := ReadUpgradeRecord(e.Root, recordPath)
	if err != nil {
		return nil, err
	}
	kept, err := e.Root.Path(rec.From.File)
	if err != nil {
		return nil, fmt.Errorf("the kept vGPU manager %s: %w", rec.From.Version, err)
	}
	var gpus []GPUInfo
	for _, g := range rec.SRIOV {
		dev, _ := e.Root.ReadString("/sys/bus/pci/devices/" + g + "/device")
		gpus = append(gpus, GPUInfo{Address: g, DeviceID: trimHex(dev)})
	}
	c := &managerChange{rec: rec, path: recordPath, revert: true, live: existingOn(e.Root, nvidiaPFs(e.Root))}
	p, err := planInstall(ctx, e, InstallOptions{Driver: kept, GPUs: gpus, change: c})
	if err != nil {
		return nil, err
	}
	if p.Driver.SHA256 != rec.From.SHA256 {
		return nil, fmt.Errorf("%s: SHA-256 %s, but the change recorded %s: not the installer it kept", rec.From.File, p.Driver.SHA256, rec.From.SHA256)
	}
	return p, nil
}

func trimHex(s string) string {
	if len(s) > 2 && s[:2] == "0x" {
		return s[2:]
	}
	return s
}
