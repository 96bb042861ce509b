package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
)

// simulated runs bind and unbind against fixture roots through the kernel
// simulator, as if the fixture were the live host.
func simulated(t *testing.T, d *deps) {
	t.Helper()
	d.vfioKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		return k, k, err
	}
}

func TestVFIOBindStatusUnbind(t *testing.T) {
	d := realDeps()
	simulated(t, d)
	root := fixtureRoot(t, "turing-multifunction")

	out, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root, "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Dry run: nothing is changed.")
	require.Contains(t, out, "0000:01:00.1 (function, group 2): snd_hda_intel -> vfio-pci (module vfio_pci, modules.alias vfio_pci:v*d*sv*sd*bc*sc*i*)")
	require.Contains(t, out, "run: modprobe vfio_pci\n")
	require.Contains(t, out, `write "vfio-pci" > /sys/bus/pci/devices/0000:01:00.3/driver_override`)

	out, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "0000:01:00.0: nvidia -> vfio-pci\n")
	require.Contains(t, out, "0000:01:00.3: nvidia-gpu -> vfio-pci\n")
	require.Contains(t, out, "/dev/vfio/2 ready\n")

	out, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root)
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "->", "a second bind changes nothing")
	require.Contains(t, out, "0000:01:00.2: already on a VFIO driver, left alone")

	out, errs, code = gpuprepWith(t, d, "vfio", "status", "--root", root, "-o", "json")
	require.Equal(t, 0, code, errs)
	var st vfio.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Len(t, st.GPUs, 1)
	require.True(t, st.GPUs[0].OnVFIO)
	require.True(t, st.GPUs[0].Node.Present)

	// bound without --persist: ready, but not after a reboot
	out, errs, code = gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Contains(t, out, `"check": "vfio.binding",
      "status": "warn",
      "subject": "0000:01:00.0",
      "message": "bound to vfio-pci until the next boot`, errs)
	require.Equal(t, 0, code, errs)

	out, errs, code = gpuprepWith(t, d, "vfio", "unbind", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "0000:01:00.1: vfio-pci -> snd_hda_intel\n")

	out, _, code = gpuprepWith(t, d, "vfio", "status", "--root", root)
	require.Equal(t, 0, code)
	require.Contains(t, out, "0000:01:00.0 NVIDIA TU104 [GeForce RTX 2080 Rev. A]: IOMMU group 2, viable for passthrough; not on VFIO")
	require.Contains(t, out, "0000:01:00.0 10de:1e87 030000 gpu      driver nvidia, bind would use vfio-pci")
}

// vfio status says why a GPU is not viable, and only the reason that holds: a GPU with no group (IOMMU off) was
// once reported as sharing its group with a foreign endpoint (seen on a real H200 in a VM).
func TestVFIOStatusSaysWhyNotViable(t *testing.T) {
	d := realDeps()
	simulated(t, d)
	for _, tc := range []struct{ scenario, text, why string }{
		{"consumer-shared-group", "IOMMU group 5, NOT viable: the group holds endpoints that are not this GPU's: 0000:00:14.0, ",
			"the group holds endpoints that are not this GPU's: 0000:00:14.0, "},
		{"iommu-off-kernel", "NOT viable: no IOMMU group: the IOMMU is not active in the kernel", "no IOMMU group: the IOMMU is not active in the kernel"},
	} {
		root := fixtureRoot(t, tc.scenario)
		out, errs, code := gpuprepWith(t, d, "vfio", "status", "--root", root)
		require.Equal(t, 0, code, errs)
		require.Contains(t, out, tc.text, tc.scenario)
		require.NotContains(t, out, "sharing", tc.scenario)
		out, errs, code = gpuprepWith(t, d, "vfio", "status", "--root", root, "-o", "json")
		require.Equal(t, 0, code, errs)
		var st vfio.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.NotEmpty(t, st.GPUs, tc.scenario)
		for _, g := range st.GPUs {
			require.False(t, g.Viable, tc.scenario)
			require.Contains(t, g.WhyNot, tc.why, tc.scenario)
		}
	}
	out, errs, code := gpuprepWith(t, d, "vfio", "status", "--root", fixtureRoot(t, "hgx-h200"), "-o", "json")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "notViable", "a viable GPU carries no reason")
}

