package preflight_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
)

// grace builds the gh200 scenario, changed by edit, and runs every check
// with log as the kernel log ("" for one that cannot be read, as dmesg
// under kernel.dmesg_restrict).
func grace(t *testing.T, log string, edit func(b *fixture.Builder)) (*preflight.Env, *preflight.Result) {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	fixture.GH200(b)
	if edit != nil {
		edit(b)
	}
	require.NoError(t, b.Err())
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	sel, err := pci.ParseSelector(nil)
	require.NoError(t, err)
	env, err := preflight.NewEnv(root, host.NoRunner{}, sel, "")
	require.NoError(t, err)
	env.KernelLog = func() ([]byte, error) {
		if log == "" {
			return nil, errors.New("dmesg: read kernel buffer failed: Operation not permitted")
		}
		return []byte(log), nil
	}
	res, err := preflight.Run(env, preflight.All(), preflight.Options{})
	require.NoError(t, err)
	return env, res
}

// only is the single finding of check.
func only(t *testing.T, res *preflight.Result, check string) preflight.Finding {
	t.Helper()
	var fs []preflight.Finding
	for _, f := range res.Findings {
		if f.Check == check {
			fs = append(fs, f)
		}
	}
	require.Len(t, fs, 1, "findings of %s: %+v", check, fs)
	return fs[0]
}

func noMisc(b *fixture.Builder) { b.Remove("/sys/class/misc").Remove("/sys/devices/virtual/misc") }

func TestGH200CPUVirtualization(t *testing.T) {
	// KVM's own registration: /dev/kvm and /sys/class/misc/kvm
	env, res := grace(t, "", nil)
	require.Equal(t, preflight.ArchARM64, env.Arch)
	f := only(t, res, "cpu.virtualization")
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "/sys/class/misc/kvm registered")
	require.Contains(t, f.Message, "the kernel log is not readable (dmesg: read kernel buffer failed")
	require.NotContains(t, f.Message+f.Remedy, "vendor")

	// the kernel log's initialisation line, without the misc registration
	_, res = grace(t, fixture.GraceKernelLog, noMisc)
	f = only(t, res, "cpu.virtualization")
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, `"kvm [1]: VHE mode initialized successfully"`)

	// /dev/kvm alone: not enough
	_, res = grace(t, "", noMisc)
	f = only(t, res, "cpu.virtualization")
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "no /sys/class/misc/kvm in this root, and the kernel log is not readable")

	// nothing at all: unknown, not a pass
	_, res = grace(t, "", func(b *fixture.Builder) { noMisc(b); b.Remove("/dev/kvm") })
	f = only(t, res, "cpu.virtualization")
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "cannot tell whether the firmware entered the kernel at EL2")
}

