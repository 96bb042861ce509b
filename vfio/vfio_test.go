package vfio

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/effect"
	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/iommu"
)

var turing = []string{"0000:01:00.0", "0000:01:00.1", "0000:01:00.2", "0000:01:00.3"}

var turingNative = map[string]string{"0000:01:00.0": "nvidia", "0000:01:00.1": "snd_hda_intel", "0000:01:00.2": "xhci_hcd", "0000:01:00.3": "nvidia-gpu"}

var t0 = time.Date(2026, 11, 30, 11, 15, 0, 0, time.UTC)

func opts() Options { return Options{} }

func sim(t *testing.T, scenario string, extra ...func(*fixture.Builder)) *fixture.Kernel {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	b := fixture.New(dir)
	for _, f := range extra {
		f(b)
	}
	require.NoError(t, b.Err())
	k, err := fixture.NewKernel(dir)
	require.NoError(t, err)
	return k
}

// procLink makes a /proc/PID/fd link with an absolute target, as the kernel shows them.
func procLink(t *testing.T, b *fixture.Builder, p, target string) {
	t.Helper()
	b.Mkdir(filepath.Dir(p))
	require.NoError(t, os.Symlink(target, filepath.Join(b.Dir, p)))
}

// env acts on k, its clock stopped at t0.
func env(k *fixture.Kernel) effect.Effector {
	return effect.Effector{Root: k.Root, Sysfs: k, Runner: k, Clock: func() time.Time { return t0 }}
}

func inventory(t *testing.T, k *fixture.Kernel) *pci.Inventory {
	t.Helper()
	inv, err := pci.Discover(k.Root)
	require.NoError(t, err)
	return inv
}

func selector(t *testing.T, s ...string) pci.Selector {
	t.Helper()
	sel, err := pci.ParseSelector(s)
	require.NoError(t, err)
	return sel
}

func plan(t *testing.T, k *fixture.Kernel, o Options, s ...string) (*pci.Inventory, *Plan) {
	t.Helper()
	inv := inventory(t, k)
	p, err := NewPlan(k.Root, inv, selector(t, s...), o)
	require.NoError(t, err)
	return inv, p
}

func drivers(k *fixture.Kernel, addrs []string) map[string]string {
	m := map[string]string{}
	for _, a := range addrs {
		m[a] = k.Driver(a)
	}
	return m
}

func TestPlanTakesTheWholeGroupInOrder(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction")
	_, p := plan(t, k, opts())
	var got []string
	for _, tg := range p.Targets {
		got = append(got, tg.Dev.Address+" "+string(tg.Role)+" "+tg.Driver+" -> "+tg.VFIO)
	}
	require.Equal(t, []string{
		"0000:01:00.0 gpu nvidia -> vfio-pci",
		"0000:01:00.1 function snd_hda_intel -> vfio-pci",
		"0000:01:00.2 function xhci_hcd -> vfio-pci",
		"0000:01:00.3 function nvidia-gpu -> vfio-pci",
	}, got, "every endpoint function of the group, no bridge")
	require.Equal(t, []string{"vfio_iommu_type1", "vfio_pci"}, p.Modules)
	require.Equal(t, []Step{
		{"0000:01:00.0", "/sys/bus/pci/devices/0000:01:00.0/driver/unbind", "0000:01:00.0"},
		{"0000:01:00.0", "/sys/bus/pci/devices/0000:01:00.0/driver_override", "vfio-pci"},
		{"0000:01:00.0", "/sys/bus/pci/drivers/vfio-pci/bind", "0000:01:00.0"},
	}, p.Steps[:3])
	require.Len(t, p.Steps, 12)
}