func TestVFIOBindRefusals(t *testing.T) {
	d := realDeps()
	simulated(t, d)
	root := fixtureRoot(t, "consumer-shared-group")
	_, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "IOMMU group 5 also holds 0000:00:14.0 [8086:7ae0 class 0c0330, driver xhci_hcd]")

	_, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--select", "1234:5678")
	require.Equal(t, 2, code, errs)
	_, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--select", "nonsense")
	require.Equal(t, 2, code, errs)
	_, errs, code = gpuprepWith(t, d, "vfio", "status", "--root", root, "-o", "yaml")
	require.Equal(t, 2, code, errs)
}

func TestVFIOOnlyDryRunAgainstAnotherRoot(t *testing.T) {
	root := fixtureRoot(t, "turing-multifunction")
	_, errs, code := gpuprepWith(t, withoutFixtureRoots(), "vfio", "bind", "--root", root)
	require.Equal(t, 2, code)
	require.Contains(t, errs, "gpuprep vfio bind changes only /")
	_, _, code = gpuprepWith(t, withoutFixtureRoots(), "vfio", "bind", "--root", root, "--dry-run", "--persist")
	require.Equal(t, 0, code)
}

func TestVFIOBindFailureExitsOne(t *testing.T) {
	d := realDeps()
	d.vfioKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		k.Silent["0000:01:00.1"] = true
		return k, k, err
	}
	root := fixtureRoot(t, "turing-multifunction")
	_, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "0000:01:00.1: the bind to vfio-pci reported success but the device has no driver; rolled back: 2 devices restored")
}

// A vfio bind --persist whose initramfs regeneration fails puts the files
// back: a file it replaced keeps its mode (it came back 0644), atomically.
func TestVFIOBindPersistFailureRestoresFiles(t *testing.T) {
	d := realDeps()
	d.vfioKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		k.Fail["update-initramfs -u"] = syscall.EIO
		return k, k, err
	}
	root := fixtureRoot(t, "turing-multifunction")
	conf := filepath.Join(root, vfio.ModprobeConf)
	require.NoError(t, fixture.New(root).File("/usr/sbin/update-initramfs", "").File(vfio.ModprobeConf, "# the admin's\n").Err())
	require.NoError(t, os.Chmod(conf, 0o600))
	_, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "regenerate the initramfs")
	require.NotContains(t, errs, "not restored")
	b, err := os.ReadFile(conf)
	require.NoError(t, err)
	require.Equal(t, "# the admin's\n", string(b))
	fi, err := os.Stat(conf)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoFileExists(t, filepath.Join(root, vfio.ModulesLoad))
}

// vfio unbind removes the persistent files and then fails to regenerate the initramfs: the error says the files
// changed and the initramfs did not; run again (no device left on VFIO, no file left), it regenerates the initramfs
// instead of saying there is nothing to do; once regenerated, there is.
func TestVFIOUnbindFinishesAFailedInitramfs(t *testing.T) {
	d := realDeps()
	fail := true
	var last *fixture.Kernel
	d.vfioKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		if fail {
			k.Fail["update-initramfs -u"] = syscall.EIO
		}
		last = k
		return k, k, err
	}
	root := fixtureRoot(t, "turing-multifunction")
	require.NoError(t, fixture.New(root).File("/usr/sbin/update-initramfs", "").File("/boot/initrd.img-6.1.0-18-amd64", "old image\n").Err())
	fail = false
	_, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist")
	require.Equal(t, 0, code, errs)
	require.FileExists(t, filepath.Join(root, vfio.ModprobeConf))
	// the image made by that bind's update-initramfs (the simulator records it, and does not write one)
	require.NoError(t, fixture.New(root).Touch("/boot/initrd.img-6.1.0-18-amd64", fixture.BootTime.Add(24*time.Hour*365*2)).Err())

	fail = true
	_, errs, code = gpuprepWith(t, d, "vfio", "unbind", "--root", root)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "regenerate the initramfs")
	require.Contains(t, errs, "persistent VFIO files changed (backed up, in the journal) but the initramfs still holds the old ones")
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))
	// the image predates the removal (the simulator's clock is real; the removal was just now)
	require.NoError(t, fixture.New(root).Touch("/boot/initrd.img-6.1.0-18-amd64", time.Now().Add(-time.Minute)).Err())

	fail = false
	out, errs, code := gpuprepWith(t, d, "vfio", "unbind", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.NotContains(t, out, "Nothing to unbind")
	require.Contains(t, last.Commands, []string{"update-initramfs", "-u"})

	require.NoError(t, fixture.New(root).Touch("/boot/initrd.img-6.1.0-18-amd64", time.Now().Add(time.Minute)).Err())
	out, _, code = gpuprepWith(t, d, "vfio", "unbind", "--root", root)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Nothing to unbind")
}

