package vfio

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// The GPU of the vfio-bound scenario: an H100 (10de:2331) on vfio-pci,
// kernel 6.8.0-45-generic with vfio-pci a module.
const bootGPU = "0000:11:00.0"

// Real files each setup starts from (the fixture's source named):
//
//   - initramfsToolsModules: initramfs-tools' template for
//     /etc/initramfs-tools/modules (conf/modules, initramfs-tools
//     0.140ubuntu13, Ubuntu 22.04; tobetter/initramfs-tools b26f0be), whose
//     "Syntax: module_name [args ...]" is the shape of the vfio-pci line
//     added to it.
//   - mkinitcpioConf: /etc/mkinitcpio.conf from archlinux/mkinitcpio v41
//     (fc8137c), HOOKS as its meson.build substitutes them for the systemd
//     hooks; MODULES as the ArchWiki's "PCI passthrough via OVMF" ("Loading
//     vfio-pci early": MODULES=(... vfio_pci vfio vfio_iommu_type1 ...)).
//   - dracutFedora: dracut.conf.d/fedora.conf.example (dracutdevs/dracut
//     5d2bda4), with the ArchWiki's dracut line
//     force_drivers+=" vfio_pci vfio vfio_iommu_type1 " in a drop-in.
//   - debianModules: Debian's /etc/modules, with the Proxmox VE wiki's "PCI(e)
//     Passthrough" lines (vfio, vfio_iommu_type1, vfio_pci).
func testdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return string(b)
}

const debianModules = "# /etc/modules: kernel modules to load at boot time.\n#\n# This file contains the names of kernel modules that should be loaded\n# at boot time, one per line. Lines beginning with \"#\" are ignored.\n\nvfio\nvfio_iommu_type1\nvfio_pci\n"

const vfioIDs = "options vfio-pci ids=10de:2331\n"

func tool(name string) func(*fixture.Builder) {
	return func(b *fixture.Builder) { b.File("/usr/sbin/"+name, "") }
}

func bootView(t *testing.T, edits ...func(*fixture.Builder)) (*BootView, []Binder) {
	t.Helper()
	k := sim(t, "vfio-bound", edits...)
	inv := inventory(t, k)
	v := NewBootView(k.Root, NextBootCmdline(k.Root), false)
	return v, v.BinderEvidence(inv.Get(bootGPU))
}

// cmdline puts args on the next boot's kernel command line (a GRUB drop-in,
// as Ubuntu cloud images have them) and the running one.
func cmdline(args string) func(*fixture.Builder) {
	return func(b *fixture.Builder) {
		b.File("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=2f1c ro quiet splash intel_iommu=on iommu=pt "+args+"\n")
		b.File("/etc/default/grub.d/50-test.cfg", `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX `+args+`"`+"\n")
	}
}