func TestPlanRefusesAForeignEndpointAndNamesIt(t *testing.T) {
	t.Parallel()
	k := sim(t, "consumer-shared-group")
	inv := inventory(t, k)
	_, err := NewPlan(k.Root, inv, pci.Selector{}, opts())
	var r *Refused
	require.ErrorAs(t, err, &r)
	for _, a := range []string{"0000:00:14.0", "0000:00:17.0", "0000:03:00.0"} {
		require.Contains(t, err.Error(), a)
	}
	require.NotContains(t, err.Error(), "0000:02:00.1", "the GPU's own audio function is not foreign")
	require.NotContains(t, err.Error(), "0000:00:1c.0", "bridges are not foreign")
	require.Empty(t, k.Writes)

	// selecting every endpoint of the group would make it one passthrough
	// unit, but those endpoints are the host's USB, SATA and NIC: refused
	// (hostdev_test.go), unless AllowHostDevices
	o := opts()
	o.AllowHostDevices = true
	p, err := NewPlan(k.Root, inv, selector(t, "10de", "00:14.0", "00:17.0", "03:00.0"), o)
	require.NoError(t, err)
	require.Len(t, p.Targets, 5)
}

func TestPlanRefusesWithoutIOMMUGroup(t *testing.T) {
	t.Parallel()
	k := sim(t, "iommu-off-kernel")
	_, err := NewPlan(k.Root, inventory(t, k), pci.Selector{}, opts())
	require.ErrorContains(t, err, "0000:17:00.0 has no IOMMU group")
}

func TestPlanSelectorMatchingNothing(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction")
	_, err := NewPlan(k.Root, inventory(t, k), selector(t, "1234:5678"), opts())
	var se *SelectError
	require.ErrorAs(t, err, &se)
}

func TestChooseModuleFewestWildcards(t *testing.T) {
	t.Parallel()
	aliases := []alias{
		{"vfio_pci:v*d*sv*sd*bc*sc*i*", "vfio_pci"},
		{"vfio_pci:v000010DEd*sv*sd*bc03sc02i00*", "vendor_wide"},
		{"vfio_pci:v000010DEd00002342sv*sd*bc03sc02i00*", "nvgrace_gpu_vfio_pci"},
	}
	m, pat := chooseModule(aliases, "pci:v000010DEd00002342sv000010DEsd000016C1bc03sc02i00")
	require.Equal(t, "nvgrace_gpu_vfio_pci", m)
	require.Equal(t, "vfio_pci:v000010DEd00002342sv*sd*bc03sc02i00*", pat)
	m, _ = chooseModule(aliases, "pci:v000010DEd00002335sv000010DEsd000018BEbc03sc02i00")
	require.Equal(t, "vendor_wide", m)
	m, _ = chooseModule(aliases, "pci:v00001234d00001111sv00001AF4sd00001100bc03sc00i00")
	require.Equal(t, "vfio_pci", m)
	m, pat = chooseModule(nil, "pci:v00001234d00001111sv00001AF4sd00001100bc03sc00i00")
	require.Equal(t, "vfio_pci", m, "no aliases: the fallback")
	require.Empty(t, pat)
}

// A Grace Hopper GPU goes to the variant driver that modules.alias names;
// its driver directory is the module's name, as the kernel registers it.
func TestBindUsesTheVariantDriver(t *testing.T) {
	t.Parallel()
	k := sim(t, "no-gpu", func(b *fixture.Builder) {
		b.PCI(fixture.PCI{Addr: "0000:09:00.0", Vendor: 0x8086, Device: 0x352a, Class: 0x060400, Driver: "pcieport", Group: 8, PCIeType: fixture.PCIeRootPort})
		b.PCI(fixture.PCI{Addr: "0000:0a:00.0", Parent: "0000:09:00.0", Vendor: 0x10de, Device: 0x2342, SubVendor: 0x10de, SubDevice: 0x16c1, Class: 0x030200, Driver: "nvidia", Group: 9, PCIeType: fixture.PCIeEndpoint})
	})
	inv, p := plan(t, k, opts(), "0000:0a:00.0")
	require.Len(t, p.Targets, 1)
	require.Equal(t, "nvgrace_gpu_vfio_pci", p.Targets[0].Module)
	require.Equal(t, []string{"vfio_iommu_type1", "nvgrace_gpu_vfio_pci"}, p.Modules)
	res, err := Bind(context.Background(), env(k), inv, p, opts())
	require.NoError(t, err)
	require.Equal(t, "nvgrace_gpu_vfio_pci", k.Driver("0000:0a:00.0"))
	require.Equal(t, []Change{{"0000:0a:00.0", "nvidia", "nvgrace_gpu_vfio_pci"}}, res.Changed)
	require.Equal(t, [][]string{{"modprobe", "vfio_iommu_type1"}, {"modprobe", "nvgrace_gpu_vfio_pci"}}, k.Commands)
}