func TestGH200CPUVirtualizationFails(t *testing.T) {
	noKVM := func(b *fixture.Builder) { noMisc(b); b.Remove("/dev/kvm") }
	for _, c := range []struct {
		name, log, want string
		edit            func(b *fixture.Builder)
	}{
		// arch/arm64/kvm/arm.c: kvm_arm_init without EL2
		{"no EL2", "[    0.112233] CPU: All CPU(s) started at EL1\n[    0.912345] kvm [1]: HYP mode not available\n", "did not enter the kernel at EL2", noKVM},
		{"EL1 only", "[    0.112233] CPU: All CPU(s) started at EL1\n", "without EL2 there is no KVM", noKVM},
		{"mixed", "[    0.112233] CPU: CPUs started in inconsistent modes\n", "some CPUs at EL2 and others at EL1", noKVM},
		{"mode=none", "", "kvm-arm.mode=none in /proc/cmdline", func(b *fixture.Builder) {
			noKVM(b)
			b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro kvm-arm.mode=none\n")
		}},
		{"no CONFIG_KVM", "", "built without KVM", func(b *fixture.Builder) {
			noKVM(b)
			b.File("/boot/config-"+fixture.GH200Kernel, "CONFIG_ARM64=y\n# CONFIG_KVM is not set\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, res := grace(t, c.log, c.edit)
			f := only(t, res, "cpu.virtualization")
			require.Equal(t, preflight.Fail, f.Status, f.Message)
			require.Contains(t, f.Message, c.want)
		})
	}
}

func TestGH200KVMDeviceRemedy(t *testing.T) {
	_, res := grace(t, "", nil)
	f := only(t, res, "kvm.device")
	require.Equal(t, preflight.Pass, f.Status, f.Message) // not "from neither kvm_intel nor kvm_amd"

	_, res = grace(t, "", func(b *fixture.Builder) { b.Remove("/dev/kvm") })
	f = only(t, res, "kvm.device")
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.NotContains(t, f.Remedy, "kvm_intel")
	require.NotContains(t, f.Remedy, "modprobe")
	require.Contains(t, f.Remedy, "EL2")
}

func TestGH200ArchFromCPUInfo(t *testing.T) {
	// a capture without /proc/sys/kernel/arch (kernels before 6.1): the
	// shape of /proc/cpuinfo tells
	env, res := run(t, "gh200-capture")
	require.Equal(t, preflight.ArchARM64, env.Arch)
	require.Equal(t, "0x41", env.CPU.Implementer)
	require.Equal(t, "0xd4f", env.CPU.Part)
	require.NotEqual(t, preflight.Error, only(t, res, "cpu.virtualization").Status)
}

func TestGH200IOMMUFirmware(t *testing.T) {
	_, res := grace(t, "", nil)
	f := only(t, res, "iommu.firmware")
	require.Equal(t, preflight.Pass, f.Status, f.Message)
	require.Contains(t, f.Message, "ACPI IORT with 5 SMMUv3 (at 0x11000000, 0x12000000, 0x15000000, 0x16000000, 0x5000000)")

	for _, c := range []struct {
		name string
		edit func(b *fixture.Builder)
		want preflight.Status
		msg  string
	}{
		{"IORT without SMMU", func(b *fixture.Builder) {
			b.Bytes("/sys/firmware/acpi/tables/IORT", fixture.IORTTable(nil, 1))
		}, preflight.Fail, "the ACPI IORT describes no SMMU (1 ITS groups"},
		{"IORT unreadable, SMMUs registered", func(b *fixture.Builder) {
			b.Bytes("/sys/firmware/acpi/tables/IORT", fixture.IORTTable(nil, 1)[:40])
		}, preflight.Pass, "the kernel registered smmu3.0x0000000005000000"},
		{"IORT unreadable, no SMMU registered", func(b *fixture.Builder) {
			b.Bytes("/sys/firmware/acpi/tables/IORT", []byte("IORT"))
			b.Remove("/sys/class/iommu").Mkdir("/sys/class/iommu")
		}, preflight.Warn, "cannot tell whether the firmware describes one"},
		{"device tree with SMMU", func(b *fixture.Builder) {
			b.Remove("/sys/firmware/acpi").Mkdir("/sys/firmware/devicetree/base")
		}, preflight.Pass, "device-tree platform: the kernel registered smmu3."},
		{"device tree without SMMU", func(b *fixture.Builder) {
			b.Remove("/sys/firmware/acpi").Mkdir("/sys/firmware/devicetree/base")
			b.Remove("/sys/class/iommu").Mkdir("/sys/class/iommu")
		}, preflight.Warn, "gpuprep does not read the device tree's iommus/iommu-map"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, res := grace(t, "", c.edit)
			f := only(t, res, "iommu.firmware")
			require.Equal(t, c.want, f.Status, f.Message)
			require.Contains(t, f.Message, c.msg)
			require.NotContains(t, f.Message+f.Remedy, "DMAR")
		})
	}
}

