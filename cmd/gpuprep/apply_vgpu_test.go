package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/provision"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// vgpuNode plays the host of a vm-vgpu apply: the vGPU manager's installer,
// modprobe, systemctl, sriov-manage and nvidia-smi through vgputest.Host, other commands
// (update-grub) and sysfs writes through the fixture kernel simulator, and
// the vGPU attributes (current_vgpu_type, mdev create and remove) through
// vgputest.Host.WriteAttr.
type vgpuNode struct {
	dir string
	h   *vgputest.Host
	k   *fixture.Kernel
}

func (n *vgpuNode) Run(ctx context.Context, argv ...string) ([]byte, error) {
	switch argv[0] {
	case "sh", "modprobe", "systemctl", vgpu.SRIOVManage, "update-initramfs", vgpu.NVIDIASMI, vgpu.RunUninstaller:
		return n.h.Run(ctx, argv...)
	}
	return n.k.Run(ctx, argv...)
}

func (n *vgpuNode) WriteAttr(p, v string) error {
	if err := n.h.WriteAttr(p, v); !errors.Is(err, vgputest.ErrNotSimulated) {
		return err
	}
	return n.k.WriteAttr(p, v)
}

// newVGPUNode returns a simulated vm-vgpu host for the fixture root dir.
func newVGPUNode(dir string) (*vgpuNode, error) {
	h, err := vgputest.New(dir)
	if err != nil {
		return nil, err
	}
	k, err := fixture.NewKernel(dir)
	if err != nil {
		return nil, err
	}
	return &vgpuNode{dir: dir, h: h, k: k}, nil
}

// simulatedVGPUNode makes apply, rollback and plan act on root through a
// vgpuNode (the same one for every command of the test): the commands run
// through the deps it gives.
func simulatedVGPUNode(t *testing.T, root string) (*vgpuNode, *deps) {
	t.Helper()
	n, err := newVGPUNode(root)
	require.NoError(t, err)
	d := realDeps()
	d.provisionKernel = func(*host.Root) (vfio.Sysfs, host.Runner, error) { return n, n, nil }
	d.provisionQuery = func(*host.Root) host.Runner { return n }
	self := fakeGpuprep(t)
	d.gpuprepBinary = func() string { return self }
	return n, d
}

func vgpuConfigFile(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  l40s-24q:\n    - devices: all\n      vgpu-devices:\n        \"L40S-24Q\": 2\n"), 0o644))
	return cfg
}

func vfType(t *testing.T, root, vf string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", vf, "nvidia/current_vgpu_type"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// withoutIOMMUArgs makes root a node whose kernel runs without the IOMMU
// arguments, and whose bootloader configuration lacks them too: on its
// kernel (not built with CONFIG_INTEL_IOMMU_DEFAULT_ON) the IOMMU is then
// off, so its units are gone (simulateReboot brings them back).
func withoutIOMMUArgs(t *testing.T, root string) {
	t.Helper()
	for _, f := range []string{"proc/cmdline", "etc/default/grub"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(strings.ReplaceAll(string(b), " intel_iommu=on iommu=pt", "")), 0o644))
	}
	units, err := filepath.Glob(filepath.Join(root, "sys/class/iommu/*"))
	require.NoError(t, err)
	for _, u := range units {
		require.NoError(t, os.Remove(u))
	}
}

