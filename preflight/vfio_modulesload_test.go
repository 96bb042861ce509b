package preflight_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// The Proxmox VE "PCI(e) Passthrough" guide's files on a Proxmox VE 8
// node (ext4/LVM, GRUB): vfio, vfio_iommu_type1, vfio_pci in /etc/modules
// (read through Debian's /etc/modules-load.d/modules.conf -> ../modules)
// and `options vfio-pci ids=` in /etc/modprobe.d. systemd-modules-load
// loads vfio-pci beside udev's coldplug, so it keeps the GPU only where
// udev loads no other driver for it: with the NVIDIA driver installed as
// a module of the kernel the guide's own remedy, `softdep nvidia pre:
// vfio-pci`, is what makes it persist.
func TestProxmoxGuideModulesLoad(t *testing.T) {
	const k = "6.8.12-4-pve"
	for _, c := range []struct {
		name   string
		edit   func(*fixture.Builder)
		status preflight.Status
		text   string
	}{
		{"no other driver for the GPU", func(*fixture.Builder) {}, preflight.Pass,
			`vfio-pci loaded early by /etc/modules-load.d/modules.conf (-> /etc/modules):3 "vfio_pci"`},
		{"the NVIDIA driver installed on the host", func(b *fixture.Builder) { nvidiaModule(b, k) }, preflight.Warn,
			"not in time for 0000:17:00.0: systemd-modules-load runs alongside udev's coldplug"},
		{"with the guide's softdep", func(b *fixture.Builder) {
			nvidiaModule(b, k)
			b.File("/etc/modprobe.d/nvidia-vfio.conf", "softdep nvidia pre: vfio-pci\n")
		}, preflight.Pass, `/etc/modprobe.d/vfio.conf:1 "options vfio-pci ids=10de:20b5"`},
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		fixture.BootChain("proxmox-plain-grub", fixture.BootRunning)(b)
		b.IOMMU("dmar0", 0xf020df)
		b.PCI(fixture.PCI{Addr: "0000:00:01.0", Vendor: 0x8086, Device: 0x347a, Class: 0x060400, Driver: "pcieport", Group: 1, PCIeType: fixture.PCIeRootPort})
		b.PCI(fixture.PCI{Addr: "0000:17:00.0", Parent: "0000:00:01.0", Vendor: 0x10de, Device: 0x20b5, Class: 0x030200, Driver: "vfio-pci", Group: 2, PCIeType: fixture.PCIeEndpoint})
		b.Module("vfio", nil).Module("vfio_pci", nil).Module("vfio_iommu_type1", nil)
		b.File("/etc/modules", "vfio\nvfio_iommu_type1\nvfio_pci\n").Link("/etc/modules-load.d/modules.conf", "/etc/modules")
		b.File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:20b5\n")
		c.edit(b)
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		f := find(res, want{"vfio.binding", "0000:17:00.0", "", preflight.VMPassthrough})
		require.Len(t, f, 1, "%s: %+v", c.name, res.Findings)
		require.Equal(t, c.status, f[0].Status, "%s: %s", c.name, f[0].Message)
		require.Contains(t, f[0].Message, c.text, c.name)
	}
}

// nvidiaModule makes the NVIDIA driver a module of kernel k, with the
// modules.alias lines of its PCI table (open-gpu-kernel-modules
// kernel-open/nvidia/nv-pci-table.c: 10de, class 0x0300 and 0x0302).
func nvidiaModule(b *fixture.Builder, k string) {
	base := "/lib/modules/" + k
	b.File(base+"/modules.dep", "kernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\nkernel/drivers/vfio/pci/vfio-pci.ko:\nupdates/dkms/nvidia.ko:\n")
	b.File(base+"/modules.alias", "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\nalias pci:v000010DEd*sv*sd*bc03sc00i00* nvidia\nalias pci:v000010DEd*sv*sd*bc03sc02i00* nvidia\n")
}