// vfio bind --persist --dry-run on a node already bound and persisted shows what the real run does: nothing.
func TestVFIOBindPersistDryRunMatchesTheRun(t *testing.T) {
	d := realDeps()
	var last *fixture.Kernel
	d.vfioKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		last = k
		return k, k, err
	}
	root := fixtureRoot(t, "turing-multifunction")
	require.NoError(t, fixture.New(root).File("/usr/sbin/update-initramfs", "").Err())
	out, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "write (atomic, backed up): "+vfio.ModprobeConf)
	require.Contains(t, out, "run: update-initramfs -u\n")
	_, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist")
	require.Equal(t, 0, code, errs)
	// the image the bind's update-initramfs made (the simulator does not write one)
	require.NoError(t, fixture.New(root).File("/boot/initrd.img-6.1.0-18-amd64", "image\n").Touch("/boot/initrd.img-6.1.0-18-amd64", time.Now().Add(time.Minute)).Err())

	out, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "write (atomic")
	require.NotContains(t, out, "run: update-initramfs")
	require.Contains(t, out, "persistent configuration: already as it should be\n")
	require.Contains(t, out, "Nothing to do.\n")
	last = nil
	out, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist")
	require.Equal(t, 0, code, errs)
	require.NotContains(t, out, "update-initramfs", "the real run does nothing either")
	require.Empty(t, last.Commands)
}

// Without an initramfs tool, a --persist dry run that writes files does not also say they are as they should be.
func TestVFIOBindPersistDryRunWithoutInitramfsTool(t *testing.T) {
	root := fixtureRoot(t, "turing-multifunction")
	out, errs, code := gpuprep(t, "vfio", "bind", "--root", root, "--persist", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "write (atomic, backed up): "+vfio.ModprobeConf)
	require.NotContains(t, out, "already as it should be")
}

