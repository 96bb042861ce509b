package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// vfio.modules judges the kernel the next boot runs as well as the
// running one: a Proxmox VE 8 node pinned to its older kernel
// (proxmox-boot-tool kernel pin 6.8.12-2-pve, which refresh makes
// systemd-boot's default: proxmox-kernel-helper's
// src/proxmox-boot/functions) needs vfio-pci in that kernel's
// /lib/modules after the reboot, whatever the running kernel has.
func TestVFIOModulesJudgesTheNextKernel(t *testing.T) {
	const running, next = "6.8.12-4-pve", "6.8.12-2-pve"
	noVFIOPCI := "kernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\n"
	for _, c := range []struct {
		name    string
		edit    func(b *fixture.Builder)
		subject string
		status  preflight.Status
		text    []string
	}{
		{"unpinned: the next kernel is the running one", func(b *fixture.Builder) { b.Remove("/etc/kernel/proxmox-boot-pin") },
			"/lib/modules/" + running, preflight.Pass, []string{"available for kernel " + running + ": vfio (module)"}},
		{"pinned, both have them", func(*fixture.Builder) {},
			"/lib/modules/" + running, preflight.Pass, []string{"running kernel " + running + ": available", "kernel " + next + ", which the next boot runs (", "has them: vfio (module), vfio_iommu_type1 (module), vfio_pci (module)"}},
		{"pinned, the next kernel lacks vfio_pci", func(b *fixture.Builder) { b.File("/lib/modules/"+next+"/modules.dep", noVFIOPCI) },
			"/lib/modules/" + next + "/modules.dep", preflight.Warn, []string{"lacks vfio_pci", "after the reboot vfio-pci cannot be loaded"}},
		{"pinned, the next kernel's index missing", func(b *fixture.Builder) { b.Remove("/lib/modules/" + next + "/modules.dep") },
			"/lib/modules/" + running, preflight.Warn, []string{"cannot be told", "/lib/modules/" + next + "/modules.dep missing"}},
		{"pinned, the running kernel lacks vfio_pci", func(b *fixture.Builder) { b.File("/lib/modules/"+running+"/modules.dep", noVFIOPCI) },
			"/lib/modules/" + running + "/modules.dep", preflight.Fail, []string{"missing for kernel " + running + ": vfio_pci", "has them"}},
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		fixture.BootChain("proxmox-systemd-boot", fixture.BootRunning)(b)
		b.File("/etc/kernel/proxmox-boot-pin", next+"\n")
		c.edit(b)
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		f := find(res, want{"vfio.modules", c.subject, "", ""})
		require.Len(t, f, 1, "%s: %+v", c.name, res.Findings)
		require.Equal(t, c.status, f[0].Status, "%s: %s", c.name, f[0].Message)
		for _, s := range c.text {
			require.Contains(t, f[0].Message, s, c.name)
		}
		if c.status == preflight.Fail {
			require.Contains(t, f[0].Remedy, "reboot into kernel "+next, c.name)
		}
	}
}
