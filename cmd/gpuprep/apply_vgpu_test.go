package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// vgpuNode plays the host of a vm-vgpu apply: the vGPU manager's installer,
// modprobe, systemctl and sriov-manage through vgputest.Host, other commands
// (update-grub) and sysfs writes through the fixture kernel simulator, and
// the vGPU attributes (current_vgpu_type, mdev create and remove) through
// vgputest.Host.WriteAttr.
type vgpuNode struct {
	dir string
	h   *vgputest.Host
	k   *fixture.Kernel
}

func (n *vgpuNode) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 3 && argv[0] == "systemctl" && argv[1] == "disable" {
		return nil, os.RemoveAll(filepath.Join(n.dir, "run/fake-systemd/is-enabled", argv[2]))
	}
	switch argv[0] {
	case "sh", "modprobe", "systemctl", vgpu.SRIOVManage, "update-initramfs":
		out, err := n.h.Run(ctx, argv...)
		if err == nil && strings.Join(argv, " ") == "modprobe nvidia" {
			err = n.nvidiaProbes()
		}
		return out, err
	}
	return n.k.Run(ctx, argv...)
}

// nvidiaProbes binds the NVIDIA GPUs nouveau let go of to nvidia, as
// loading the module does.
func (n *vgpuNode) nvidiaProbes() error {
	b := fixture.New(n.dir)
	b.Mkdir("/sys/bus/pci/drivers/nvidia")
	for _, a := range n.h.Root.Names("/sys/bus/pci/devices") {
		dev := "/sys/bus/pci/devices/" + a
		if v, _ := n.h.Root.ReadString(dev + "/vendor"); v != "0x10de" {
			continue
		}
		if d := n.h.Root.LinkBase(dev + "/driver"); d != "nouveau" && d != "" {
			continue
		}
		real, err := n.h.Root.Realpath(dev)
		if err != nil {
			return err
		}
		b.Remove(real+"/driver").Link(real+"/driver", "/sys/bus/pci/drivers/nvidia")
	}
	return b.Err()
}

func (n *vgpuNode) WriteAttr(p, v string) error {
	if err := n.h.WriteAttr(p, v); !errors.Is(err, vgputest.ErrNotSimulated) {
		return err
	}
	return n.k.WriteAttr(p, v)
}

func simulatedVGPUNode(t *testing.T, root string) *vgpuNode {
	t.Helper()
	h, err := vgputest.New(root)
	require.NoError(t, err)
	k, err := fixture.NewKernel(root)
	require.NoError(t, err)
	n := &vgpuNode{dir: root, h: h, k: k}
	oldK, oldQ, oldB := provisionKernel, provisionQuery, gpuprepBinary
	t.Cleanup(func() { provisionKernel, provisionQuery, gpuprepBinary = oldK, oldQ, oldB })
	provisionKernel = func(*host.Root) (vfio.Sysfs, host.Runner, error) { return n, n, nil }
	provisionQuery = func(*host.Root) host.Runner { return n }
	gpuprepBinary = func() string { return "/usr/local/bin/gpuprep" }
	return n
}

func vgpuConfigFile(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  l40s-24q:\n    - devices: all\n      vgpu-devices:\n        \"L40S-24Q\": 2\n"), 0o644))
	return cfg
}