func TestGH200MSIIsolation(t *testing.T) {
	for _, c := range []struct {
		name  string
		chips []string
		want  preflight.Status
		msg   string
	}{
		{"ITS", []string{"GICv3", "ITS-MSI", "ITS-PCI-MSIX-0009:01:00.0"}, preflight.Pass, "MSIs isolated: they go through the GICv3 ITS (IRQ chips ITS-MSI, ITS-PCI-MSIX-0009:01:00.0)"},
		{"GICv2m", []string{"GICv3", "GICv2m-PCI-MSI"}, preflight.Fail, "MSIs go through GICv2m-PCI-MSI, not a GICv3 ITS"},
		{"mixed", []string{"ITS-MSI", "MBI-PCI-MSI"}, preflight.Warn, "others through MBI-PCI-MSI"},
		{"no MSI yet", []string{"GICv3", "GICv3"}, preflight.Warn, "cannot tell whether MSIs would go through a GICv3 ITS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, res := grace(t, "", func(b *fixture.Builder) { b.Interrupts(c.chips...) })
			f := only(t, res, "iommu.interrupt-remapping")
			require.Equal(t, c.want, f.Status, f.Message)
			require.Contains(t, f.Message, c.msg)
			require.NotContains(t, f.Message+f.Remedy, "IR-")
		})
	}
}

func TestGH200KernelArgs(t *testing.T) {
	env, res := grace(t, "", nil)
	k := env.KernelArgs()
	require.Equal(t, "arm", k.Vendor)
	require.Equal(t, []kargs.Param{{Key: "iommu.passthrough", Value: "1", HasValue: true}}, k.Needed)
	require.Empty(t, k.NotOff, "intel_iommu=, amd_iommu=, iommu= and intremap= are x86 parameters")
	f := only(t, res, "iommu.cmdline")
	require.Equal(t, "iommu.passthrough=1", f.Subject)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Equal(t, "gpuprep grub ensure --mode vm-passthrough", f.FixCommand)

	// running and configured; iommu=pt (x86 only) does not stand in for it
	_, res = grace(t, "", func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro iommu.passthrough=1\n")
		b.File("/etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu.passthrough=1\"\n")
		b.File("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz root=/dev/nvme0n1p2 ro quiet iommu.passthrough=1\n}\n") // the menu made from it
	})
	require.Equal(t, preflight.Pass, only(t, res, "iommu.cmdline").Status, only(t, res, "iommu.cmdline").Message)
	_, res = grace(t, "", func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro iommu=pt\n")
		b.File("/etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=pt\"\n")
	})
	require.Equal(t, preflight.Warn, only(t, res, "iommu.cmdline").Status)

	// intel_iommu=off on an arm64 kernel turns nothing off
	_, res = grace(t, "", func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro intel_iommu=off iommu.passthrough=1\n")
	})
	for _, f := range res.Findings {
		if f.Check == "iommu.cmdline" && f.Subject == "intel_iommu=off" {
			require.Equal(t, preflight.Warn, f.Status, f.Message)
			require.Contains(t, f.Message, "an x86 kernel parameter, and this node is arm64")
			return
		}
	}
	t.Fatal("no finding about intel_iommu=off")
}

