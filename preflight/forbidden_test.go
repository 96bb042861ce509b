package preflight_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/preflight"
)

// module_blacklist= makes the kernel refuse a module however it is loaded,
// the driver container's modprobe included (kernel/module/main.c:
// blacklisted(), byte-for-byte names): running, a fail for the modes that
// need it; only configured for the next boot, a warn naming the file and
// line. modprobe.blacklist= (a modprobe blacklist, which a by-name modprobe
// ignores) and a misspelt name (nvidia-uvm) forbid nothing.
func TestModuleBlacklistOnTheCommandLine(t *testing.T) {
	const running = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash intel_iommu=on iommu=pt "
	grubWith := func(args string) func(*fixture.Builder) {
		return func(b *fixture.Builder) {
			b.File("/etc/default/grub.d/50-site.cfg", `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX `+args+`"`+"\n")
		}
	}
	blacklisted := func(f preflight.Finding) bool {
		return f.Check == "vfio.binding" && f.Subject != "" && f.Subject[0] == '/' && f.Status != preflight.Pass && f.Status != preflight.Skip && strings.Contains(f.Message, "module_blacklist")
	}

	// running and configured: the driver container cannot load nvidia
	_, res := runRoot(t, build(t, fixture.HGX, func(b *fixture.Builder) {
		b.File("/proc/cmdline", running+"module_blacklist=nouveau,nvidia\n")
		grubWith("module_blacklist=nouveau,nvidia")(b)
	}))
	f := one(t, res, "vfio.binding", "/proc/cmdline", preflight.Container)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "module_blacklist=nouveau,nvidia on the running kernel's command line: the kernel refuses to load nvidia however it is asked")
	require.Contains(t, f.Remedy, "/etc/default/grub.d/50-site.cfg:1")
	require.False(t, res.Modes[preflight.Container].Ready)

	// configured for the next boot only: a warn there
	_, res = runRoot(t, build(t, fixture.HGX, grubWith("module_blacklist=nvidia_uvm")))
	f = one(t, res, "vfio.binding", "/etc/default/grub.d/50-site.cfg:1", preflight.Container)
	require.Equal(t, preflight.Warn, f.Status, f.Message)
	require.Contains(t, f.Message, "after the reboot the kernel refuses to load nvidia_uvm")

	// vfio_pci, a module here: passthrough cannot load it
	_, res = runRoot(t, build(t, fixture.VFIOBound, func(b *fixture.Builder) {
		b.File("/proc/cmdline", running+"module_blacklist=vfio_iommu_type1\n")
	}))
	f = one(t, res, "vfio.binding", "/proc/cmdline", preflight.VMPassthrough)
	require.Equal(t, preflight.Fail, f.Status, f.Message)
	require.Contains(t, f.Message, "vfio_iommu_type1")
	require.Contains(t, f.Message, "the next boot's configuration (/etc/default/grub) no longer has it: reboot")

	for _, args := range []string{"modprobe.blacklist=nvidia", "module_blacklist=nvidia-uvm", "module_blacklist=nvidia module_blacklist=nouveau"} {
		_, res = runRoot(t, build(t, fixture.HGX, func(b *fixture.Builder) {
			b.File("/proc/cmdline", running+args+"\n")
			grubWith(args)(b)
		}))
		for _, f := range res.Findings {
			require.False(t, blacklisted(f), "%s: %+v", args, f)
		}
	}
}