func TestApplyVMVGPUFreshSRIOV(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	withoutIOMMUArgs(t, root)
	n, d := simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	cfg := vgpuConfigFile(t)
	orig := tree(t, root)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q", "--driver", run}

	out, errs, code := gpuprepWith(t, d, append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vgpu-install", "vgpu-devices", "label"}, p.ids())
	require.True(t, p.Steps[3].Deferred)
	out, errs, code = gpuprepWith(t, d, append([]string{"plan"}, args...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "run: sh "+run+" --silent --dkms")
	require.Contains(t, out, "run: /usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.Contains(t, out, `create the vGPUs of config "l40s-24q" (2× L40S-24Q on 0000:41:00.0, 2× L40S-24Q on 0000:61:00.0)`)
	require.Contains(t, out, "nvidia.com/vgpu.config=l40s-24q")
	require.Equal(t, orig, tree(t, root), "plan changes nothing")
	require.Equal(t, 0, journalLen(t, root))

	// before the reboot: kernel arguments only
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.NoFileExists(t, filepath.Join(root, "usr/bin/nvidia-vgpu-mgr"))
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))

	simulateReboot(t, root)
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes", "-o", "json"}, args...)...)
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, []struct{ ID, Status string }{{"vgpu-install", "done"}, {"vgpu-devices", "done"}, {"label", "done"}}, a.Outcome.Steps, out+errs)
	require.NotNil(t, a.Report, out)
	require.Equal(t, "pass", findingStatus(a, "vgpu.manager", ""), out)
	require.True(t, a.Report.Ready, out)
	require.Equal(t, 0, code, errs)
	require.Equal(t, "nvidia", driverOf(t, root, "0000:41:00.0"))
	vfs := []string{"0000:41:00.4", "0000:41:00.5", "0000:61:00.4", "0000:61:00.5"}
	for _, vf := range vfs {
		require.Equal(t, "1155", vfType(t, root, vf), vf)
	}
	require.Equal(t, "0", vfType(t, root, "0000:41:00.6"))
	for _, f := range []string{vgpu.NouveauBlacklist, vgpu.SRIOVUnit, vgpu.ApplyUnit, vgpu.PersistedConfig} {
		require.FileExists(t, filepath.Join(root, f))
	}
	unit, err := os.ReadFile(filepath.Join(root, vgpu.ApplyUnit))
	require.NoError(t, err)
	require.Contains(t, string(unit), "ExecStart=/usr/local/libexec/gpuprep/gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml -c l40s-24q\n")
	requireInstalledGpuprep(t, root, d.gpuprepBinary())
	kubelet, err := os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.Contains(t, string(kubelet), "nvidia.com/gpu.workload.config=vm-vgpu")
	require.Contains(t, string(kubelet), "nvidia.com/vgpu.config=l40s-24q")
	require.FileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))

	// a re-run is a no-op, and once the manager runs --driver is not needed
	jl, after := journalLen(t, root), tree(t, root)
	out, errs, _ = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Contains(t, out, "Nothing to do", errs)
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to do")
	require.Equal(t, jl, journalLen(t, root))
	require.Equal(t, after, tree(t, root))

	// someone gives one of gpuprep's VFs another type by hand: not gpuprep's to clear
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/bus/pci/devices", vfs[0], "nvidia/current_vgpu_type"), []byte("1156\n"), 0o644))

	// rollback: the vGPUs removed, the files back, the manager stays
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "the vGPU manager stays installed")
	require.Contains(t, out, "VF "+vfs[0]+" holds vGPU type 1156, not the type gpuprep gave it (1155")
	require.Equal(t, "1156", vfType(t, root, vfs[0]))
	for _, vf := range vfs[1:] {
		require.Equal(t, "0", vfType(t, root, vf), vf)
	}
	require.Equal(t, exceptManager(orig), exceptManager(tree(t, root)), "every file but the manager's as before, the initramfs too")
	require.NoFileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))
	require.NoFileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.SRIOVUnitName))
	require.FileExists(t, filepath.Join(root, "usr/bin/nvidia-vgpu-mgr"))
	require.NoFileExists(t, filepath.Join(root, vgpu.TypeNames))
	require.Contains(t, n.h.Commands(), "update-initramfs -u")

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to roll back.")
}

