package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// The Proxmox VE fixtures carry the kernels a Proxmox VE 8 node has in
// /boot (vmlinuz, initrd.img, config, System.map of 6.8.12-2-pve and the
// running 6.8.12-4-pve, as the proxmox-kernel package and update-initramfs
// leave them), so the next kernel is read from what proxmox-boot-tool
// refresh puts on the ESPs: grub show names it, and check's vfio.binding
// judges that kernel, not an unknown one read as the running kernel.
func TestProxmoxFixturesNextKernel(t *testing.T) {
	for _, loader := range []string{"proxmox-systemd-boot", "proxmox-grub", "proxmox-plain-grub"} {
		t.Run(loader, func(t *testing.T) {
			root := bootChainRoot(t, loader, fixture.BootRunning)
			out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
			require.Equal(t, 0, code, errs)
			var show showReport
			require.NoError(t, json.Unmarshal([]byte(out), &show), out)
			require.Equal(t, "6.8.12-4-pve", show.NextBoot.Kernel, out)
			require.Equal(t, "/boot/initrd.img-6.8.12-4-pve", show.NextBoot.Initrd, out)
			require.Empty(t, show.NextBoot.Missing, out)

			boundVFIO(t, root)
			f := vfioBinding(t, root)
			require.NotContains(t, f.Message, "which kernel the next boot runs is unknown", "%+v", f)
			require.NotContains(t, f.Message, "the next boot runs kernel", "%+v", f)
		})
	}
}

// pinned to the older kernel (proxmox-boot-tool kernel pin 6.8.12-2-pve),
// a systemd-boot node boots it next: grub show and check both say so.
func TestProxmoxPinnedOlderKernel(t *testing.T) {
	root := bootChainRoot(t, "proxmox-systemd-boot", fixture.BootRunning)
	boundVFIO(t, root)
	require.NoError(t, fixture.New(root).File("/etc/kernel/proxmox-boot-pin", "6.8.12-2-pve\n").Err())
	out, errs, code := gpuprep(t, "grub", "show", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var show showReport
	require.NoError(t, json.Unmarshal([]byte(out), &show), out)
	require.Equal(t, "6.8.12-2-pve", show.NextBoot.Kernel, out)
	f := vfioBinding(t, root)
	require.Contains(t, f.Message, "the next boot runs kernel 6.8.12-2-pve (", "%+v", f)
	require.Contains(t, f.Message, "not the running 6.8.12-4-pve", "%+v", f)
}

// boundVFIO puts the fixture's A100 on vfio-pci in its IOMMU group, with
// the vfio-pci ID in /etc/modprobe.d and vfio-pci loaded from the
// initramfs (/etc/initramfs-tools/modules), as Proxmox VE's PCI(e)
// passthrough guide has it done.
func boundVFIO(t *testing.T, root string) {
	t.Helper()
	b := fixture.New(root)
	b.IOMMU("dmar0", 0xf020df) // ECAP with interrupt remapping (bit 3)
	b.PCI(fixture.PCI{Addr: "0000:00:01.0", Vendor: 0x8086, Device: 0x347a, Class: 0x060400, Driver: "pcieport", Group: 1, PCIeType: fixture.PCIeRootPort})
	b.PCI(fixture.PCI{Addr: "0000:17:00.0", Parent: "0000:00:01.0", Vendor: 0x10de, Device: 0x20b5, Class: 0x030200, Driver: "vfio-pci", Group: 2, PCIeType: fixture.PCIeEndpoint})
	b.Module("vfio", nil).Module("vfio_pci", nil).Module("vfio_iommu_type1", nil)
	b.File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:20b5\n")
	b.File("/etc/initramfs-tools/modules", "vfio-pci\n")
	require.NoError(t, b.Err())
}

func vfioBinding(t *testing.T, root string) checkFinding {
	t.Helper()
	out, _, _ := gpuprep(t, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	var rep struct {
		Findings []checkFinding `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	for _, f := range rep.Findings {
		if f.Check == "vfio.binding" && f.Subject == "0000:17:00.0" {
			return f
		}
	}
	t.Fatalf("no vfio.binding finding for 0000:17:00.0: %s", out)
	return checkFinding{}
}
