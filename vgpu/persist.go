package vgpu

import (
	"context"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vfio"
)

// What `vgpu apply --persist` writes.
const (
	ApplyUnit       = "/etc/systemd/system/" + ApplyUnitName
	ApplyUnitName   = vfio.VGPUApplyUnitName
	PersistedConfig = "/etc/gpuprep/vgpu-config.yaml"
)

// PersistPlan makes a vGPU config re-apply at every boot.
type PersistPlan struct {
	Binary *BinaryCopy   // the gpuprep the unit runs, to install as InstalledBinary; nil: in place
	Files  []change.File // only those whose content changes
	Enable bool          // the unit is not enabled yet (or changed)
	Notes  []string
}

// unitQuote quotes one ExecStart argument for systemd: double quotes when it
// holds white space or quotes, with % and $ escaped.
func unitQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// ApplyUnitContent is the unit that runs `gpuprep vgpu apply` with args at
// boot: after the VFs are enabled (gpuprep-vgpu-sriov.service) and the vGPU
// manager's daemons are up, before the kubelet, so that the device plugin
// finds the vGPUs. vfParents are the GPUs whose VFs are their mdev parents
// (Ampere SR-IOV with mdev): the VFs, and so the parents, are made anew at
// every boot by sriov-manage (VFParentGPUs), so the unit first waits, a
// bounded time, for each GPU's first VF to be an mdev parent, and fails
// naming the GPU when it does not become one.
func ApplyUnitContent(binary string, args []string, vfParents []string) []byte {
	q := []string{unitQuote(binary)}
	for _, a := range args {
		q = append(q, unitQuote(a))
	}
	var pre strings.Builder
	if len(vfParents) > 0 {
		pre.WriteString("TimeoutStartSec=5min\n")
	}
	for _, g := range vfParents {
		d := "/sys/bus/pci/devices/" + g + "/virtfn0/mdev_supported_types"
		fmt.Fprintf(&pre, "ExecStartPre=/bin/sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do [ -d %s ] && exit 0; sleep 2; done; echo \"%s: its VFs are not mdev parents (VFs enabled? nvidia_vgpu_vfio loaded?)\" >&2; exit 1'\n", d, g)
	}
	return []byte(`# Written by gpuprep vgpu apply --persist: vGPUs (and VF types) do not survive
# a reboot or a driver reload; this creates them again at boot.
[Unit]
Description=gpuprep: create the vGPUs of ` + PersistedConfig + `
After=` + SRIOVUnitName + ` nvidia-vgpud.service nvidia-vgpu-mgr.service
Wants=` + SRIOVUnitName + ` nvidia-vgpu-mgr.service
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
` + pre.String() + `ExecStart=` + strings.Join(q, " ") + `

[Install]
WantedBy=multi-user.target
`)
}

// VFParentGPUs are the GPUs (PFs) whose VFs are mdev parents now, sorted:
// the physfn of each /sys/class/mdev_bus entry that has one.
func VFParentGPUs(root *host.Root) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range root.Names("/sys/class/mdev_bus") {
		if !root.Exists("/sys/class/mdev_bus/" + a + "/physfn") {
			continue
		}
		if pf := root.LinkBase("/sys/class/mdev_bus/" + a + "/physfn"); pf != "" && !seen[pf] {
			seen[pf] = true
			out = append(out, pf)
		}
	}
	sort.Strings(out)
	return out
}

// PlanPersist plans the config copy, the unit, and the root-owned copy of
// the running gpuprep (binary, a path on this machine: /proc/self/exe)
// that the unit runs (InstalledBinary). args are the apply arguments after
// the config file (e.g. -c NAME --prune).
func PlanPersist(ctx context.Context, root *host.Root, r host.Runner, binary string, config []byte, args []string) (*PersistPlan, error) {
	p := &PersistPlan{}
	bin, err := planBinary(root, binary)
	if err != nil {
		return nil, err
	}
	p.Binary = bin
	unit := ApplyUnitContent(InstalledBinary, append([]string{"vgpu", "apply", "-f", PersistedConfig}, args...), VFParentGPUs(root))
	for _, w := range []struct {
		path string
		data []byte
	}{{PersistedConfig, config}, {ApplyUnit, unit}} {
		old, err := root.ReadFile(w.path)
		if f := change.Between(w.path, old, err == nil, w.data); f.Pending() {
			p.Files = append(p.Files, f)
		}
	}
	en, _ := unitState(ctx, r, ApplyUnitName)
	p.Enable = !en || len(p.Files) > 0 || p.Binary != nil
	if p.Binary != nil {
		p.Notes = append(p.Notes, fmt.Sprintf("installs this gpuprep (SHA-256 %s) as %s, root's own, which the unit runs", p.Binary.SHA256, InstalledBinary))
	}
	return p, nil
}

// Empty reports whether everything is in place.
func (p *PersistPlan) Empty() bool { return p.Binary == nil && len(p.Files) == 0 && !p.Enable }

// Apply installs the gpuprep the unit runs, writes the files atomically
// (with backups, journaled) and enables the unit.
func (p *PersistPlan) Apply(ctx context.Context, root *host.Root, r host.Runner, now time.Time) error {
	if p.Binary != nil { // before the unit that runs it
		if err := p.Binary.install(root, now); err != nil {
			return err
		}
	}
	for _, f := range p.Files {
		if _, err := journal.WriteFile(root, f.Path, f.New, f.Perm(), "vgpu apply --persist", now); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	if !p.Enable {
		return nil
	}
	for _, argv := range [][]string{{"systemctl", "daemon-reload"}, {"systemctl", "enable", ApplyUnitName}} {
		if _, err := r.Run(ctx, argv...); err != nil {
			return fmt.Errorf("%s: %w (the unit file is written; enable it by hand)", strings.Join(argv, " "), err)
		}
	}
	return nil
}