func TestPlanVMVGPUUsageErrors(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	_, d := simulatedVGPUNode(t, root)
	cfg := vgpuConfigFile(t)
	plain, err := vgputest.WriteInstaller(t.TempDir(), "550.90.07", "")
	require.NoError(t, err)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "vm-vgpu"}, "--mode vm-vgpu needs --vgpu-config-file FILE (the vgpu-device-manager config) and --vgpu-config NAME"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config", "l40s-24q"}, "--mode vm-vgpu needs --vgpu-config-file FILE"},
		{[]string{"--mode", "container", "--driver", plain}, "apply to --mode vm-vgpu only"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q"},
			"--driver FILE is required: the vGPU manager is not installed and running (the nvidia module is not loaded; no /usr/bin/nvidia-vgpu-mgr; nvidia-vgpu-mgr.service is not active; VFs not all enabled: 0000:41:00.0 (0 of 16 VFs enabled), 0000:61:00.0 (0 of 16 VFs enabled)"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "nope"}, `no vgpu-config "nope" (have l40s-24q)`},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "bad value!"}, "--vgpu-config:"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q", "--driver", plain}, "--driver " + plain},
	} {
		for _, cmd := range []string{"plan", "apply"} {
			pre := []string{cmd, "--root", root}
			if cmd == "apply" {
				pre = append(pre, "--yes")
			}
			_, errs, code := gpuprepWith(t, d, append(pre, c.args...)...)
			require.Equal(t, exitUsage, code, "%s %v: %s", cmd, c.args, errs)
			require.Contains(t, errs, c.want, "%s %v", cmd, c.args)
		}
	}
	require.Equal(t, 0, journalLen(t, root))
}

// The T4 of vgpu-fresh-mdev, and an mdev that is not gpuprep's: mdevctl
// defines it (start: auto), so mdevctl's udev rule creates it as soon as
// the T4 becomes an mdev parent, i.e. in the middle of gpuprep's install.
const (
	t4          = "0000:21:00.0"
	mdevctlUUID = "5a3e7c1d-0b4f-4e2a-9c61-3f8d2b7a9e10"
)

func withMdevctlDefinition(t *testing.T, root string) {
	t.Helper()
	require.NoError(t, fixture.New(root).File(vgputest.MdevctlDir+"/"+t4+"/"+mdevctlUUID, `{"mdev_type": "nvidia-224", "start": "auto", "attrs": []}`+"\n").Err())
}

func t4ConfigFile(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  t4-4q:\n    - devices: all\n      vgpu-devices:\n        \"T4-4Q\": 3\n"), 0o644))
	return cfg
}

// mdevsOf lists the mdevs there are: UUID → "PARENT TYPE".
func mdevsOf(t *testing.T, root string) map[string]string {
	t.Helper()
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	out := map[string]string{}
	for _, u := range r.Names("/sys/bus/mdev/devices") {
		real, err := r.Realpath("/sys/bus/mdev/devices/" + u)
		require.NoError(t, err)
		out[u] = path.Base(path.Dir(real)) + " " + r.LinkBase(real+"/mdev_type")
	}
	return out
}

// journalVGPUs lists the vGPUs the journal records apply creating and no
// rollback undoing: mdev UUIDs and VF addresses.
func journalVGPUs(t *testing.T, root string) []string {
	t.Helper()
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	es, err := journal.Read(r)
	require.NoError(t, err)
	undone := map[string]bool{}
	for _, e := range es {
		if e.Kind == provision.KindUndone {
			undone[e.Before] = true
		}
	}
	var out []string
	for i, e := range es {
		if e.Kind != provision.KindVGPU || e.Command != "apply" || undone[strconv.Itoa(i)] {
			continue
		}
		if strings.HasSuffix(e.Path, "/create") {
			out = append(out, e.After)
		} else {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(e.Path, "/sys/bus/pci/devices/"), "/nvidia/current_vgpu_type"))
		}
	}
	sort.Strings(out)
	return out
}

func countCommand(cmds [][]string, want string) int {
	n := 0
	for _, c := range cmds {
		if strings.Join(c, " ") == want {
			n++
		}
	}
	return n
}