func TestGH200NodeKernelArgsNeverIntel(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fixture.Build("gh200-capture", dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	k, err := preflight.NodeKernelArgs(root)
	require.NoError(t, err)
	for _, p := range append(append([]kargs.Param{}, k.Wanted...), k.Needed...) {
		require.False(t, strings.Contains(p.Key, "intel") || strings.Contains(p.Key, "amd") || p.Key == "iommu", p.String())
	}
	require.Equal(t, "iommu.passthrough=1", k.Needed[0].String())
}

// No kernel argument turns an SMMU on: iommu.kernel on arm64 names the
// firmware or the driver, never grub ensure.
func TestGH200SMMUNotActive(t *testing.T) {
	noSMMU := func(b *fixture.Builder) {
		b.Remove("/sys/class/iommu").Mkdir("/sys/class/iommu").Remove("/sys/kernel/iommu_groups")
	}
	for want, edit := range map[string]func(b *fixture.Builder){
		"the kernel log says why arm-smmu-v3 registered no SMMU": noSMMU,
		"arm_smmu_v3 is a module here and not loaded": func(b *fixture.Builder) {
			noSMMU(b)
			b.File("/boot/config-"+fixture.GH200Kernel, "CONFIG_KVM=y\nCONFIG_ARM_SMMU_V3=m\n")
		},
		"built without CONFIG_ARM_SMMU_V3": func(b *fixture.Builder) {
			noSMMU(b)
			b.File("/boot/config-"+fixture.GH200Kernel, "CONFIG_KVM=y\n# CONFIG_ARM_SMMU_V3 is not set\n")
		},
		"the firmware describes no SMMU": func(b *fixture.Builder) {
			noSMMU(b)
			b.Bytes("/sys/firmware/acpi/tables/IORT", fixture.IORTTable(nil, 1))
		},
	} {
		_, res := grace(t, "", edit)
		f := only(t, res, "iommu.kernel")
		require.Equal(t, preflight.Fail, f.Status, f.Message)
		require.Contains(t, f.Remedy, want)
		require.NotContains(t, f.Remedy, "grub ensure")
		require.False(t, f.Fixable)
	}
}

// The kernel log is hostile input: what is kept of it is bounded, and only
// the lines the checks read.
func TestKernelLogBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 10000; i++ {
		b.WriteString("[    1.000000] kvm [1]: " + strings.Repeat("x", 5000) + "\n")
		b.WriteString("[    1.000001] unrelated line\n")
	}
	env, _ := grace(t, b.String(), nil)
	l := env.Log()
	require.NoError(t, l.Err)
	require.LessOrEqual(t, len(l.Lines), 256)
	for _, line := range l.Lines {
		require.LessOrEqual(t, len(line), 250)
		require.True(t, strings.HasPrefix(line, "kvm [1]: "), line)
	}
}

func TestGB200Platform(t *testing.T) {
	env, res := run(t, "gb200")
	require.Equal(t, preflight.ArchARM64, env.Arch)
	require.Len(t, env.GPUs, 2)
	for _, c := range []string{"cpu.virtualization", "kvm.device", "iommu.firmware", "iommu.kernel", "iommu.interrupt-remapping"} {
		require.Equal(t, preflight.Pass, only(t, res, c).Status, c)
	}
	require.Equal(t, "iommu.passthrough=1", only(t, res, "iommu.cmdline").Subject)
}

// x86 IOMMU arguments copied onto an arm64 node (guides written for x86)
// turn nothing on or off there, and are said to be x86's.
func TestGH200X86ArgsSaidToDoNothing(t *testing.T) {
	_, res := grace(t, "", func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro amd_iommu=on iommu=off iommu.passthrough=1\n")
	})
	seen := map[string]bool{}
	for _, f := range res.Findings {
		if f.Check != "iommu.cmdline" || f.Subject == "iommu.passthrough=1" {
			continue
		}
		seen[f.Subject] = true
		require.Equal(t, preflight.Warn, f.Status, f.Subject+": "+f.Message)
		require.Contains(t, f.Message, "is an x86 kernel parameter, and this node is arm64", f.Subject)
	}
	require.True(t, seen["amd_iommu=on"] && seen["iommu=off"], "%v", seen)
}

// NVIDIA's .run packages are named for uname -m: a Grace host is sent to the
// aarch64 vGPU manager, never the x86_64 one.
func TestGH200VGPUManagerRemedyNamesAarch64(t *testing.T) {
	_, res := grace(t, "", nil)
	var named int
	for _, f := range res.Findings {
		for _, s := range []string{f.Remedy, f.FixCommand} {
			require.NotContains(t, s, "x86_64", "%s: %s", f.Check, s)
			if strings.Contains(s, "NVIDIA-Linux-aarch64-VER-vgpu-kvm.run") {
				named++
			}
		}
	}
	require.NotZero(t, named, "some remedy names the vGPU manager's installer")
}
