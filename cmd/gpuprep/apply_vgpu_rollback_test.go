package main

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

// vgpuCase is one vGPU interface's node for a whole vm-vgpu apply.
type vgpuCase struct {
	name, fixture, config string
	configFile            func(t *testing.T) string
	setup                 func(t *testing.T, root string)
	// foreign are the vGPUs there are after the apply that are not
	// gpuprep's (they stay through any rollback)
	foreign map[string]string
	units   []string // units the install step writes and enables
}

var vgpuCases = []vgpuCase{
	{name: "sriov", fixture: "vgpu-fresh-sriov", config: "l40s-24q", configFile: vgpuConfigFile,
		units: []string{vgpu.SRIOVUnitName}},
	{name: "mdev", fixture: "vgpu-fresh-mdev", config: "t4-4q", configFile: t4ConfigFile, setup: withMdevctlDefinition,
		foreign: map[string]string{mdevctlUUID: t4 + " nvidia-224"}},
}

// vgpusOf lists the vGPUs there are: mdevs (UUID → "PARENT TYPE") and VFs
// with a type (address → type id; an empty current_vgpu_type, which a VF
// the simulator was killed making has, is none, as for vgpu.Existing).
func vgpusOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := mdevsOf(t, root)
	r, err := host.NewRoot(root)
	require.NoError(t, err)
	for _, a := range r.Names("/sys/bus/pci/devices") {
		if cur, err := r.ReadString("/sys/bus/pci/devices/" + a + "/nvidia/current_vgpu_type"); err == nil && cur != "0" && cur != "" {
			out[a] = cur
		}
	}
	return out
}

// appliedVGPUNode is c's node after apply --mode vm-vgpu across the
// reboot, with the tree before the apply.
func appliedVGPUNode(t *testing.T, c vgpuCase) (root string, n *vgpuNode, d *deps, args []string, orig map[string]string) {
	t.Helper()
	root = fixtureRoot(t, c.fixture)
	withTools(t, root)
	withoutIOMMUArgs(t, root)
	if c.setup != nil {
		c.setup(t, root)
	}
	n, d = simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	args = []string{"--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", c.configFile(t), "--vgpu-config", c.config}
	orig = tree(t, root)
	out, errs, code := gpuprepWith(t, d, append([]string{"apply", "--yes", "--driver", run}, args...)...)
	require.Equal(t, exitNeedReboot, code, out+errs)
	simulateReboot(t, root)
	out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes", "--driver", run}, args...)...)
	require.Equal(t, exitOK, code, out+errs)
	return root, n, d, args, orig
}