func availableInstances(t *testing.T, root, typ string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", t4, "mdev_supported_types", typ, "available_instances"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func TestApplyVMVGPUFreshMdev(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-mdev")
	withTools(t, root)
	withoutIOMMUArgs(t, root)
	withMdevctlDefinition(t, root)
	n, d := simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	cfg := t4ConfigFile(t)
	orig := tree(t, root)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "t4-4q", "--driver", run}

	out, errs, code := gpuprepWith(t, d, append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vgpu-install", "vgpu-devices", "label"}, p.ids())
	require.True(t, p.Steps[3].Deferred)
	out, errs, code = gpuprepWith(t, d, append([]string{"plan"}, args...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "run: sh "+run+" --silent --dkms")
	require.Contains(t, out, "run: modprobe nvidia_vgpu_vfio")
	require.NotContains(t, out, "sriov-manage", "a T4 reports VFs but uses mdev")
	require.NotContains(t, out, vgpu.SRIOVUnitName)
	require.Contains(t, out, `create the vGPUs of config "t4-4q" (3× T4-4Q on 0000:21:00.0)`)
	require.Contains(t, out, "nvidia.com/vgpu.config=t4-4q")
	require.Equal(t, orig, tree(t, root), "plan changes nothing")
	require.Equal(t, 0, journalLen(t, root))

	// before the reboot: kernel arguments only
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.NoFileExists(t, filepath.Join(root, "usr/bin/nvidia-vgpu-mgr"))
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))
	require.Empty(t, mdevsOf(t, root))

	simulateReboot(t, root)
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes", "-o", "json"}, args...)...)
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, []struct{ ID, Status string }{{"vgpu-install", "done"}, {"vgpu-devices", "done"}, {"label", "done"}}, a.Outcome.Steps, out+errs)
	require.NotNil(t, a.Report, out)
	for _, c := range []string{"vgpu.manager", "vgpu.types", "vgpu.support"} {
		require.Equal(t, "pass", findingStatus(a, c, ""), "%s: %s", c, out)
	}
	require.True(t, a.Report.Ready, out)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, `create 2 vGPUs of config \"t4-4q\" (1 kept)`, "the mdevctl-defined T4-4Q counts")
	require.Equal(t, "nvidia", driverOf(t, root, t4))
	require.FileExists(t, filepath.Join(root, "sys/module/nvidia_vgpu_vfio/initstate"))

	// three T4-4Q: mdevctl's and the two gpuprep created (and journalled)
	ms := mdevsOf(t, root)
	require.Len(t, ms, 3, "%v", ms)
	for u, m := range ms {
		require.Equal(t, t4+" nvidia-224", m, u)
	}
	created := journalVGPUs(t, root)
	require.Len(t, created, 2)
	require.NotContains(t, created, mdevctlUUID)
	var log struct{ Log []string }
	require.NoError(t, json.Unmarshal([]byte(out), &log))
	for _, u := range created {
		require.Contains(t, ms, u)
		require.Contains(t, log.Log, "wrote "+u+" > /sys/bus/pci/devices/"+t4+"/mdev_supported_types/nvidia-224/create  (create an mdev of nvidia-224)")
	}
	require.Contains(t, ms, mdevctlUUID)
	require.Equal(t, "1", availableInstances(t, root, "nvidia-224"))
	require.Equal(t, "0", availableInstances(t, root, "nvidia-222"), "a T4 runs one type at a time")

	for _, f := range []string{vgpu.NouveauBlacklist, vgpu.ApplyUnit, vgpu.PersistedConfig} {
		require.FileExists(t, filepath.Join(root, f))
	}
	require.NoFileExists(t, filepath.Join(root, vgpu.SRIOVUnit), "no VFs to enable")
	img, err := os.ReadFile(filepath.Join(root, "boot/initrd.img-5.15.0-91-generic"))
	require.NoError(t, err)
	require.Contains(t, string(img), "== etc/modprobe.d/gpuprep-blacklist-nouveau.conf\n", "the initramfs keeps nouveau out")
	require.NoFileExists(t, filepath.Join(root, vgpu.TypeNames), "mdev types name themselves")
	unit, err := os.ReadFile(filepath.Join(root, vgpu.ApplyUnit))
	require.NoError(t, err)
	require.Contains(t, string(unit), "ExecStart=/usr/local/libexec/gpuprep/gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml -c t4-4q\n")
	kubelet, err := os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.Contains(t, string(kubelet), "nvidia.com/gpu.workload.config=vm-vgpu")
	require.Contains(t, string(kubelet), "nvidia.com/vgpu.config=t4-4q")
	require.FileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))
	for _, c := range n.h.Commands() {
		require.NotContains(t, c, "sriov-manage")
	}

	// a re-run is a no-op, and once the manager runs --driver is not needed
	jl, after := journalLen(t, root), tree(t, root)
	out, errs, _ = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Contains(t, out, "Nothing to do", errs)
	out, errs, code = gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "t4-4q")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to do")
	require.Equal(t, jl, journalLen(t, root))
	require.Equal(t, after, tree(t, root))
	require.Equal(t, ms, mdevsOf(t, root))

	// a VM holds one of gpuprep's vGPUs: rollback leaves it and says why
	grp, err := os.Readlink(filepath.Join(root, "sys/bus/mdev/devices", created[0], "iommu_group"))
	require.NoError(t, err)
	b := fixture.New(root).File("/proc/999/comm", "qemu-kvm\n").Mkdir("/proc/999/fd")
	require.NoError(t, b.Err())
	require.NoError(t, os.Symlink("/dev/vfio/"+path.Base(grp), filepath.Join(root, "proc/999/fd/3")))
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNotReady, code, out+errs)
	require.Contains(t, errs, "vGPU "+created[0]+" is in use by 999 (qemu-kvm: /dev/vfio/"+path.Base(grp)+") (a VM?): stop it or pass --force")
	require.Contains(t, mdevsOf(t, root), created[0])
	require.NotContains(t, mdevsOf(t, root), created[1])

	// the VM stops: rollback finishes; the vGPUs gpuprep created are
	// removed, mdevctl's stays, the files are back, the manager stays
	// (the first run restored /etc/default/grub; this one regenerates the
	// boot menu again, as it cannot know the first got that far)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "proc/999")))
	grubRuns := countCommand(n.k.Commands, "update-grub")
	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Equal(t, grubRuns+1, countCommand(n.k.Commands, "update-grub"))
	require.Contains(t, out, "the vGPU manager stays installed")
	require.Contains(t, out, "reboot the node")
	require.Equal(t, map[string]string{mdevctlUUID: t4 + " nvidia-224"}, mdevsOf(t, root))
	require.Equal(t, "3", availableInstances(t, root, "nvidia-224"))
	require.Equal(t, exceptManager(orig), exceptManager(tree(t, root)), "every file but the manager's as before, the initramfs too")
	require.NoFileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))
	require.FileExists(t, filepath.Join(root, "usr/bin/nvidia-vgpu-mgr"))
	require.FileExists(t, filepath.Join(root, "sys/module/nvidia_vgpu_vfio/initstate"))
	require.Contains(t, n.h.Commands(), "update-initramfs -u")
	require.Empty(t, journalVGPUs(t, root))

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to roll back.")
}

