package preflight_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// A GPU on nouveau: only vm-passthrough is fixed by binding it to vfio-pci;
// containers need nouveau blacklisted (the operator's driver container then
// takes the GPU), vm-vgpu the vGPU manager (whose install blacklists it).
func TestNouveauRemedyFollowsTheMode(t *testing.T) {
	_, res := run(t, "vgpu-fresh-mdev")
	c := one(t, res, "driver.nouveau", "0000:21:00.0", preflight.Container)
	require.Equal(t, preflight.Fail, c.Status)
	require.Equal(t, []preflight.Mode{preflight.Container}, c.Modes)
	require.False(t, c.Fixable)
	require.Empty(t, c.FixCommand)
	require.Contains(t, c.Remedy, "`blacklist nouveau` and `options nouveau modeset=0`")
	require.Contains(t, c.Remedy, "regenerate the initramfs")
	require.NotContains(t, c.Remedy, "vfio")

	p := one(t, res, "driver.nouveau", "0000:21:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, p.Status)
	require.True(t, p.Fixable)
	require.Equal(t, "gpuprep vfio bind --persist", p.FixCommand)

	v := one(t, res, "driver.nouveau", "0000:21:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, v.Status)
	require.Equal(t, "gpuprep vgpu install --driver NVIDIA-Linux-x86_64-VER-vgpu-kvm.run", v.FixCommand)
	require.NotContains(t, v.Remedy, "vfio")
	for _, m := range preflight.Modes {
		require.Contains(t, res.Modes[m].Blockers, "driver.nouveau", m)
	}
}

// T4s (sriov_totalvfs 16, mdev-based vGPU) moved to vfio-pci on a host with
// the vGPU manager: the cause is the binding, not SR-IOV VFs left disabled.
func TestVGPUNeedsTheGPUsOnNvidia(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.MdevVGPU(b)
	for _, a := range []string{"0000:21:00.0", "0000:41:00.0"} {
		b.Remove("/sys/bus/pci/drivers/nvidia/" + a).Remove(b.DevPath(a) + "/driver").Remove(b.DevPath(a) + "/mdev_supported_types")
		b.Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/vfio-pci").Remove("/sys/class/mdev_bus/" + a)
	}
	b.Mkdir("/sys/bus/pci/drivers/vfio-pci")
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	for _, a := range []string{"0000:21:00.0", "0000:41:00.0"} {
		f := one(t, res, "vfio.binding", a, preflight.VMVGPU)
		require.Equal(t, preflight.Fail, f.Status, f.Message)
		require.Equal(t, []preflight.Mode{preflight.VMVGPU}, f.Modes)
		require.Equal(t, "on driver vfio-pci: vGPUs need the GPU on the vGPU manager's nvidia driver", f.Message)
		require.Equal(t, "gpuprep vfio unbind --select "+a, f.FixCommand)
		require.Contains(t, f.Remedy, "removes gpuprep's persistent VFIO binding")

		ty := one(t, res, "vgpu.types", a, preflight.VMVGPU)
		require.Equal(t, preflight.Fail, ty.Status)
		require.Contains(t, ty.Message, "on driver vfio-pci")
		require.NotContains(t, ty.Message, "VFs")
		require.NotContains(t, ty.Remedy, "sriov-manage")
	}
	require.ElementsMatch(t, []string{"vfio.binding", "vgpu.types"}, res.Modes[preflight.VMVGPU].Blockers)
}

// An SR-IOV PF left without a driver, and the healthy cases.
func TestVGPUBindingPerDriver(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.SRIOVVGPU(b)
	b.Remove("/sys/bus/pci/drivers/nvidia/0000:41:00.0").Remove(b.DevPath("0000:41:00.0") + "/driver")
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := one(t, res, "vfio.binding", "0000:41:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "on no driver (unbound): vGPUs need the GPU on the vGPU manager's nvidia driver", f.Message)
	require.Contains(t, f.Remedy, "/sys/bus/pci/drivers/nvidia/bind")
	require.False(t, f.Fixable)

	for _, sc := range []string{"mdev-vgpu", "sriov-vgpu"} {
		_, res := run(t, sc)
		var n int
		for _, f := range res.Findings {
			if f.Check == "vfio.binding" && f.AppliesTo(preflight.VMVGPU) {
				n++
				require.Equal(t, preflight.Pass, f.Status, "%s: %s", sc, f.Message)
			}
		}
		require.NotZero(t, n, sc)
	}
}

// A T4 on nvidia offering no mdev types: sriov_totalvfs 16 does not make it
// an SR-IOV GPU, so the verdict is not "0 of 16 VFs enabled".
func TestT4IsNotAnSRIOVGPU(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.MdevVGPU(b)
	b.Remove(b.DevPath("0000:21:00.0") + "/mdev_supported_types").Remove("/sys/class/mdev_bus/0000:21:00.0")
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := one(t, res, "vgpu.types", "0000:21:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message, "no vGPU types offered: no mdev_supported_types")
	require.NotContains(t, f.Remedy, "sriov-manage")
	require.False(t, f.Fixable)
}

// A selected non-NVIDIA GPU is no container (or vGPU) GPU, whatever its
// driver; passthrough can still take it.
func TestNonNVIDIADeviceIsNotContainerReady(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.HGX(b)
	b.PCI(fixture.PCI{Addr: "0000:a1:00.0", Vendor: 0x1002, Device: 0x74a1, Class: 0x038000, Driver: "amdgpu", Group: 90, PCIeType: fixture.PCIeEndpoint})
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir, "0000:a1:00.0")
	c := one(t, res, "vfio.binding", "0000:a1:00.0", preflight.Container)
	require.Equal(t, preflight.Fail, c.Status)
	require.Equal(t, "not an NVIDIA device (vendor 1002, driver amdgpu): the GPU Operator's NVIDIA driver cannot drive it for containers", c.Message)
	require.Contains(t, c.Remedy, "select NVIDIA GPUs only")
	require.False(t, res.Modes[preflight.Container].Ready)
	require.Equal(t, []string{"vfio.binding"}, res.Modes[preflight.Container].Blockers)
	v := one(t, res, "vfio.binding", "0000:a1:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, v.Status)
	require.Contains(t, v.Message, "the NVIDIA vGPU manager cannot host vGPUs on it")
	p := one(t, res, "vfio.binding", "0000:a1:00.0", preflight.VMPassthrough)
	require.Equal(t, "gpuprep vfio bind --select 0000:a1:00.0 --persist", p.FixCommand)
}

// sriov-manage -e enables every VF and has exited 0 on failure: fewer VFs
// than sriov_totalvfs is worth a warning (facts: verify numvfs == totalvfs).
func TestPartlyEnabledVFsWarn(t *testing.T) {
	// one VF holds a vGPU (an H200X-141C): otherwise the GPU fails
	// (TestSRIOVWithoutVGPUsFails)
	withVGPU := func(b *fixture.Builder) {
		vf := b.DevPath("0000:41:00.4")
		b.File(vf+"/nvidia/current_vgpu_type", "1428\n").File(vf+"/nvidia/creatable_vgpu_types", "ID    : vGPU Name\n")
	}
	dir := build(t, fixture.SRIOVVGPU, withVGPU)
	_, res := runRoot(t, dir)
	f := one(t, res, "vgpu.types", "0000:41:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Warn, f.Status)
	require.Contains(t, f.Message, "vendor-specific VFIO, 4/16 VFs enabled (nvidia/creatable_vgpu_types): NVIDIA H200X-141C")
	require.Contains(t, f.Message, "only 4 of 16 SR-IOV VFs are enabled")
	require.Contains(t, f.Message, "; 1 vGPU exists")
	require.Contains(t, f.Remedy, "/usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.True(t, res.Modes[preflight.VMVGPU].Ready)

	dir = build(t, fixture.SRIOVVGPU, func(b *fixture.Builder) {
		withVGPU(b)
		b.File("/sys/bus/pci/devices/0000:41:00.0/sriov_numvfs", "16\n")
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "vgpu.types", "0000:41:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "16/16 VFs enabled")
}

// On the vendor-specific VFIO interface nothing in NVIDIA's stack creates
// vGPUs (vgpu-device-manager writes mdevs only): VFs that offer types but
// hold none leave KubeVirt nothing to allocate, and nothing will. On the
// mdev interface the GPU Operator's vgpu-device-manager creates them from
// the nvidia.com/vgpu.config label: no mdev yet is no blocker.
func TestSRIOVWithoutVGPUsFails(t *testing.T) {
	_, res := run(t, "sriov-vgpu")
	f := one(t, res, "vgpu.types", "0000:41:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "no vGPU exists (every VF's nvidia/current_vgpu_type is 0)")
	require.Contains(t, f.Message, "nothing in NVIDIA's stack creates vGPUs")
	require.Equal(t, "gpuprep vgpu apply -f vgpu-config.yaml -c NAME --persist", f.FixCommand)
	require.Contains(t, f.Remedy, "enable every VF first (/usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.False(t, res.Modes[preflight.VMVGPU].Ready)
	require.Contains(t, res.Modes[preflight.VMVGPU].Blockers, "vgpu.types")

	_, res = run(t, "mdev-vgpu")
	f = one(t, res, "vgpu.types", "0000:21:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "no mdev exists yet: the GPU Operator's vgpu-device-manager creates them from the node's nvidia.com/vgpu.config label")
	require.True(t, res.Modes[preflight.VMVGPU].Ready)
}

// pci-stub sets driver_managed_dma (and VFIO allowed it by name before
// 5.19): a sibling function on it keeps the group viable, unlike one on a
// host driver (TestMultifunctionSiblingOnHostDriverFailsBinding).
func TestSiblingOnPCIStubPassesBinding(t *testing.T) {
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.TuringMultifunction(b)
	for _, a := range []string{"0000:01:00.0", "0000:01:00.2", "0000:01:00.3"} {
		b.Remove(b.DevPath(a)+"/driver").Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	}
	b.Remove(b.DevPath("0000:01:00.1")+"/driver").Link(b.DevPath("0000:01:00.1")+"/driver", "/sys/bus/pci/drivers/pci-stub")
	b.Mkdir("/sys/bus/pci/drivers/vfio-pci").Mkdir("/sys/bus/pci/drivers/pci-stub")
	b.File("/etc/modprobe.d/vfio.conf", "options vfio_pci ids=10de:1e87,10de:1ad8,10de:1ad9\n").File("/etc/modules-load.d/vfio.conf", "vfio_pci\n") // at boot too
	require.NoError(t, b.Err())
	_, res := runRoot(t, dir)
	f := one(t, res, "vfio.binding", "0000:01:00.0", preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Equal(t, "bound to vfio-pci; 0000:01:00.1 (audio) on pci-stub, which keeps the IOMMU group viable (that function is not given to the VM)"+
		`; at the next boot: /etc/modprobe.d/vfio.conf:1 "options vfio_pci ids=10de:1e87,10de:1ad8,10de:1ad9" (modprobe: gives vfio-pci ID 10de:1e87 when it loads), vfio-pci loaded early by /etc/modules-load.d/vfio.conf:1 "vfio_pci" (systemd-modules-load: loads vfio-pci as the root's systemd starts, alongside udev's coldplug: in time where udev loads no other driver for the device)`+
		" (evidence: the root's files only: no initramfs image of kernel 6.1.0-18-amd64 in /boot)", f.Message)
	require.False(t, f.Fixable)
	require.NotContains(t, res.Modes[preflight.VMPassthrough].Blockers, "vfio.binding")
}

// The kubeadm drop-in runs kubelet ... $KUBELET_KUBEADM_ARGS
// $KUBELET_EXTRA_ARGS, and repeated --node-labels merge with a later value
// of a key winning: /etc/default/kubelet overrides kubeadm-flags.env. The
// flag's value may also be the next word.
func TestKubeletLabelAsTheKubeletReadsIt(t *testing.T) {
	for _, c := range []struct {
		name        string
		files       map[string]string
		value, file string
	}{
		{"extra args win over kubeadm args", map[string]string{
			"/etc/default/kubelet":               "KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\"\n",
			"/var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=container\"\n",
		}, "vm-passthrough", "/etc/default/kubelet"},
		{"space-separated value", map[string]string{
			"/var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-labels nvidia.com/gpu.workload.config=vm-passthrough\"\n",
		}, "vm-passthrough", "/var/lib/kubelet/kubeadm-flags.env"},
		{"repeated flag in one variable, last wins", map[string]string{
			"/etc/default/kubelet": "KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=container,a=b --node-labels a=c,nvidia.com/gpu.workload.config=vm-vgpu\"\n",
		}, "vm-vgpu", "/etc/default/kubelet"},
		{"variable set twice: the last assignment counts", map[string]string{
			"/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-vgpu\nKUBELET_EXTRA_ARGS=--node-labels=nvidia.com/gpu.workload.config=vm-passthrough\n",
		}, "vm-passthrough", "/etc/default/kubelet"},
	} {
		dir := t.TempDir()
		b := fixture.New(dir)
		fixture.HGX(b)
		for f, content := range c.files {
			b.File(f, content)
		}
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		mode := preflight.Mode(c.value)
		f := find(res, want{"node.label", "nvidia.com/gpu.workload.config=" + c.value, "", mode})
		require.Len(t, f, 1, "%s: %+v", c.name, res.Findings)
		require.Contains(t, f[0].Message, "set in "+c.file, c.name)
		other := preflight.Container
		if mode == preflight.Container {
			other = preflight.VMPassthrough
		}
		o := one(t, res, "node.label", "nvidia.com/gpu.workload.config="+c.value, other)
		require.Equal(t, preflight.Fail, o.Status, c.name)
		require.Contains(t, o.Message, "labels this node for "+c.value, c.name)
	}
}

// GPUs on vfio-pci with the NVSwitches left on nvidia: gpu.present no longer
// claims the NVSwitches go with the GPUs, and vfio.binding warns, naming
// them; with the NVSwitches on vfio-pci too it passes.
func TestNVSwitchesLeftOnTheHost(t *testing.T) {
	build := func(switchesToo bool) *preflight.Result {
		dir := t.TempDir()
		b := fixture.New(dir)
		fixture.HGX(b)
		var addrs []string
		for i := 0; i < 8; i++ {
			addrs = append(addrs, fmt.Sprintf("0000:%02x:00.0", 0x13+i*0x10))
		}
		if switchesToo {
			for i := 0; i < 4; i++ {
				addrs = append(addrs, fmt.Sprintf("0000:%02x:00.0", 0x91+i*2))
			}
		}
		for _, a := range addrs {
			b.Remove("/sys/bus/pci/drivers/nvidia/" + a).Remove(b.DevPath(a) + "/driver")
			b.Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/vfio-pci")
		}
		b.Mkdir("/sys/bus/pci/drivers/vfio-pci")
		if !switchesToo {
			for i := 0; i < 4; i++ {
				a := fmt.Sprintf("0000:%02x:00.0", 0x91+i*2)
				b.Remove(b.DevPath(a)+"/driver").Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/nvidia")
			}
		}
		b.Module("vfio_pci", nil).Module("vfio", nil).Module("vfio_iommu_type1", nil)
		require.NoError(t, b.Err())
		_, res := runRoot(t, dir)
		return res
	}
	const sw = "0000:91:00.0,0000:93:00.0,0000:95:00.0,0000:97:00.0"
	res := build(false)
	g := one(t, res, "gpu.present", sw, preflight.VMPassthrough)
	require.NotContains(t, g.Message, "passed through with the GPUs")
	require.Contains(t, g.Message, "(4 on nvidia)")
	f := one(t, res, "vfio.binding", sw, preflight.VMPassthrough)
	require.Equal(t, preflight.Warn, f.Status)
	require.Equal(t, []preflight.Mode{preflight.VMPassthrough}, f.Modes)
	require.Contains(t, f.Message, "4 of 4 NVSwitches not on a VFIO driver: 0000:91:00.0 (driver nvidia)")
	require.Equal(t, "gpuprep vfio bind --nvswitch --persist", f.FixCommand)
	require.Empty(t, find(res, want{"vfio.binding", sw, "", preflight.Container}))

	res = build(true)
	f = one(t, res, "vfio.binding", sw, preflight.VMPassthrough)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, one(t, res, "gpu.present", sw, preflight.VMPassthrough).Message, "(4 on vfio-pci)")
	// on VFIO they are lost to the host's Fabric Manager: containers and
	// vGPUs fail (CUDA does not start on an NVSwitch system without it)
	for _, m := range []preflight.Mode{preflight.Container, preflight.VMVGPU} {
		f = one(t, res, "vfio.binding", sw, m)
		require.Equal(t, preflight.Fail, f.Status, m)
		require.Contains(t, f.Message, "4 of 4 NVSwitches on a VFIO driver: 0000:91:00.0 (vfio-pci)", m)
		require.Contains(t, f.Message, "Fabric Manager", m)
		require.Equal(t, "gpuprep vfio unbind --at-boot --nvswitch", f.FixCommand, m)
	}
}

// A GPU or NVSwitch with no driver is fine for containers only while the
// NVIDIA driver is not loaded (its driver container loads it and it takes
// them): once loaded it does not take a device unbound later, and a
// driver_override naming another driver keeps it off for good.
func TestUnboundDevicesWhileNVIDIALoaded(t *testing.T) {
	const gpu, other, sw = "0000:13:00.0", "0000:23:00.0", "0000:91:00.0"
	const sws = "0000:91:00.0,0000:93:00.0,0000:95:00.0,0000:97:00.0"
	unbind := func(b *fixture.Builder, a, drv string) {
		b.Remove("/sys/bus/pci/drivers/" + drv + "/" + a).Remove(b.DevPath(a) + "/driver")
	}
	dir := build(t, fixture.HGX, func(b *fixture.Builder) {
		unbind(b, gpu, "nvidia")
		unbind(b, other, "nvidia")
		b.File(b.DevPath(other)+"/driver_override", "vfio-pci\n")
		unbind(b, sw, "nvidia-nvswitch")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "no driver bound while nvidia is loaded")
	require.Contains(t, f.Remedy, "echo 0000:13:00.0 > /sys/bus/pci/drivers_probe")
	f = one(t, res, "vfio.binding", other, preflight.Container)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, `driver_override is "vfio-pci"`)
	require.Equal(t, "gpuprep vfio unbind --select 0000:23:00.0", f.FixCommand)
	for _, m := range []preflight.Mode{preflight.Container, preflight.VMVGPU} {
		f = one(t, res, "vfio.binding", sw, m)
		require.Equal(t, preflight.Fail, f.Status, f.Message)
		require.Contains(t, f.Message, "no driver bound while nvidia-nvswitch is loaded")
		require.Contains(t, f.Message, "Fabric Manager")
	}
	require.Empty(t, find(res, want{"vfio.binding", sws, "", preflight.Container}), "the others are on nvidia-nvswitch")

	// before the NVIDIA driver is loaded, unbound is what a fresh node looks like
	dir = build(t, fixture.HGX, func(b *fixture.Builder) {
		for _, d := range []string{"nvidia", "nvidia-nvswitch"} {
			b.Remove("/sys/bus/pci/drivers/" + d)
		}
		b.Remove("/sys/module/nvidia")
		for i := 0; i < 8; i++ {
			b.Remove(b.DevPath(fmt.Sprintf("0000:%02x:00.0", 0x13+i*0x10)) + "/driver")
		}
		for i := 0; i < 4; i++ {
			b.Remove(b.DevPath(fmt.Sprintf("0000:%02x:00.0", 0x91+i*2)) + "/driver")
		}
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Empty(t, find(res, want{"vfio.binding", sw, "", preflight.Container}))
}

// An SR-IOV VF on vfio-pci hosts no vGPU (the VFs stay on nvidia, their VFIO provider): vm-vgpu fails on it, naming
// the VF; the VFs left on nvidia are fine.
func TestSRIOVVFOnVFIOFails(t *testing.T) {
	dir := build(t, fixture.SRIOVVGPU, func(b *fixture.Builder) {
		a := "0000:41:00.5"
		b.Remove("/sys/bus/pci/drivers/nvidia/" + a)
		b.Remove(b.DevPath(a) + "/driver")
		b.Mkdir("/sys/bus/pci/drivers/vfio-pci")
		b.Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	})
	_, res := runRoot(t, dir)
	f := one(t, res, "vgpu.types", "0000:41:00.5")
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message, "SR-IOV VF of 0000:41:00.0 on vfio-pci")
	require.Contains(t, f.Remedy, "sriov-manage -d 0000:41:00.0")
	require.Empty(t, find(res, want{check: "vgpu.types", subject: "0000:41:00.4"}), "a VF on nvidia is not a finding of its own")
	require.False(t, res.Modes[preflight.VMVGPU].Ready)
	require.Contains(t, res.Modes[preflight.VMVGPU].Blockers, "vgpu.types")
}

// vm-passthrough's vfio.binding fix is offered only where vfio bind takes
// it: not without IOMMU groups, not for a group holding host devices; for
// two GPUs sharing a group it selects both.
func TestBindFixOnlyWhereVFIOBindTakesIt(t *testing.T) {
	for _, c := range []struct {
		scenario, gpu, fix, remedy string
	}{
		{"iommu-off-kernel", "0000:17:00.0", "", "enable the IOMMU first"},
		{"consumer-shared-group", "0000:02:00.0", "", "see iommu.groups"},
		{"two-gpus-one-group", "0000:03:00.0", "gpuprep vfio bind --select 0000:03:00.0 --select 0000:04:00.0 --persist", ""},
		{"hgx-h200", "0000:13:00.0", "gpuprep vfio bind --select 0000:13:00.0 --persist", ""},
	} {
		dir := t.TempDir()
		require.NoError(t, fixture.Build(c.scenario, dir))
		_, res := runRoot(t, dir)
		f := one(t, res, "vfio.binding", c.gpu, preflight.VMPassthrough)
		require.Equal(t, preflight.Fail, f.Status, c.scenario)
		require.Equal(t, c.fix != "", f.Fixable, c.scenario)
		require.Equal(t, c.fix, f.FixCommand, c.scenario)
		require.Contains(t, f.Remedy, c.remedy, c.scenario)
	}
}

// GeForce boards cannot host NVIDIA vGPU: vm-vgpu on an RTX 4090 fails in
// vgpu.support, and vgpu.manager does not send the user to buy the licensed
// vGPU manager for it.
func TestGeForceCannotHostVGPU(t *testing.T) {
	_, res := run(t, "consumer-shared-group")
	f := one(t, res, "vgpu.support", "0000:02:00.0", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Equal(t, "GeForce RTX 4090 (10de:2684) is a consumer GeForce/TITAN board: NVIDIA vGPU does not support it, whatever the driver or license", f.Message)
	require.Contains(t, f.Remedy, "--mode vm-passthrough")
	m := one(t, res, "vgpu.manager", "nvidia vGPU manager", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, m.Status)
	require.Contains(t, m.Message, "0000:02:00.0 (GeForce RTX 4090): consumer GeForce/TITAN board, which NVIDIA vGPU does not support")
	require.NotContains(t, m.Remedy, "licensed")
	require.NotContains(t, m.Remedy, "vgpu install")
	require.False(t, m.Fixable)
	require.Contains(t, res.Modes[preflight.VMVGPU].Blockers, "vgpu.support")

	// a data-center board is not one
	_, res = run(t, "vgpu-fresh-sriov")
	m = one(t, res, "vgpu.manager", "nvidia vGPU manager", preflight.VMVGPU)
	require.Contains(t, m.Remedy, "install the licensed NVIDIA vGPU manager")
	require.NotContains(t, m.Message, "GeForce")
}

// On kernel ≥ 6.8 the vGPU manager serves SR-IOV GPUs through the
// vendor-specific VFIO framework (no nvidia_vgpu_vfio, no mdev bus): the
// evidence and subjects name that interface, not mdev; a kernel 5.15 host
// with a T4 keeps the mdev ones.
func TestNoManagerEvidenceNamesTheInterface(t *testing.T) {
	_, res := run(t, "vgpu-fresh-sriov")
	m := one(t, res, "vgpu.manager", "nvidia vGPU manager", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, m.Status)
	require.Equal(t, "no NVIDIA vGPU manager: no nvidia-vgpu-mgr, no /usr/lib/nvidia/sriov-manage (on kernel 6.8.0-45-generic the vGPU manager, vGPU 17+, serves SR-IOV GPUs through the vendor-specific VFIO framework: VFs with nvidia/creatable_vgpu_types, not mdev)", m.Message)
	for _, c := range []string{"vgpu.types", "vgpu.support"} {
		f := one(t, res, c, "/sys/bus/pci/devices/*/nvidia/creatable_vgpu_types", preflight.VMVGPU)
		require.Equal(t, preflight.Skip, f.Status)
	}
	for _, f := range res.Findings {
		if f.AppliesTo(preflight.VMVGPU) {
			require.NotContains(t, f.Subject+f.Message, "mdev_bus", f.Check)
		}
	}

	_, res = run(t, "vgpu-fresh-mdev")
	m = one(t, res, "vgpu.manager", "nvidia vGPU manager", preflight.VMVGPU)
	require.Equal(t, "no NVIDIA vGPU manager: module nvidia_vgpu_vfio not loaded, no nvidia-vgpu-mgr, /sys/class/mdev_bus empty", m.Message)
	one(t, res, "vgpu.types", "/sys/class/mdev_bus", preflight.VMVGPU)
}

// vfio.binding's vm-vgpu pass on nvidia says what holds: "once the vGPU
// manager is installed" only where it is not, nothing about vGPUs on a
// GeForce board.
func TestVGPUBindingMessageFollowsTheManager(t *testing.T) {
	for sc, want := range map[string]string{
		"sriov-vgpu":            "on driver nvidia, where the installed vGPU manager hosts vGPUs (see vgpu.types)",
		"mdev-vgpu":             "on driver nvidia, where the installed vGPU manager hosts vGPUs (see vgpu.types)",
		"hgx-h200":              "on driver nvidia, which hosts vGPUs once the vGPU manager is installed (see vgpu.manager)",
		"consumer-shared-group": "on driver nvidia (a GeForce/TITAN board hosts no vGPU: see vgpu.support)",
	} {
		env, res := run(t, sc)
		f := one(t, res, "vfio.binding", env.GPUs[0].Address, preflight.VMVGPU)
		require.Equal(t, preflight.Pass, f.Status, sc)
		require.Equal(t, want, f.Message, sc)
	}
}

// On a GeForce board no vm-vgpu remedy sends the user to install the vGPU
// manager: not driver.nouveau's, not node.label's for a vm-vgpu label.
func TestGeForceVGPURemediesDoNotInstall(t *testing.T) {
	dir := build(t, fixture.ConsumerShared, func(b *fixture.Builder) {
		a := "0000:02:00.0"
		b.Remove("/sys/bus/pci/drivers/nvidia/" + a).Remove(b.DevPath(a) + "/driver")
		b.Link(b.DevPath(a)+"/driver", "/sys/bus/pci/drivers/nouveau")
		b.Module("nouveau", nil).Remove("/etc/modprobe.d/blacklist-nouveau.conf")
		b.File("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=\"--node-labels=nvidia.com/gpu.workload.config=vm-vgpu\"\n")
	})
	_, res := runRoot(t, dir)
	for _, f := range res.Findings {
		if f.AppliesTo(preflight.VMVGPU) && (f.Check == "driver.nouveau" || f.Check == "node.label") {
			require.NotContains(t, f.Remedy, "vgpu install", "%s: %s", f.Check, f.Remedy)
			require.NotContains(t, f.FixCommand, "vgpu install", f.Check)
		}
	}
	f := one(t, res, "node.label", "nvidia.com/gpu.workload.config=vm-vgpu", preflight.VMVGPU)
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message+f.Remedy, "cannot host NVIDIA vGPU")
}

// Containers need an NVIDIA GPU on the NVIDIA datacenter driver: not on the
// vGPU manager's nvidia driver (vgpu-kvm: no CUDA on the host, and the
// driver container cannot load over it), not on another driver such as
// pci-stub (a loaded NVIDIA driver never takes a device bound elsewhere).
func TestContainerNeedsTheDatacenterDriver(t *testing.T) {
	const gpu = "0000:01:00.0"
	_, res := runRoot(t, build(t, fixture.TuringMultifunction, nil))
	f := one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Equal(t, "on driver nvidia", f.Message)

	dir := build(t, fixture.TuringMultifunction, func(b *fixture.Builder) {
		b.Remove("/sys/bus/pci/drivers/nvidia/" + gpu).Remove(b.DevPath(gpu) + "/driver")
		b.Mkdir("/sys/bus/pci/drivers/pci-stub")
		b.Link(b.DevPath(gpu)+"/driver", "/sys/bus/pci/drivers/pci-stub")
	})
	_, res = runRoot(t, dir)
	f = one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "on driver pci-stub: the NVIDIA driver never takes a device bound to another driver")
	require.Contains(t, f.Remedy, "echo 0000:01:00.0 > /sys/bus/pci/devices/0000:01:00.0/driver/unbind")
	require.Contains(t, f.Remedy, "pci-stub.ids=")

	// an mdev bus of another driver (i915 GVT-g) or a stray sriov-manage is
	// no vGPU manager
	_, res = runRoot(t, build(t, fixture.TuringMultifunction, func(b *fixture.Builder) {
		b.Mkdir("/sys/class/mdev_bus/0000:00:02.0").File("/usr/lib/nvidia/sriov-manage", "#!/bin/sh\n")
	}))
	f = one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Pass, f.Status, f.Message)

	for name, sc := range map[string]func(*fixture.Builder){"mdev": fixture.MdevVGPU, "sriov": fixture.SRIOVVGPU} {
		_, res = runRoot(t, build(t, sc, nil))
		var fs []preflight.Finding
		for _, f := range res.Findings {
			if f.Check == "vfio.binding" && len(f.Modes) == 1 && f.Modes[0] == preflight.Container {
				fs = append(fs, f)
			}
		}
		require.NotEmpty(t, fs, name)
		for _, f := range fs {
			require.Equal(t, preflight.Fail, f.Status, "%s: %s", name, f.Message)
			require.Contains(t, f.Message, "on the NVIDIA vGPU manager's nvidia driver (", name)
			require.Contains(t, f.Remedy, "a node runs one GPU workload type", name)
		}
	}
}

// A GPU on vfio-pci that nothing binds at boot (vfio bind without
// --persist, a driver_override by hand) is back on its host driver after a
// reboot: vm-passthrough warns and offers the --persist bind. Each thing
// that does bind it at boot counts.
func TestVFIOBindingThatDoesNotOutliveAReboot(t *testing.T) {
	const gpu = "0000:11:00.0"
	const ids = "options vfio-pci ids=10de:2331\n"
	onCmdline := func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=UUID=1 ro intel_iommu=on vfio_pci.ids=10de:2331\n")
		b.File("/etc/default/grub.d/vfio.cfg", `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX vfio_pci.ids=10de:2331"`+"\n")
	}
	for name, c := range map[string]struct {
		edit func(*fixture.Builder)
		warn bool
	}{
		"live bind only": {nil, true},
		"modprobe.d ids and a softdep": {func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", ids+"softdep nvidia pre: vfio-pci\n")
			b.ModuleFiles("6.8.0-45-generic", []string{"kernel/drivers/vfio/pci/vfio-pci.ko", "updates/dkms/nvidia.ko"}, nil, nil)
		}, false},
		// nvidia not installed (the GPU Operator's driver container brings it): the softdep never fires
		"modprobe.d ids and a softdep on an absent module": {func(b *fixture.Builder) { b.File("/etc/modprobe.d/vfio.conf", ids+"softdep nvidia pre: vfio-pci\n") }, true},
		"modprobe.d ids and modules-load.d": {func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", ids).File("/etc/modules-load.d/vfio.conf", "vfio_pci\n")
		}, false},
		"modprobe.d ids, nothing loads vfio-pci": {func(b *fixture.Builder) { b.File("/etc/modprobe.d/vfio.conf", ids) }, true},
		"another device's": {func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", "options vfio-pci ids=10de:2330\nsoftdep nvidia pre: vfio-pci\n")
		}, true},
		"not a .conf": {func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf.bak", ids+"softdep nvidia pre: vfio-pci\n")
		}, true},
		"kernel command line, vfio-pci loaded early": {func(b *fixture.Builder) {
			onCmdline(b)
			b.File("/etc/modules-load.d/vfio.conf", "vfio-pci\n")
		}, false},
		"kernel command line, nothing loads vfio-pci": {onCmdline, true},
		"running command line only": {func(b *fixture.Builder) {
			b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=UUID=1 ro intel_iommu=on vfio_pci.ids=10de:2331\n")
			b.File("/etc/modules-load.d/vfio.conf", "vfio-pci\n")
		}, true}, // gone from the configuration: not at the next boot
		"driverctl": {func(b *fixture.Builder) {
			b.File("/etc/driverctl.d/pci-"+gpu, "vfio-pci\n")
		}, false},
		"a udev rule": {func(b *fixture.Builder) {
			b.File("/etc/udev/rules.d/50-vfio.rules", `ACTION=="add", KERNEL=="`+gpu+`", ATTR{driver_override}="vfio-pci"`+"\n")
		}, false},
		"a udev rule of another device": {func(b *fixture.Builder) {
			b.File("/etc/udev/rules.d/50-vfio.rules", "# vfio for "+gpu+" is elsewhere\n"+`ACTION=="add", KERNEL=="0000:21:00.0", ATTR{driver_override}="vfio-pci"`+"\n")
		}, true},
		"gpuprep's": {func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/gpuprep-vfio.conf", "# gpuprep-devices: "+gpu+"=vfio-pci\noptions vfio-pci ids=10de:2331\n")
		}, false},
	} {
		_, res := runRoot(t, build(t, fixture.VFIOBound, c.edit))
		f := one(t, res, "vfio.binding", gpu, preflight.VMPassthrough)
		if !c.warn {
			require.Equal(t, preflight.Pass, f.Status, "%s: %s", name, f.Message)
			continue
		}
		require.Equal(t, preflight.Warn, f.Status, "%s: %s", name, f.Message)
		require.Contains(t, f.Message, "bound to vfio-pci until the next boot: nothing binds it to VFIO at boot", name)
		require.Equal(t, "gpuprep vfio bind --select "+gpu+" --persist", f.FixCommand, name)
		require.True(t, res.Modes[preflight.VMPassthrough].Ready, "%s: a warning, the node is ready until it reboots", name)
	}
}

// On a board with NVSwitches GPUs leave vfio-pci at boot (vfio unbind
// --at-boot drops gpuprep's configuration and asks for a reboot): a GPU
// still on vfio-pci that nothing binds at boot any more needs the reboot,
// not the same command again.
func TestContainerOnNVSwitchBoardAfterUnbindAtBoot(t *testing.T) {
	const gpu = "0000:13:00.0"
	onVFIO := func(b *fixture.Builder) {
		b.Remove("/sys/bus/pci/drivers/nvidia/" + gpu).Remove(b.DevPath(gpu) + "/driver")
		b.Mkdir("/sys/bus/pci/drivers/vfio-pci")
		b.Link(b.DevPath(gpu)+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	}
	_, res := runRoot(t, build(t, fixture.HGX, onVFIO))
	f := one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Fail, f.Status)
	require.Contains(t, f.Message, "until the next boot: nothing binds it to VFIO at boot any more")
	require.False(t, f.Fixable)
	require.Contains(t, f.Remedy, "reboot the node")

	_, res = runRoot(t, build(t, fixture.HGX, func(b *fixture.Builder) {
		onVFIO(b)
		b.File("/etc/modprobe.d/gpuprep-vfio.conf", "# gpuprep-devices: "+gpu+"=vfio-pci\n")
	}))
	f = one(t, res, "vfio.binding", gpu, preflight.Container)
	require.Equal(t, preflight.Fail, f.Status)
	require.Equal(t, "gpuprep vfio unbind --at-boot --select "+gpu, f.FixCommand)
}

// nouveau loaded though no selected GPU uses it: with the blacklist there,
// the remedy is to unload it (and to regenerate an initramfs that predates
// the blacklist), not to blacklist it again.
func TestNouveauLoadedButUnusedRemedy(t *testing.T) {
	loaded := func(b *fixture.Builder) { b.Module("nouveau", nil) }
	_, res := runRoot(t, build(t, fixture.TuringMultifunction, func(b *fixture.Builder) {
		loaded(b)
		b.Remove("/etc/modprobe.d/blacklist-nouveau.conf")
	}))
	f := one(t, res, "driver.nouveau", "/sys/module/nouveau")
	require.Equal(t, preflight.Warn, f.Status)
	require.Contains(t, f.Message, "not blacklisted")
	require.Equal(t, "blacklist nouveau and regenerate the initramfs, then unload it (modprobe -r nouveau) or reboot", f.Remedy)

	_, res = runRoot(t, build(t, fixture.TuringMultifunction, func(b *fixture.Builder) {
		loaded(b)
		b.File("/boot/initrd.img-6.1.0-18-amd64", "initramfs").Touch("/boot/initrd.img-6.1.0-18-amd64", fixture.BootTime.Add(2*time.Hour))
		b.Touch("/etc/modprobe.d/blacklist-nouveau.conf", fixture.BootTime.Add(time.Hour))
	}))
	f = one(t, res, "driver.nouveau", "/sys/module/nouveau")
	require.Equal(t, preflight.Warn, f.Status)
	require.Contains(t, f.Message, "blacklisted in /etc/modprobe.d/blacklist-nouveau.conf")
	require.Equal(t, "unload it: modprobe -r nouveau (or reboot; it drives no selected GPU)", f.Remedy)

	_, res = runRoot(t, build(t, fixture.TuringMultifunction, func(b *fixture.Builder) {
		loaded(b)
		b.File("/boot/initrd.img-6.1.0-18-amd64", "initramfs").Touch("/boot/initrd.img-6.1.0-18-amd64", fixture.BootTime)
		b.Touch("/etc/modprobe.d/blacklist-nouveau.conf", fixture.BootTime.Add(time.Hour))
	}))
	f = one(t, res, "driver.nouveau", "/sys/module/nouveau")
	require.Contains(t, f.Remedy, "the initramfs (/boot/initrd.img-6.1.0-18-amd64) predates /etc/modprobe.d/blacklist-nouveau.conf: regenerate it")
}