func TestBindMovesEveryFunctionAndUnbindRestores(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction")
	inv, p := plan(t, k, opts())
	res, err := Bind(context.Background(), env(k), inv, p, opts())
	require.NoError(t, err)
	for _, a := range turing {
		require.Equal(t, "vfio-pci", k.Driver(a), a)
		require.Equal(t, "vfio-pci", k.Override(a), a)
	}
	require.Len(t, res.Changed, 4)
	require.Equal(t, map[string]bool{"2": true}, res.Groups)
	require.True(t, k.Root.Exists("/dev/vfio/2"))
	ents, err := journal.Read(k.Root)
	require.NoError(t, err)
	require.Len(t, ents, 8, "an intent and a record of it done per device")
	require.Equal(t, journal.Entry{Time: t0, Command: "vfio bind", Kind: "driver-intent", Device: "0000:01:00.1", Before: "snd_hda_intel", After: "vfio-pci"}, ents[2])
	require.Equal(t, journal.Entry{Time: t0, Command: "vfio bind", Kind: "driver", Device: "0000:01:00.1", Before: "snd_hda_intel", After: "vfio-pci"}, ents[3])

	// a second bind changes nothing: not one write
	n := len(k.Writes)
	inv, p = plan(t, k, opts())
	require.Empty(t, p.Steps)
	require.Empty(t, p.Modules)
	res, err = Bind(context.Background(), env(k), inv, p, opts())
	require.NoError(t, err)
	require.Empty(t, res.Changed)
	require.Equal(t, turing, res.Unchanged)
	require.Len(t, k.Writes, n)

	res, err = Unbind(context.Background(), env(k), inventory(t, k), pci.Selector{}, opts())
	require.NoError(t, err, "%+v", res)
	require.Equal(t, turingNative, drivers(k, turing))
	for _, a := range turing {
		require.Equal(t, "", k.Override(a), a)
	}
	require.False(t, k.Root.Exists("/dev/vfio/2"))
	require.Len(t, res.Changed, 4)

	_, err = Unbind(context.Background(), env(k), inventory(t, k), pci.Selector{}, opts())
	require.ErrorIs(t, err, ErrNothing)
}

func TestBindFailureRollsBack(t *testing.T) {
	t.Parallel()
	for name, inject := range map[string]func(k *fixture.Kernel){
		"write-error":       func(k *fixture.Kernel) { k.Fail["/sys/bus/pci/drivers/vfio-pci/bind"] = syscall.EINVAL },
		"silent-bind":       func(k *fixture.Kernel) { k.Silent["0000:01:00.2"] = true },
		"override-error":    func(k *fixture.Kernel) { k.Fail["/sys/bus/pci/devices/0000:01:00.3/driver_override"] = syscall.EIO },
		"unbind-error-last": func(k *fixture.Kernel) { k.Fail["/sys/bus/pci/devices/0000:01:00.3/driver/unbind"] = syscall.EBUSY },
	} {
		t.Run(name, func(t *testing.T) {
			k := sim(t, "turing-multifunction")
			inject(k)
			inv, p := plan(t, k, opts())
			_, err := Bind(context.Background(), env(k), inv, p, opts())
			require.Error(t, err)
			t.Log(err)
			require.Equal(t, turingNative, drivers(k, turing), "every device back on its driver")
			for _, a := range turing {
				require.Equal(t, "", k.Override(a), a)
			}
			if name == "silent-bind" {
				require.ErrorContains(t, err, "0000:01:00.2: the bind to vfio-pci reported success but the device has no driver")
				require.ErrorContains(t, err, "rolled back: 3 devices")
			}
			ents, _ := journal.Read(k.Root)
			before, known := DriverBefore(ents, "0000:01:00.0")
			require.False(t, known && before != "", "the journal does not claim a bind that was rolled back: %+v", ents)
		})
	}
}