// Each loader the common guides use loads vfio-pci early, and the binder
// names the file and line it rests on; the same file where another tool
// makes the initramfs, or in a form that loads nothing, does not count, and
// says why.
func TestEarlyLoaders(t *testing.T) {
	itm := testdata(t, "initramfs-tools-0.140ubuntu13-modules")
	mk := testdata(t, "mkinitcpio-v41.conf")
	fed := testdata(t, "dracut-fedora.conf.example")
	for _, c := range []struct {
		name  string
		edits []func(*fixture.Builder)
		at    string // "" nothing binds; else a part of the first binder's text
		disc  string // a part of a discounted evidence's text ("" none checked)
	}{
		{"initramfs-tools modules line with ids", []func(*fixture.Builder){tool("update-initramfs"), func(b *fixture.Builder) {
			b.File("/etc/initramfs-tools/modules", itm+"vfio_iommu_type1\nvfio-pci ids=10de:2331\n")
		}}, `/etc/initramfs-tools/modules:16 "vfio-pci ids=10de:2331" (initramfs-tools:`, ""},
		{"initramfs-tools modules line, ids in modprobe.d", []func(*fixture.Builder){tool("update-initramfs"), func(b *fixture.Builder) {
			b.File("/etc/initramfs-tools/modules", itm+"vfio_pci\n").File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `/etc/modprobe.d/vfio.conf:1 "options vfio-pci ids=10de:2331"`, ""},
		{"initramfs-tools modules line, another tool makes the initramfs", []func(*fixture.Builder){tool("dracut"), func(b *fixture.Builder) {
			b.File("/etc/initramfs-tools/modules", itm+"vfio-pci ids=10de:2331\n")
		}}, "", "only initramfs-tools (update-initramfs) reads it; this node's initramfs tool is dracut"},
		{"initramfs-tools template only", []func(*fixture.Builder){tool("update-initramfs"), func(b *fixture.Builder) {
			b.File("/etc/initramfs-tools/modules", itm).File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", ""},
		{"dracut force_drivers", []func(*fixture.Builder){tool("dracut"), func(b *fixture.Builder) {
			b.File("/usr/lib/dracut/dracut.conf.d/01-fedora.conf", fed)
			b.File("/etc/dracut.conf.d/10-vfio.conf", `force_drivers+=" vfio_pci vfio vfio_iommu_type1 "`+"\n").File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `loaded early by /etc/dracut.conf.d/10-vfio.conf:1`, ""},
		{"dracut add_drivers only puts it in the image", []func(*fixture.Builder){tool("dracut"), func(b *fixture.Builder) {
			b.File("/etc/dracut.conf.d/10-vfio.conf", `add_drivers+=" vfio vfio_iommu_type1 vfio_pci "`+"\n").File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", "add_drivers only puts vfio-pci into the initramfs"},
		{"dracut force_drivers reset by a later drop-in", []func(*fixture.Builder){tool("dracut"), func(b *fixture.Builder) {
			b.File("/etc/dracut.conf.d/10-vfio.conf", `force_drivers+=" vfio_pci "`+"\n").File("/etc/dracut.conf.d/99-site.conf", `force_drivers="nvme"`+"\n")
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", ""},
		{"rd.driver.pre on the command line, dracut", []func(*fixture.Builder){tool("dracut"), cmdline("rd.driver.pre=vfio-pci"), func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `loaded early by the next boot's kernel command line "rd.driver.pre=vfio-pci" (dracut:`, ""},
		{"rd.driver.pre on the command line, initramfs-tools", []func(*fixture.Builder){tool("update-initramfs"), cmdline("rd.driver.pre=vfio-pci"), func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", "only a dracut initramfs reads it"},
		{"mkinitcpio MODULES", []func(*fixture.Builder){tool("mkinitcpio"), func(b *fixture.Builder) {
			b.File("/etc/mkinitcpio.conf", strings.Replace(mk, "MODULES=()", "MODULES=(vfio_pci vfio vfio_iommu_type1)", 1)).File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `loaded early by /etc/mkinitcpio.conf:7 "MODULES=(vfio_pci vfio vfio_iommu_type1)" (mkinitcpio: the initramfs's systemd-modules-load`, ""},
		{"mkinitcpio MODULES in a drop-in", []func(*fixture.Builder){tool("mkinitcpio"), func(b *fixture.Builder) {
			b.File("/etc/mkinitcpio.conf", mk).File("/etc/mkinitcpio.conf.d/vfio.conf", "MODULES+=(\n  vfio_pci # GPU passthrough\n  vfio\n)\n").File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `/etc/mkinitcpio.conf.d/vfio.conf:1`, ""},
		{"mkinitcpio MODULES with vfio_pci blacklisted", []func(*fixture.Builder){tool("mkinitcpio"), func(b *fixture.Builder) {
			b.File("/etc/mkinitcpio.conf", strings.Replace(mk, "MODULES=()", "MODULES=(vfio_pci)", 1))
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"blacklist vfio_pci\n")
		}}, "", "mkinitcpio's init loads MODULES with modprobe -b"},
		{"modules-load= on the command line", []func(*fixture.Builder){cmdline("modules-load=vfio_pci"), func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `"modules-load=vfio_pci" (systemd-modules-load:`, ""},
		{"rd.modules-load= without a systemd initramfs", []func(*fixture.Builder){tool("update-initramfs"), cmdline("rd.modules-load=vfio_pci"), func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", "inside an initramfs that runs systemd"},
		{"/etc/modules through Debian's modules-load.d link", []func(*fixture.Builder){func(b *fixture.Builder) {
			b.File("/etc/modules", debianModules).Link("/etc/modules-load.d/modules.conf", "/etc/modules").File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, `loaded early by /etc/modules-load.d/modules.conf (-> /etc/modules):8 "vfio_pci"`, ""},
		{"/etc/modules that nothing reads", []func(*fixture.Builder){func(b *fixture.Builder) {
			b.File("/etc/modules", debianModules).File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", "no modules-load.d file links to /etc/modules"},
		{"modules-load.d line with arguments", []func(*fixture.Builder){func(b *fixture.Builder) {
			b.File("/etc/modules-load.d/vfio.conf", "vfio-pci ids=10de:2331\n")
		}}, "", "takes the whole line as one module name"},
		{"module_blacklist=vfio_pci", []func(*fixture.Builder){cmdline("module_blacklist=vfio_pci"), func(b *fixture.Builder) {
			b.File("/etc/modules-load.d/vfio.conf", "vfio_pci\n").File("/etc/modprobe.d/vfio.conf", vfioIDs)
		}}, "", "the kernel refuses to load vfio_pci"},
	} {
		v, bs := bootView(t, c.edits...)
		if c.at == "" {
			require.Empty(t, bs, c.name)
		} else {
			require.NotEmpty(t, bs, c.name)
			require.Contains(t, bs[0].String(), c.at, c.name)
		}
		if c.disc != "" {
			var all []string
			for _, d := range v.Discounted() {
				all = append(all, d.String())
			}
			require.Contains(t, strings.Join(all, "\n"), c.disc, c.name)
		}
	}
}

// A softdep loads vfio-pci only when its module loads: not where that
// module is blacklisted (udev's modprobe returns before the softdeps), built
// in, or not a module of the kernel at all (nvidia on a GPU Operator node,
// whose driver lives in a container). The ArchWiki's `softdep drm pre:
// vfio-pci` and the common `softdep nvidia pre: vfio-pci`.
func TestSoftdepFiresOnlyWhenItsModuleLoads(t *testing.T) {
	nvidiaModule := func(b *fixture.Builder) {
		b.ModuleFiles("6.8.0-45-generic", []string{"kernel/drivers/vfio/pci/vfio-pci.ko", "updates/dkms/nvidia.ko", "kernel/drivers/gpu/drm/drm.ko"}, nil, nil)
	}
	for _, c := range []struct {
		name  string
		edits []func(*fixture.Builder)
		binds bool
		why   string
	}{
		{"nvidia a module", []func(*fixture.Builder){nvidiaModule, func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"softdep nvidia pre: vfio-pci\n")
		}}, true, ""},
		{"nvidia not installed", []func(*fixture.Builder){func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"softdep nvidia pre: vfio-pci\n")
		}}, false, "nvidia is not a module of kernel 6.8.0-45-generic"},
		{"nouveau blacklisted", []func(*fixture.Builder){func(b *fixture.Builder) {
			b.ModuleFiles("6.8.0-45-generic", []string{"kernel/drivers/vfio/pci/vfio-pci.ko", "kernel/drivers/gpu/drm/nouveau/nouveau.ko"}, nil, nil)
			b.File("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\noptions nouveau modeset=0\n")
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"softdep nouveau pre: vfio-pci\n")
		}}, false, "nouveau is blacklisted (/etc/modprobe.d/blacklist-nouveau.conf:1 blacklist nouveau): udev's modprobe applies the blacklist before it reads the softdeps"},
		{"nvidia blacklisted on the command line", []func(*fixture.Builder){nvidiaModule, cmdline("modprobe.blacklist=nouveau,nvidia"), func(b *fixture.Builder) {
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"softdep nvidia pre: vfio-pci\n")
		}}, false, "nvidia is blacklisted (the next boot's kernel command line modprobe.blacklist=nouveau,nvidia)"},
		{"drm built in", []func(*fixture.Builder){func(b *fixture.Builder) {
			b.ModuleFiles("6.8.0-45-generic", []string{"kernel/drivers/vfio/pci/vfio-pci.ko"}, []string{"kernel/drivers/gpu/drm/drm.ko"}, nil)
			b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"softdep drm pre: vfio-pci\n")
		}}, false, "drm is built into the kernel"},
	} {
		v, bs := bootView(t, c.edits...)
		if c.binds {
			require.NotEmpty(t, bs, c.name)
			require.Contains(t, bs[0].String(), `vfio-pci loaded early by /etc/modprobe.d/vfio.conf:2 "softdep nvidia pre: vfio-pci"`, c.name)
			continue
		}
		require.Empty(t, bs, c.name)
		ds := v.Discounted()
		require.NotEmpty(t, ds, c.name)
		require.Contains(t, ds[0].Says, c.why, c.name)
		require.Equal(t, "/etc/modprobe.d/vfio.conf", ds[0].Source, c.name)
		require.Equal(t, 2, ds[0].Line, c.name)
	}
}

// vfio-pci built into the kernel (stock Ubuntu 5.4 to 6.2): modprobe.d
// options never reach it, whatever loads it; vfio-pci.ids= on the command
// line does.
func TestBuiltinVFIOPCITakesNoModprobeOptions(t *testing.T) {
	builtin := func(b *fixture.Builder) {
		b.ModuleFiles("6.8.0-45-generic", nil, []string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/pci/vfio-pci.ko", "kernel/drivers/vfio/vfio_iommu_type1.ko"}, nil)
	}
	v, bs := bootView(t, builtin, func(b *fixture.Builder) {
		b.File("/etc/modprobe.d/vfio.conf", vfioIDs+"softdep nvidia pre: vfio-pci\n").File("/etc/modules-load.d/vfio.conf", "vfio_pci\n")
	})
	require.Empty(t, bs)
	ds := v.Discounted()
	require.NotEmpty(t, ds)
	require.Equal(t, "/etc/modprobe.d/vfio.conf", ds[len(ds)-1].Source)
	require.Contains(t, ds[len(ds)-1].Says, "a built-in module takes its parameters only from the kernel command line")

	// nor the arguments of an initramfs-tools modules line
	v, bs = bootView(t, builtin, tool("update-initramfs"), func(b *fixture.Builder) {
		b.File("/etc/initramfs-tools/modules", "vfio-pci ids=10de:2331\n")
	})
	require.Empty(t, bs)
	ds = v.Discounted()
	require.NotEmpty(t, ds)
	require.Equal(t, "/etc/initramfs-tools/modules", ds[0].Source)
	require.Contains(t, ds[0].Says, "its ids= does nothing: vfio-pci is built into the kernel")

	// gpuprep's own configuration as an older gpuprep wrote it there (the
	// IDs in modprobe.d): not a binder, and said why
	k := sim(t, "vfio-bound", builtin, func(b *fixture.Builder) {
		b.File(ModprobeConf, devicesHeader+" "+bootGPU+"=vfio-pci\n"+vfioIDs).File(ModulesLoad, "vfio_pci\n")
	})
	gpu := inventory(t, k).Get(bootGPU)
	v = NewBootView(k.Root, NextBootCmdline(k.Root), false)
	require.Empty(t, v.BinderEvidence(gpu))
	ds = v.DiscountedFor(gpu)
	require.Contains(t, ds[len(ds)-1].Says, "does nothing for "+bootGPU+": vfio-pci is built into the kernel")

	_, bs = bootView(t, builtin, cmdline("vfio-pci.ids=10de:2331"))
	require.Len(t, bs, 1)
	require.Equal(t, BinderCmdlineIDs, bs[0].Kind)
	require.Empty(t, bs[0].LoadedBy)
}

// Binders that name the device's address bind it without vfio-pci's IDs:
// the initramfs-image layer asks BindsByAddress, not the message text.
func TestBindsByAddress(t *testing.T) {
	v, _ := bootView(t, func(b *fixture.Builder) {
		b.File("/etc/udev/rules.d/50-vfio.rules", `ACTION=="add", KERNEL=="`+bootGPU+`", ATTR{driver_override}="vfio-pci"`+"\n")
	})
	k := sim(t, "vfio-bound")
	gpu := inventory(t, k).Get(bootGPU)
	require.True(t, v.BindsByAddress(gpu))
	v, _ = bootView(t, func(b *fixture.Builder) {
		b.File("/etc/modprobe.d/vfio.conf", vfioIDs).File("/etc/modules-load.d/vfio.conf", "vfio_pci\n")
	})
	require.False(t, v.BindsByAddress(gpu))
}
