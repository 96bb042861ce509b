package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// wantsNode is a vgpuNode whose systemctl enable also links the unit into
// the wants directory of each of its WantedBy= targets in
// /etc/systemd/system, and disable removes those links, as systemctl does
// (systemd src/shared/install.c: install_info_symlink_wants makes
// <target>.wants/<unit> -> the unit's path; disable removes the links to
// it): what check reads to tell an enabled unit.
type wantsNode struct{ *vgpuNode }

func (n wantsNode) Run(ctx context.Context, argv ...string) ([]byte, error) {
	out, err := n.vgpuNode.Run(ctx, argv...)
	if err != nil || len(argv) < 3 || argv[0] != "systemctl" || argv[1] != "enable" && argv[1] != "disable" {
		return out, err
	}
	for _, u := range argv[2:] {
		if strings.HasPrefix(u, "-") {
			continue
		}
		for _, dir := range []string{"/etc/systemd/system/", "/lib/systemd/system/", "/usr/lib/systemd/system/"} {
			b, rerr := os.ReadFile(filepath.Join(n.dir, dir, u))
			if rerr != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				targets, ok := strings.CutPrefix(strings.TrimSpace(l), "WantedBy=")
				if !ok {
					continue
				}
				for _, tg := range strings.Fields(targets) {
					link := filepath.Join(n.dir, "etc/systemd/system", tg+".wants", u)
					_ = os.Remove(link)
					if argv[1] == "enable" {
						if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
							return out, err
						}
						if err := os.Symlink(dir+u, link); err != nil {
							return out, err
						}
					}
				}
			}
			break
		}
	}
	return out, nil
}

// apply --mode vm-vgpu on vendor-specific VFIO GPUs installs what creates
// their vGPUs again at boot, and check then passes that it does; before
// the persistence is in place (the vGPUs written, the unit not yet) it
// warns.
func TestApplyVMVGPUInstallsWhatRecreatesVendorVGPUs(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	withoutIOMMUArgs(t, root)
	vn, err := newVGPUNode(root)
	require.NoError(t, err)
	n := wantsNode{vn}
	d := realDeps()
	d.provisionKernel = func(*host.Root) (vfio.Sysfs, host.Runner, error) { return vn, n, nil }
	d.provisionQuery = func(*host.Root) host.Runner { return n }
	self := fakeGpuprep(t)
	d.gpuprepBinary = func() string { return self }
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	args := []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", vgpuConfigFile(t), "--vgpu-config", "l40s-24q", "--driver", run}

	out, errs, code := gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, exitNeedReboot, code, out+errs)
	simulateReboot(t, root)
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, 0, code, out+errs)

	boot := func() (status, message string) {
		t.Helper()
		out, errs, _ := gpuprepWith(t, d, "check", "--root", root, "--mode", "vm-vgpu", "-o", "json")
		var r struct {
			Findings []struct{ Check, Status, Subject, Message string } `json:"findings"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &r), out+errs)
		for _, f := range r.Findings {
			if f.Check == "vgpu.types" && f.Subject == vgpu.ApplyUnit {
				return f.Status, f.Message
			}
		}
		t.Fatalf("no vgpu.types finding on %s in %s", vgpu.ApplyUnit, out)
		return "", ""
	}
	status, msg := boot()
	require.Equal(t, "pass", status, msg)
	require.Contains(t, msg, "4 vGPUs on the VFs of 0000:41:00.0, 0000:61:00.0 (vendor-specific VFIO) are created again at boot")
	require.FileExists(t, filepath.Join(root, "etc/systemd/system/multi-user.target.wants", vgpu.ApplyUnitName))

	// the unit disabled by hand: check says so
	_, err = n.Run(t.Context(), "systemctl", "disable", vgpu.ApplyUnitName)
	require.NoError(t, err)
	status, msg = boot()
	require.Equal(t, "warn", status, msg)
	require.Contains(t, msg, "gpuprep-vgpu-apply.service is not enabled")
	// apply puts it back
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
	require.Equal(t, 0, code, out+errs)
	status, msg = boot()
	require.Equal(t, "pass", status, msg)

	// the unit that enables the VFs at boot gone (a manager installed
	// before gpuprep, with every VF enabled by hand): check says so, and
	// apply, which needs no --driver then, writes and enables it without
	// running sriov-manage under the live vGPUs
	_, err = n.Run(t.Context(), "systemctl", "disable", vgpu.SRIOVUnitName)
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(root, vgpu.SRIOVUnit)))
	status, msg = boot()
	require.Equal(t, "warn", status, msg)
	require.Contains(t, msg, "wants /etc/systemd/system/gpuprep-vgpu-sriov.service, which enables the VFs at boot")
	noDriver := args[:len(args)-2]
	out, errs, code = gpuprepWith(t, d, append([]string{"plan"}, noDriver...)...)
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "enable the SR-IOV VFs at every boot (gpuprep-vgpu-sriov.service)")
	require.NotContains(t, out, "run: /usr/lib/nvidia/sriov-manage")
	calls := len(vn.h.Commands())
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, noDriver...)...)
	require.Equal(t, 0, code, out+errs)
	require.NotContains(t, strings.Join(vn.h.Commands()[calls:], "\n"), "sriov-manage")
	require.FileExists(t, filepath.Join(root, vgpu.SRIOVUnit))
	status, msg = boot()
	require.Equal(t, "pass", status, msg)
	out, errs, _ = gpuprepWith(t, d, append([]string{"plan"}, noDriver...)...)
	require.Contains(t, out, "Nothing to do", errs)
}