// consumer-shared-group: check's remedy once said to --select the USB, SATA
// and NIC that share the RTX 4090's group; plan then exited 0 and persisted
// ahci, igc and xhci_hcd to vfio-pci (options vfio-pci ids=…), which at the
// next boot takes the root disk, the network and the keyboard from the host.
// plan, apply and vfio bind refuse it, naming each device, its class and
// driver; only vfio bind --allow-host-devices lets them go.
func TestVFIOHostDevicesRefused(t *testing.T) {
	d := realDeps()
	simulatedKernel(t, d)
	root := fixtureRoot(t, "consumer-shared-group")
	orig := tree(t, root)
	sel := []string{"--select", "0000:02:00.0", "--select", "0000:00:14.0", "--select", "0000:00:17.0", "--select", "0000:03:00.0"}
	wants := []string{
		"0000:00:14.0 (USB controller 8086:7ae0, driver xhci_hcd) is selected but drives host USB ports",
		"0000:00:17.0 (SATA controller 8086:7ae2, driver ahci) is selected but holds host storage",
		"0000:03:00.0 (Ethernet controller 8086:15f3, driver igc) is selected but carries host network traffic",
		"gpuprep does not give storage, network, USB or other host controllers to VMs",
	}
	for _, args := range [][]string{
		{"plan", "--mode", "vm-passthrough"},
		{"apply", "--mode", "vm-passthrough", "--yes"},
		{"vfio", "bind", "--dry-run", "--persist"},
	} {
		out, errs, code := gpuprepWith(t, d, append(append(args, "--root", root), sel...)...)
		require.Equal(t, exitNotReady, code, "%v: %s%s", args, out, errs)
		for _, w := range wants {
			require.Contains(t, errs, w, args)
		}
		require.NotContains(t, out, "options vfio-pci", args)
		require.Equal(t, orig, tree(t, root), args)
	}
	_, errs, code := gpuprepWith(t, d, "apply", "--root", root, "--mode", "vm-passthrough", "--yes", "--allow-host-devices")
	require.Equal(t, exitUsage, code, "plan and apply have no override: %s", errs)

	out, errs, code := gpuprepWith(t, d, append([]string{"vfio", "bind", "--root", root, "--dry-run", "--persist", "--allow-host-devices"}, sel...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "gpuprep: warning: --allow-host-devices: 0000:00:17.0 (SATA controller, driver ahci) goes to VFIO: the host loses it")
	require.Contains(t, out, "options vfio-pci ids=10de:22ba,10de:2684,8086:15f3,8086:7ae0,8086:7ae2")
	require.Equal(t, orig, tree(t, root))

	// and check no longer suggests selecting them
	out, errs, _ = gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-passthrough")
	require.Contains(t, out, "move the GPU to a slot with its own IOMMU group", errs)
	require.NotContains(t, out, "--select the other devices")
}

// vfio unbind on a board with NVSwitches does not rebind GPUs from vfio-pci
// to nvidia while the system runs unless --live: --at-boot drops them from
// gpuprep's persistent configuration and leaves them on VFIO until the boot.
func TestVFIOUnbindOnNVSwitchBoard(t *testing.T) {
	d := realDeps()
	simulated(t, d)
	root := fixtureRoot(t, "hgx-h200")
	withTools(t, root)
	out, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist", "--select", "0000:13:00.0")
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:13:00.0"))

	// check's fix for containers is the command that works here
	out, _, _ = gpuprepWith(t, d, "check", "--root", root, "--mode", "container", "-o", "json")
	require.Contains(t, out, `"fixCommand": "gpuprep vfio unbind --at-boot --select 0000:13:00.0"`)

	out, errs, code = gpuprepWith(t, d, "vfio", "unbind", "--root", root, "--select", "0000:13:00.0")
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "refused: 0000:13:00.0 are on VFIO on a board with NVSwitches")
	require.Contains(t, errs, "run gpuprep vfio unbind --at-boot --select 0000:13:00.0 and reboot")
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:13:00.0"))
	require.FileExists(t, filepath.Join(root, vfio.ModprobeConf))

	out, errs, code = gpuprepWith(t, d, "vfio", "unbind", "--root", root, "--at-boot")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "0000:13:00.0 stay on VFIO until the next boot")
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:13:00.0"))
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf))

	out, errs, code = gpuprepWith(t, d, "vfio", "unbind", "--root", root, "--live")
	require.Equal(t, 0, code, out+errs)
	require.Equal(t, "nvidia", driverOf(t, root, "0000:13:00.0"))
}

// A device already back on its driver before bind (a boot gave it back) with
// gpuprep's driver_override still set: unbind clears the override and does
// not try to bind it again (which failed with "busy" and said it was left
// unbound).
func TestVFIOUnbindDeviceAlreadyOnItsDriver(t *testing.T) {
	d := realDeps()
	simulatedInitramfs(t, d)
	root := passthroughNode(t, false)
	toReboot(t, d, root)
	applyPassthrough(t, d, root)
	require.Equal(t, "vfio-pci", driverOf(t, root, offGPU))
	rebind(t, root, offGPU, "nvidia")
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys/bus/pci/devices", offGPU))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dev, "driver_override"), []byte("vfio-pci\n"), 0o644))
	out, errs, code := gpuprepWith(t, d, "vfio", "unbind", "--root", root)
	require.Equal(t, 0, code, out+errs)
	require.NotContains(t, out, "could not restore")
	require.NotContains(t, out, offGPU+": nvidia ->")
	require.Equal(t, "nvidia", driverOf(t, root, offGPU))
	b, err := os.ReadFile(filepath.Join(dev, "driver_override"))
	require.NoError(t, err)
	require.Equal(t, "(null)\n", string(b))
}