func TestBindWriteTimesOut(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction")
	k.Hang["/sys/bus/pci/devices/0000:01:00.1/driver/unbind"] = true
	defer close(k.Release)
	o := opts()
	o.Timeout = 50 * time.Millisecond
	inv, p := plan(t, k, o)
	_, err := Bind(context.Background(), env(k), inv, p, o)
	require.ErrorContains(t, err, "no answer after 50ms")
	require.ErrorContains(t, err, "rolled back")
	require.Equal(t, "nvidia", k.Driver("0000:01:00.0"))
}

func TestNVIDIAHeldOpenIsRefusedUnlessForced(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction", func(b *fixture.Builder) {
		b.File("/dev/nvidia0", "").File("/proc/4242/comm", "nvidia-persiste\n").File("/proc/77/comm", "bash\n")
		procLink(t, b, "/proc/4242/fd/3", "/dev/nvidia0")
		procLink(t, b, "/proc/77/fd/0", "/dev/null")
	})
	inv := inventory(t, k)
	_, err := NewPlan(k.Root, inv, pci.Selector{}, opts())
	require.ErrorContains(t, err, "4242 (nvidia-persiste: /dev/nvidia0)")
	require.NotContains(t, err.Error(), "bash")
	o := opts()
	o.Force = true
	p, err := NewPlan(k.Root, inv, pci.Selector{}, o)
	require.NoError(t, err)
	require.Len(t, p.Holders, 1)
}

func TestUnbindRefusesAGroupInUse(t *testing.T) {
	t.Parallel()
	k := sim(t, "vfio-bound", func(b *fixture.Builder) {
		b.File("/dev/vfio/11", "").File("/proc/999/comm", "qemu-kvm\n")
		procLink(t, b, "/proc/999/fd/20", "/dev/vfio/11")
	})
	_, err := Unbind(context.Background(), env(k), inventory(t, k), selector(t, "0000:11:00.0"), opts())
	require.ErrorContains(t, err, "999 (qemu-kvm: /dev/vfio/11)")
	require.Equal(t, "vfio-pci", k.Driver("0000:11:00.0"))
	// a device bound before gpuprep (no journal record) is left unbound, saying so
	res, err := Unbind(context.Background(), env(k), inventory(t, k), selector(t, "0000:21:00.0"), opts())
	require.NoError(t, err)
	require.Equal(t, "", k.Driver("0000:21:00.0"))
	require.Contains(t, strings.Join(res.Notes, "\n"), "0000:21:00.0: the journal has no record of its driver before bind: left unbound")
}

func TestNVSwitchesGoWithTheGPUs(t *testing.T) {
	t.Parallel()
	k := sim(t, "hgx-h200")
	o := opts()
	o.NVSwitch = true
	_, p := plan(t, k, o)
	n := 0
	for _, tg := range p.Targets {
		if tg.Dev.IsNVSwitch() {
			n++
			require.Equal(t, iommu.RoleGPU, tg.Role, "an NVSwitch is selected like a GPU")
		}
	}
	require.Equal(t, 4, n)
	require.Len(t, p.Targets, 12)
}

