package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

func TestVGPUApplyPruneAndPersist(t *testing.T) {
	root := fixtureRoot(t, "sriov-vgpu")
	cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
	write := func(body string) {
		require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  h200:\n    - devices: all\n      vgpu-devices:\n"+body), 0o644))
	}
	write("        \"H200X-70C\": 2\n")
	_, stderr, code := gpuprep(t, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200")
	require.Equal(t, 0, code, stderr)

	// a VM holds VF .4 (group 42)
	b := fixture.New(root)
	b.File("/proc/999/comm", "qemu-kvm\n").Mkdir("/proc/999/fd")
	require.NoError(t, b.Err())
	require.NoError(t, os.Symlink("/dev/vfio/42", filepath.Join(root, "proc/999/fd/3")))

	// the GPU is in heterogeneous mode, which a 35C next to the 70Cs needs
	h, err := vgputest.New(root)
	require.NoError(t, err)
	require.NoError(t, h.SetHeterogeneous("0000:41:00.0", true))
	d := realDeps()
	d.vgpuApplyRunner = func(*host.Root) host.Runner { return h }

	write("        \"H200X-35C\": 1\n")
	out, stderr, code := gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "0000:41:00.5 (NVIDIA H200X-70C) is not in config \"h200\"; left alone (--prune removes it)")
	require.NotContains(t, out, "> /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type")
	out, stderr, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--dry-run", "--prune")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "0000:41:00.4 (NVIDIA H200X-70C) is not in config \"h200\" but in use by 999 (qemu-kvm: /dev/vfio/42); kept")
	require.Contains(t, out, "would write 0 > /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type  (remove the NVIDIA H200X-70C of VF 0000:41:00.5)\n"+
		"would write 1430 > /sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type  (make VF 0000:41:00.5 a NVIDIA H200X-35C)\n")

	// --persist: config copy, unit, and the gpuprep it runs, installed
	// root's own (the running one is, under gpuprep fleet, a user's file
	// in ~/.cache), enabled through systemctl
	self := fakeGpuprep(t)
	d.gpuprepBinary = func() string { return self }
	out, stderr, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--prune", "--persist", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "would install /usr/local/libexec/gpuprep/gpuprep: this gpuprep (SHA-256 "+sha256Hex(t, self)+"), 0755 root:root\n")
	require.Contains(t, out, "would write /etc/systemd/system/gpuprep-vgpu-apply.service\n--- /dev/null\n")
	require.Contains(t, out, "+ExecStart=/usr/local/libexec/gpuprep/gpuprep vgpu apply -f /etc/gpuprep/vgpu-config.yaml -c h200 --prune\n")
	require.Contains(t, out, "+After=gpuprep-vgpu-sriov.service nvidia-vgpud.service nvidia-vgpu-mgr.service\n")
	require.NotContains(t, out, self, "the unit runs the file gpuprep ran from")
	require.Empty(t, h.Commands())
	require.NoFileExists(t, filepath.Join(root, "usr/local/libexec/gpuprep/gpuprep"))

	b.File("/etc/systemd/system/gpuprep-vgpu-sriov.service", "")
	require.NoError(t, b.Err())
	out, stderr, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--persist")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "persisted: gpuprep-vgpu-apply.service re-applies config \"h200\" at boot")
	require.Equal(t, []string{"systemctl daemon-reload", "systemctl enable gpuprep-vgpu-apply.service"}, h.Commands())
	c, err := os.ReadFile(filepath.Join(root, "etc/gpuprep/vgpu-config.yaml"))
	require.NoError(t, err)
	require.Contains(t, string(c), "H200X-35C")
	requireInstalledGpuprep(t, root, self)
	out, stderr, code = gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200", "--persist")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "persisted: gpuprep-vgpu-apply.service is in place and enabled")
	require.Len(t, h.Commands(), 2)
}