// managerFile reports whether a path (relative to the root) is the vGPU
// manager's own: what its installer writes and its daemons' systemd state.
// rollback leaves the manager installed.
func managerFile(p string) bool {
	for _, d := range []string{"usr/", "lib/", "var/log/", "var/lib/nvidia/"} {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	// the manager's units, enabled by the install (their state in the
	// fake systemd, their links in the targets' .wants)
	return (strings.HasPrefix(p, "run/fake-systemd/") || strings.HasPrefix(p, "etc/systemd/system/") && strings.HasSuffix(path.Dir(p), ".wants")) &&
		strings.HasPrefix(path.Base(p), "nvidia-")
}

// exceptManager is tr without the vGPU manager's files.
func exceptManager(tr map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tr {
		if !managerFile(k) {
			out[k] = v
		}
	}
	return out
}

// restored is tr with the paths back to what they are in orig (absent
// where orig lacks them).
func restored(tr, orig map[string]string, paths ...string) map[string]string {
	out := map[string]string{}
	for k, v := range tr {
		out[k] = v
	}
	for _, p := range paths {
		if v, ok := orig[p]; ok {
			out[p] = v
		} else {
			delete(out, p)
		}
	}
	return out
}

// TestRollbackToVGPUSteps: --to keeps the steps up to the one named and
// undoes those after it. --to vgpu-devices undoes the labels only; --to
// vgpu-install also the vGPUs gpuprep created and their persistence, and
// keeps the install and the kernel arguments; apply then puts back only
// what was undone.
func TestRollbackToVGPUSteps(t *testing.T) {
	for _, c := range vgpuCases {
		t.Run(c.name, func(t *testing.T) {
			root, n, d, args, orig := appliedVGPUNode(t, c)
			applied, vgpus := tree(t, root), vgpusOf(t, root)
			created := journalVGPUs(t, root)
			require.NotEmpty(t, created)
			require.Len(t, vgpus, len(created)+len(c.foreign))
			const kubelet = "etc/default/kubelet"
			require.Contains(t, applied[kubelet], "nvidia.com/vgpu.config="+c.config)
			grubRuns, initramfsRuns := countCommand(n.k.Commands, "update-grub"), countCommand(splitAll(n.h.Commands()), "update-initramfs -u")

			// --to vgpu-devices: the labels go, everything else stays
			out, errs, code := gpuprepWith(t, d, "rollback", "--root", root, "--to", "vgpu-devices")
			require.Equal(t, exitOK, code, out+errs)
			require.NotContains(t, out, "the vGPU manager stays installed", "the install is not in the range")
			require.Equal(t, restored(applied, orig, kubelet), tree(t, root))
			require.Equal(t, vgpus, vgpusOf(t, root))
			require.Equal(t, created, journalVGPUs(t, root))

			// --to vgpu-install: the vGPUs gpuprep created and their
			// persistence go too; the install and the kernel arguments stay
			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--to", "vgpu-install")
			require.Equal(t, exitOK, code, out+errs)
			require.NotContains(t, out, "the vGPU manager stays installed")
			for _, v := range created {
				require.Contains(t, out, "removed vGPU "+v)
			}
			want := map[string]string{}
			for k, v := range c.foreign {
				want[k] = v
			}
			require.Equal(t, want, vgpusOf(t, root))
			require.Empty(t, journalVGPUs(t, root))
			gone := []string{kubelet, strings.TrimPrefix(vgpu.ApplyUnit, "/"), strings.TrimPrefix(vgpu.PersistedConfig, "/"),
				strings.TrimPrefix(vgpu.InstalledBinary, "/"), "run/fake-systemd/is-enabled/" + vgpu.ApplyUnitName,
				"etc/systemd/system/multi-user.target.wants/" + vgpu.ApplyUnitName}
			require.Equal(t, restored(applied, orig, gone...), tree(t, root))
			require.NoFileExists(t, filepath.Join(root, vgpu.TypeNames))
			grub, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
			require.NoError(t, err)
			require.Contains(t, string(grub), "intel_iommu=on iommu=pt")
			for _, f := range []string{vgpu.NouveauBlacklist, "usr/bin/nvidia-vgpu-mgr", "run/fake-systemd/is-active/nvidia-vgpu-mgr.service"} {
				require.FileExists(t, filepath.Join(root, f))
			}
			for _, u := range c.units {
				require.FileExists(t, filepath.Join(root, "etc/systemd/system", u))
				require.FileExists(t, filepath.Join(root, "run/fake-systemd/is-enabled", u))
			}
			require.Equal(t, grubRuns, countCommand(n.k.Commands, "update-grub"), "the kernel arguments were kept")
			require.Equal(t, initramfsRuns, countCommand(splitAll(n.h.Commands()), "update-initramfs -u"), "the nouveau blacklist was kept")

			// vgpu-devices is undone now: not a step to keep
			_, errs, code = gpuprepWith(t, d, "rollback", "--root", root, "--to", "vgpu-devices")
			require.Equal(t, exitUsage, code, errs)
			require.Contains(t, errs, "--to vgpu-devices: not a step recorded done in the journal (done: kernel-args, vgpu-install)")

			// apply puts back what was undone, without --driver: the manager runs
			out, errs, code = gpuprepWith(t, d, append([]string{"plan", "-o", "json"}, args...)...)
			require.Equal(t, exitOK, code, errs)
			var p planJSON
			require.NoError(t, json.Unmarshal([]byte(out), &p))
			require.Equal(t, []string{"vgpu-devices", "label"}, p.ids())
			out, errs, code = gpuprepWith(t, d, append([]string{"apply", "--yes"}, args...)...)
			require.Equal(t, exitOK, code, out+errs)
			require.Equal(t, applied, tree(t, root))
			again := vgpusOf(t, root)
			require.Len(t, again, len(vgpus))
			for k, v := range c.foreign {
				require.Equal(t, v, again[k])
			}

			// and a whole rollback takes the node back to before the apply
			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitNeedReboot, code, out+errs)
			require.Contains(t, out, "the vGPU manager stays installed")
			require.Equal(t, want, vgpusOf(t, root))
			require.Equal(t, exceptManager(orig), exceptManager(tree(t, root)))
		})
	}
}

// splitAll splits commands joined with spaces, for countCommand.
func splitAll(cmds []string) [][]string {
	var out [][]string
	for _, c := range cmds {
		out = append(out, strings.Fields(c))
	}
	return out
}

// TestRollbackRestoresVGPUTypeNames: the names of the vendor-specific type
// ids gpuprep keeps (an earlier gpuprep vgpu apply wrote one) come back
// byte-identical, also when a config of two types adds two names.
func TestRollbackRestoresVGPUTypeNames(t *testing.T) {
	root := fixtureRoot(t, "vgpu-fresh-sriov")
	withTools(t, root)
	_, d := simulatedVGPUNode(t, root)
	run, err := vgputest.WriteInstaller(t.TempDir(), "550.90.05", "vgpu-kvm")
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  mixed:\n    - devices: all\n      vgpu-devices:\n        \"L40S-24Q\": 1\n        \"L40S-48Q\": 1\n"), 0o644))
	names := filepath.Join(root, vgpu.TypeNames)
	before := "# vGPU type id : name, written by gpuprep vgpu apply (VFs with a type no longer list them)\n1157 : NVIDIA L40S-12Q\n"
	require.NoError(t, os.MkdirAll(filepath.Dir(names), 0o755))
	require.NoError(t, os.WriteFile(names, []byte(before), 0o644))

	out, errs, code := gpuprepWith(t, d, "apply", "--yes", "--root", root, "--mode", "vm-vgpu", "--vgpu-config-file", cfg, "--vgpu-config", "mixed", "--driver", run)
	require.Equal(t, exitOK, code, out+errs)
	b, err := os.ReadFile(names)
	require.NoError(t, err)
	require.Equal(t, before[:strings.Index(before, "1157")]+"1155 : NVIDIA L40S-24Q\n1156 : NVIDIA L40S-48Q\n1157 : NVIDIA L40S-12Q\n", string(b))
	require.Len(t, journalVGPUs(t, root), 4)

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, exitOK, code, out+errs)
	require.Empty(t, vgpusOf(t, root))
	b, err = os.ReadFile(names)
	require.NoError(t, err)
	require.Equal(t, before, string(b))
}