// under is the part of a tree below prefix.
func under(tr map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range tr {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func vfType(t *testing.T, root, vf string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", vf, "nvidia/current_vgpu_type"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func TestApplyVMVGPUFreshSRIOV(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	// a node whose kernel runs without the IOMMU arguments yet
	for _, f := range []string{"proc/cmdline", "etc/default/grub"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(strings.ReplaceAll(string(b), " intel_iommu=on iommu=pt", "")), 0o644))
	}
	n := simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	cfg := vgpuConfigFile(t)
	orig := tree(t, root)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q", "--driver", run}

	out, errs, code := gpuprep(t, append([]string{"plan", "-o", "json"}, args...)...)
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.Equal(t, []string{"kernel-args", "reboot", "vgpu-install", "vgpu-devices", "label"}, p.ids())
	require.True(t, p.Steps[3].Deferred)
	out, errs, code = gpuprep(t, append([]string{"plan"}, args...)...)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "run: sh "+run+" --silent --dkms")
	require.Contains(t, out, "run: /usr/lib/nvidia/sriov-manage -e 0000:41:00.0")
	require.Contains(t, out, `create the vGPUs of config "l40s-24q" (2× L40S-24Q on 0000:41:00.0, 2× L40S-24Q on 0000:61:00.0)`)
	require.Contains(t, out, "nvidia.com/vgpu.config=l40s-24q")
	require.Equal(t, orig, tree(t, root), "plan changes nothing")
	require.Equal(t, 0, journalLen(t, root))

	// before the reboot: kernel arguments only
	out, errs, code = gpuprep(t, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.NoFileExists(t, filepath.Join(root, "usr/bin/nvidia-vgpu-mgr"))
	require.NoFileExists(t, filepath.Join(root, vgpu.NouveauBlacklist))

	simulateReboot(t, root)
	out, errs, code = gpuprep(t, append([]string{"apply", "--yes", "-o", "json"}, args...)...)
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
	require.Contains(t, string(unit), "ExecStart=/usr/local/bin/gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml -c l40s-24q\n")
	kubelet, err := os.ReadFile(filepath.Join(root, "etc/default/kubelet"))
	require.NoError(t, err)
	require.Contains(t, string(kubelet), "nvidia.com/gpu.workload.config=vm-vgpu")
	require.Contains(t, string(kubelet), "nvidia.com/vgpu.config=l40s-24q")
	require.FileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))

	// a re-run is a no-op, and once the manager runs --driver is not needed
	jl, after := journalLen(t, root), tree(t, root)
	out, errs, _ = gpuprep(t, append([]string{"apply", "--yes"}, args...)...)
	require.Contains(t, out, "Nothing to do", errs)
	out, errs, code = gpuprep(t, "plan", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to do")
	require.Equal(t, jl, journalLen(t, root))
	require.Equal(t, after, tree(t, root))

	// rollback: the vGPUs removed, the files back, the manager stays
	out, errs, code = gpuprep(t, "rollback", "--root", root)
	require.Equal(t, exitNeedReboot, code, out+errs)
	require.Contains(t, out, "the vGPU manager stays installed")
	for _, vf := range vfs {
		require.Equal(t, "0", vfType(t, root, vf), vf)
	}
	require.Equal(t, under(orig, "etc/"), under(tree(t, root), "etc/"))
	require.NoFileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.ApplyUnitName))
	require.NoFileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", vgpu.SRIOVUnitName))
	require.FileExists(t, filepath.Join(root, "usr/bin/nvidia-vgpu-mgr"))
	require.NoFileExists(t, filepath.Join(root, vgpu.TypeNames))
	require.Contains(t, n.h.Commands(), "update-initramfs -u")

	out, errs, code = gpuprep(t, "rollback", "--root", root)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "Nothing to roll back.")
}

func TestPlanVMVGPUUsageErrors(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	simulatedVGPUNode(t, root)
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
			"--driver FILE is required: the vGPU manager is not installed and running (the nvidia module is not loaded; no /usr/bin/nvidia-vgpu-mgr; nvidia-vgpu-mgr.service is not active; the SR-IOV VFs of 0000:41:00.0 are not enabled"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "nope"}, `no vgpu-config "nope" (have l40s-24q)`},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "bad value!"}, "--vgpu-config:"},
		{[]string{"--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "l40s-24q", "--driver", plain}, "--driver " + plain},
	} {
		for _, cmd := range []string{"plan", "apply"} {
			pre := []string{cmd, "--root", root}
			if cmd == "apply" {
				pre = append(pre, "--yes")
			}
			_, errs, code := gpuprep(t, append(pre, c.args...)...)
			require.Equal(t, exitUsage, code, "%s %v: %s", cmd, c.args, errs)
			require.Contains(t, errs, c.want, "%s %v", cmd, c.args)
		}
	}
	require.Equal(t, 0, journalLen(t, root))
}