// A node whose GPUs were bound to vfio-pci (for passthrough) and that is now planned for vGPUs: the GPUs go back to
// their drivers first (a vfio-unbind step before the install, as check's vfio.binding asks in vm-vgpu mode), and
// apply leaves them on the vGPU manager's nvidia with the vGPUs made.
func TestApplyVMVGPUAfterPassthrough(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	// bound to vfio-pci and persisted, as vfio bind --persist leaves it (journal: nouveau before)
	d := realDeps()
	simulated(t, d)
	_, errs, code := gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "vfio-pci", driverOf(t, root, "0000:41:00.0"))
	out, _, code := gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-vgpu")
	require.Equal(t, exitNotReady, code)
	require.Contains(t, out, "vfio.binding")

	_, d = simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", vgpuConfigFile(t), "--vgpu-config", "l40s-24q", "--driver", run}
	out, errs, code = gpuprepWith(t, d, append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"vfio-unbind", "vgpu-install", "vgpu-devices", "label"}, p.ids())

	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes", "-o", "json"}, args...)...)
	var a applyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &a), out+errs)
	require.Equal(t, []struct{ ID, Status string }{{"vfio-unbind", "done"}, {"vgpu-install", "done"}, {"vgpu-devices", "done"}, {"label", "done"}}, a.Outcome.Steps, out+errs)
	require.Equal(t, 0, code, out+errs)
	require.True(t, a.Report.Ready, out)
	require.Equal(t, "nvidia", driverOf(t, root, "0000:41:00.0"))
	require.Equal(t, "nvidia", driverOf(t, root, "0000:61:00.0"))
	require.NoFileExists(t, filepath.Join(root, vfio.ModprobeConf), "gpuprep's persistent VFIO binding is gone")
}
