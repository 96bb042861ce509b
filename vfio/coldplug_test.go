package vfio

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// nvidiaAliases are the modules.alias lines depmod makes of nvidia.ko's
// PCI table (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/
// nv-pci-table.c: vendor 10de, class 0x030000 and 0x030200, class_mask ~0).
const nvidiaAliases = "alias pci:v000010DEd*sv*sd*bc03sc00i00* nvidia\nalias pci:v000010DEd*sv*sd*bc03sc02i00* nvidia\n"

// hostNVIDIA installs the NVIDIA driver as a module of the next (running)
// kernel, as a host driver package or a vGPU manager does: udev loads it
// for the GPU at the coldplug.
func hostNVIDIA(b *fixture.Builder) {
	const base = "/lib/modules/6.8.0-45-generic"
	b.File(base+"/modules.dep", "kernel/drivers/vfio/vfio.ko:\nkernel/drivers/vfio/vfio_iommu_type1.ko:\nkernel/drivers/vfio/pci/vfio-pci.ko:\nupdates/dkms/nvidia.ko:\n")
	b.File(base+"/modules.alias", "alias vfio_pci:v*d*sv*sd*bc*sc*i* vfio_pci\n"+nvidiaAliases)
}

// modules-load.d loads vfio-pci alongside udev's coldplug, not before it:
// where udev loads another driver for the GPU (nvidia, installed on the
// host), that driver may take it first, so the line is no persistence by
// itself; a softdep (Proxmox VE's guide: `softdep <module> pre: vfio-pci`)
// or a blacklist of that driver makes it one, and where no other module
// matches the GPU (nvidia in the GPU Operator's container, not the host)
// it is one.
func TestModulesLoadRacesColdplug(t *testing.T) {
	ml := func(b *fixture.Builder) {
		b.File("/etc/modprobe.d/vfio.conf", vfioIDs).File("/etc/modules-load.d/vfio.conf", "vfio_pci\n")
	}
	_, bs := bootView(t, ml)
	require.NotEmpty(t, bs, "no other driver for it: modules-load.d is in time")
	require.Contains(t, bs[0].String(), "vfio-pci loaded early by /etc/modules-load.d/vfio.conf:1")

	v, bs := bootView(t, ml, hostNVIDIA)
	require.Empty(t, bs, "nvidia races vfio-pci: nothing binds it for sure")
	k := sim(t, "vfio-bound", ml, hostNVIDIA)
	d := inventory(t, k).Get(bootGPU)
	var why []string
	for _, e := range v.DiscountedFor(d) {
		why = append(why, e.String())
	}
	require.Contains(t, strings.Join(why, "\n"), `/etc/modules-load.d/vfio.conf:1 "vfio_pci" (systemd-modules-load: not in time for 0000:11:00.0: systemd-modules-load runs alongside udev's coldplug`)
	require.Contains(t, strings.Join(why, "\n"), "udev loads nvidia for it")

	_, bs = bootView(t, ml, hostNVIDIA, func(b *fixture.Builder) { b.File("/etc/modprobe.d/nvidia-vfio.conf", "softdep nvidia pre: vfio-pci\n") })
	require.NotEmpty(t, bs, "the softdep loads vfio-pci before nvidia")
	_, bs = bootView(t, ml, hostNVIDIA, func(b *fixture.Builder) { b.File("/etc/modprobe.d/blacklist-nvidia.conf", "blacklist nvidia\n") })
	require.NotEmpty(t, bs, "udev does not load a blacklisted nvidia")
}

// An initramfs made by initramfs-tools before gpuprep's modules-load.d
// file is not stale for it: mkinitramfs copies /etc/modprobe.d into the
// image, never /etc/modules-load.d, which the root reads itself.
func TestModulesLoadNotInInitramfsToolsImage(t *testing.T) {
	k := sim(t, "vfio-bound", tool("update-initramfs"))
	b := fixture.New(k.Root.Dir())
	b.File(ModprobeConf, "# gpuprep-devices: 0000:11:00.0=vfio-pci\noptions vfio-pci ids=10de:2331\n").File(ModulesLoad, "vfio\nvfio_pci\n")
	b.File("/boot/initrd.img-6.8.0-45-generic", "image")
	require.NoError(t, b.Err())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := k.Root
	require.NoError(t, touch(r, ModprobeConf, t0))
	require.NoError(t, touch(r, "/boot/initrd.img-6.8.0-45-generic", t0.Add(time.Minute)))
	require.NoError(t, touch(r, ModulesLoad, t0.Add(2*time.Minute)))
	require.Empty(t, InitramfsStale(r), "the image has what it carries")
	// other tools (dracut's systemd-modules-load module) are not known
	// to leave it out: judged as before
	require.NoError(t, fixture.New(r.Dir()).Remove("/usr/sbin/update-initramfs").File("/usr/sbin/dracut", "").Err())
	require.Contains(t, InitramfsStale(r), "older than "+ModulesLoad)
}