func read(t *testing.T, k *fixture.Kernel, p string) string {
	t.Helper()
	b, err := k.Root.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestPersistPerAddressWhenNotEveryDeviceOfTheIDIsSelected(t *testing.T) {
	t.Parallel()
	k := sim(t, "hgx-h200", func(b *fixture.Builder) { b.File("/usr/sbin/update-initramfs", "") })
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o, "0000:13:00.0")
	res, err := Bind(context.Background(), env(k), inv, p, o)
	require.NoError(t, err)
	require.Equal(t, []string{"0000:13:00.0"}, p.Persist.PerDevice)
	require.Empty(t, p.Persist.IDs)
	conf := read(t, k, ModprobeConf)
	require.Contains(t, conf, "# gpuprep-devices: 0000:13:00.0=vfio-pci\n")
	require.Contains(t, conf, "softdep nvidia pre: vfio-pci\n")
	require.Contains(t, conf, "softdep nouveau pre: vfio-pci\n")
	require.Contains(t, conf, "blacklist nouveau\n")
	require.NotContains(t, conf, "ids=", "seven other H200 stay on nvidia")
	require.Contains(t, read(t, k, UdevRule), `ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:13:00.0", ATTR{driver_override}="vfio-pci"`)
	require.Equal(t, "# Written by `gpuprep vfio bind --persist`; `gpuprep vfio unbind` removes it.\nvfio\nvfio_iommu_type1\nvfio_pci\n", read(t, k, ModulesLoad))
	require.Equal(t, []string{"update-initramfs", "-u"}, k.Commands[len(k.Commands)-1])
	require.Len(t, res.Files, 3)

	// unbind removes the files (backed up, with their mode) and regenerates the initramfs again
	require.NoError(t, os.Chmod(filepath.Join(k.Root.Dir(), ModprobeConf), 0o600))
	res, err = Unbind(context.Background(), env(k), inventory(t, k), selector(t, "0000:13:00.0"), o)
	require.NoError(t, err)
	require.Equal(t, "nvidia", k.Driver("0000:13:00.0"))
	for _, f := range []string{ModprobeConf, ModulesLoad, UdevRule} {
		require.False(t, k.Root.Exists(f), f)
	}
	require.Len(t, res.Files, 3)
	for _, f := range res.Files {
		require.True(t, f.Removed)
		require.True(t, k.Root.Exists(f.Backup), f.Backup)
		if f.Path == ModprobeConf {
			fi, err := k.Root.Stat(f.Backup)
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the backup keeps the mode")
		}
	}
	require.Equal(t, []string{"update-initramfs", "-u"}, k.Commands[len(k.Commands)-1])
}

func TestPersistIDsWhenEveryDeviceIsSelected(t *testing.T) {
	t.Parallel()
	k := sim(t, "hgx-h200", func(b *fixture.Builder) { b.File("/usr/bin/dracut", "") })
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o, "10de:2335")
	_, err := Bind(context.Background(), env(k), inv, p, o)
	require.NoError(t, err)
	require.Contains(t, read(t, k, ModprobeConf), "options vfio-pci ids=10de:2335\n")
	require.False(t, k.Root.Exists(UdevRule))
	require.Equal(t, []string{"dracut", "-f"}, k.Commands[len(k.Commands)-1])
	require.Len(t, Persisted(k.Root), 8)
}

func TestPersistFailureRollsBackFilesAndBinding(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction", func(b *fixture.Builder) {
		b.File("/usr/sbin/update-initramfs", "")
		b.File(ModprobeConf, "# an older file\n")
	})
	conf := filepath.Join(k.Root.Dir(), ModprobeConf)
	require.NoError(t, os.Chmod(conf, 0o600))
	k.Fail["update-initramfs -u"] = syscall.EIO
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o)
	_, err := Bind(context.Background(), env(k), inv, p, o)
	require.ErrorContains(t, err, "regenerate the initramfs")
	require.NotContains(t, err.Error(), "not restored")
	require.Equal(t, turingNative, drivers(k, turing))
	require.Equal(t, "# an older file\n", read(t, k, ModprobeConf), "restored from its backup")
	fi, err := os.Stat(conf)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "with its mode")
	require.False(t, k.Root.Exists(ModulesLoad))
	// the apply's backup, and the one the restore made of what it undid
	bak := ModprobeConf + ".gpuprep-" + t0.UTC().Format("20060102T150405.000000000Z") + ".bak"
	require.Equal(t, "# an older file\n", read(t, k, bak))
	m, _ := filepath.Glob(conf + ".gpuprep-*.bak")
	require.Len(t, m, 2)
}