// Journals written before vgpu apply recorded intents (its "vgpu" entries
// only, after the writes; apply's intents without the VF's previous value)
// roll back as they did: the vGPUs they name are removed, an intent whose
// vGPU was never made is nothing to undo, and vGPUs no entry names stay.
func TestVGPURollbackOfOlderJournals(t *testing.T) {
	const (
		u1, u2, u3, foreign = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
			"33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"
		t4a, t4b = "0000:21:00.0", "0000:41:00.0"
	)
	create := func(gpu string) string {
		return "/sys/bus/pci/devices/" + gpu + "/mdev_supported_types/nvidia-224/create"
	}
	vf := func(a string) string { return "/sys/bus/pci/devices/" + a + "/nvidia/current_vgpu_type" }
	for _, c := range []struct {
		fixture string
		writes  [][2]string     // made before the rollback: attribute, value
		entries []journal.Entry // the older journal
		want    map[string]string
	}{
		{fixture: "mdev-vgpu",
			writes: [][2]string{{create(t4a), u1}, {create(t4a), u2}, {create(t4b), foreign}},
			entries: []journal.Entry{
				{Command: "vgpu apply", Kind: "vgpu", Path: create(t4a), Device: t4a, After: u1},
				{Command: "apply", Kind: "vgpu-intent", Path: create(t4a), Device: t4a, After: u2}, // killed before its "vgpu" entry
				{Command: "apply", Kind: "vgpu-intent", Path: create(t4b), Device: t4b, After: u3}, // killed before its write
			},
			want: map[string]string{foreign: t4b + " nvidia-224"}},
		{fixture: "sriov-vgpu",
			writes: [][2]string{{vf("0000:41:00.4"), "1429"}, {vf("0000:41:00.5"), "1429"}, {vf("0000:41:00.7"), "1429"}},
			entries: []journal.Entry{
				{Command: "vgpu apply", Kind: "vgpu", Path: vf("0000:41:00.4"), Device: "0000:41:00.0", After: "1429"},
				{Command: "apply", Kind: "vgpu-intent", Path: vf("0000:41:00.5"), Device: "0000:41:00.0", After: "1429"},
				{Command: "apply", Kind: "vgpu-intent", Path: vf("0000:41:00.6"), Device: "0000:41:00.0", After: "1429"},
			},
			want: map[string]string{"0000:41:00.7": "1429"}},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			root := fixtureRoot(t, c.fixture)
			n, d := simulatedVGPUNode(t, root)
			r, err := host.NewRoot(root)
			require.NoError(t, err)
			for _, w := range c.writes {
				require.NoError(t, n.WriteAttr(w[0], w[1]))
			}
			// as main's gpuprep (c1dcee8) wrote them: each line an Entry,
			// with no record version ("v")
			var old []byte
			for _, e := range c.entries {
				e.Time = time.Date(2025, 11, 30, 11, 15, 0, 0, time.UTC)
				line, err := json.Marshal(e)
				require.NoError(t, err)
				require.NotContains(t, string(line), `"v":`)
				old = append(append(old, line...), '\n')
			}
			require.NoError(t, os.MkdirAll(filepath.Join(root, journal.Dir), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(root, journal.Path), old, 0o600))
			es, err := journal.Read(r)
			require.NoError(t, err)
			require.Len(t, es, len(c.entries))
			out, errs, code := gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, 0, code, out+errs)
			require.Contains(t, out, "Rolled back.")
			require.Equal(t, c.want, vgpusOf(t, root))
			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, 0, code, out+errs)
			require.Contains(t, out, "Nothing to roll back.")
		})
	}
}

// TestVGPUApplyRollbackRestoresTypeNames: gpuprep vgpu apply on the SR-IOV
// interface journals the names of the VFs' types it writes as apply
// journals a file, so that rollback, besides removing the vGPUs, brings
// vgpu.TypeNames back: removed when the apply created it, its old content
// byte-identical when it was there; a second rollback changes nothing.
func TestVGPUApplyRollbackRestoresTypeNames(t *testing.T) {
	const header = "# vGPU type id : name, written by gpuprep vgpu apply (VFs with a type no longer list them)\n"
	for _, c := range []struct {
		name   string
		before string // the names file before the apply; "": none
	}{
		{name: "absent"},
		{name: "existing", before: header + "1430 : NVIDIA H200X-35C\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fixtureRoot(t, "sriov-vgpu")
			n, d := simulatedVGPUNode(t, root)
			d.vgpuSysfs = func(*host.Root) vgpu.AttrWriter { return n }
			names := filepath.Join(root, vgpu.TypeNames)
			if c.before != "" {
				require.NoError(t, os.MkdirAll(filepath.Dir(names), 0o755))
				require.NoError(t, os.WriteFile(names, []byte(c.before), 0o644))
			}
			cfg := filepath.Join(t.TempDir(), "vgpu.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte("version: v1\nvgpu-configs:\n  h200:\n    - devices: all\n      vgpu-devices:\n        \"H200X-70C\": 2\n"), 0o644))
			orig, origVGPUs := tree(t, root), vgpusOf(t, root)
			require.Empty(t, origVGPUs)

			out, errs, code := gpuprepWith(t, d, "vgpu", "apply", "--root", root, "-f", cfg, "-c", "h200")
			require.Equal(t, exitOK, code, out+errs)
			require.Equal(t, map[string]string{"0000:41:00.4": "1429", "0000:41:00.5": "1429"}, vgpusOf(t, root))
			b, err := os.ReadFile(names)
			require.NoError(t, err)
			want := header + "1429 : NVIDIA H200X-70C\n"
			if c.before != "" {
				want += "1430 : NVIDIA H200X-35C\n"
			}
			require.Equal(t, want, string(b))
			r, err := host.NewRoot(root)
			require.NoError(t, err)
			entries, err := journal.Read(r)
			require.NoError(t, err)
			var kinds []string
			for _, e := range entries {
				if e.Path == vgpu.TypeNames {
					require.Equal(t, "vgpu apply", e.Command)
					kinds = append(kinds, e.Kind)
				}
			}
			require.Equal(t, []string{"file-intent", "file"}, kinds, "the names file journalled before and after its write")

			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitOK, code, out+errs)
			require.Contains(t, out, "Rolled back.")
			require.Empty(t, vgpusOf(t, root))
			require.Equal(t, orig, tree(t, root))
			if c.before == "" {
				require.NoFileExists(t, names)
			} else {
				b, err := os.ReadFile(names)
				require.NoError(t, err)
				require.Equal(t, c.before, string(b))
			}

			out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
			require.Equal(t, exitOK, code, out+errs)
			require.Contains(t, out, "Nothing to roll back.")
			require.Equal(t, orig, tree(t, root))
			require.Empty(t, vgpusOf(t, root))
			if c.before == "" {
				require.NoFileExists(t, names)
			}
		})
	}
}