// a runner whose update-initramfs removes a backup first: the restore after
// its failure cannot read it
type loseBackup struct {
	*fixture.Kernel
	bak string
}

func (l loseBackup) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if argv[0] == "update-initramfs" {
		_ = l.Root.RemoveFile(l.bak)
	}
	return l.Kernel.Run(ctx, argv...)
}

func TestPersistFailureReportsFilesNotRestored(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction", func(b *fixture.Builder) {
		b.File("/usr/sbin/update-initramfs", "")
		b.File(ModprobeConf, "# an older file\n")
	})
	k.Fail["update-initramfs -u"] = syscall.EIO
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o)
	bak := ModprobeConf + ".gpuprep-" + t0.UTC().Format("20060102T150405.000000000Z") + ".bak"
	e := env(k)
	e.Runner = loseBackup{k, bak}
	_, err := Bind(context.Background(), e, inv, p, o)
	require.ErrorContains(t, err, "regenerate the initramfs")
	require.ErrorContains(t, err, "files not restored: "+ModprobeConf+": read its backup: ")
	require.ErrorContains(t, err, "(restore it from "+bak+" by hand)")
	require.Equal(t, turingNative, drivers(k, turing))
}

func TestStatus(t *testing.T) {
	t.Parallel()
	k := sim(t, "turing-multifunction", func(b *fixture.Builder) {
		b.File("/etc/modprobe.d/local.conf", "options vfio-pci ids=10de:1e87\n")
	})
	st, err := GetStatus(k.Root, inventory(t, k), pci.Selector{}, false)
	require.NoError(t, err)
	require.Len(t, st.GPUs, 1)
	g := st.GPUs[0]
	require.Equal(t, "2", g.IOMMUGroup)
	require.False(t, g.OnVFIO)
	require.Len(t, g.Members, 4)
	require.Equal(t, "vfio-pci", g.Members[1].VFIODriver)
	require.Equal(t, "snd_hda_intel", g.Members[1].Driver)
	require.False(t, g.Node.Present)
	require.Equal(t, []string{"/etc/modprobe.d/local.conf: options vfio-pci ids=10de:1e87"}, st.Persistent.Other)

	inv, p := plan(t, k, opts())
	_, err = Bind(context.Background(), env(k), inv, p, opts())
	require.NoError(t, err)
	st, err = GetStatus(k.Root, inventory(t, k), pci.Selector{}, false)
	require.NoError(t, err)
	require.True(t, st.GPUs[0].OnVFIO)
	require.True(t, st.GPUs[0].Node.Present)
	require.Equal(t, "vfio-pci", st.GPUs[0].Members[0].Override)
}

func TestModulesLoadWithoutModprobe(t *testing.T) {
	k := sim(t, "turing-multifunction")
	notFound := &exec.Error{Name: "modprobe", Err: exec.ErrNotFound}
	k.Fail = map[string]error{"modprobe vfio_pci": notFound}
	var loaded []string
	e, o := env(k), opts()
	o.ModuleDryRun = func(p string) { loaded = append(loaded, p) }
	argv, err := loadModule(context.Background(), e, o, "vfio_pci")
	require.NoError(t, err)
	require.Equal(t, []string{"(built-in loader)", "vfio_pci"}, argv)
	require.Equal(t, []string{filepath.Join(k.Root.Dir(), "lib/modules/6.1.0-18-amd64/kernel/drivers/vfio/pci/vfio-pci.ko")}, loaded)
	// never from a root that is not / for real
	_, err = loadModule(context.Background(), e, opts(), "vfio_pci")
	require.ErrorContains(t, err, "modules are never loaded from a root that is not /")
	// other modprobe failures are reported as they are
	k.Fail = map[string]error{"modprobe vfio_pci": errors.New("modprobe: FATAL: Module vfio_pci not found")}
	_, err = loadModule(context.Background(), e, o, "vfio_pci")
	require.ErrorContains(t, err, "Module vfio_pci not found")
	require.Len(t, loaded, 1)
}
