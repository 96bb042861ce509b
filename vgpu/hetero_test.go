package vgpu_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/journal"
	"github.com/gpuprep/gpuprep/vgpu"
	"github.com/gpuprep/gpuprep/vgpu/vgputest"
)

const h200 = "0000:41:00.0"

var mixed = []vgpu.Want{{GPU: h200, Type: "H200X-35C", Count: 1}, {GPU: h200, Type: "H200X-70C", Count: 1}}

func sriovHost(t *testing.T) *vgputest.Host {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build("sriov-vgpu", dir))
	h, err := vgputest.New(dir)
	require.NoError(t, err)
	return h
}

func vfType(t *testing.T, h *vgputest.Host, vf string) string {
	t.Helper()
	s, err := h.Root.ReadString("/sys/bus/pci/devices/" + vf + "/nvidia/current_vgpu_type")
	require.NoError(t, err)
	return s
}

func mode(t *testing.T, h *vgputest.Host) string {
	t.Helper()
	m, err := vgpu.QueryHetero(context.Background(), h, h200)
	require.NoError(t, err)
	return m.Mode
}

// Mixed framebuffer sizes on one GPU: the plan turns on its heterogeneous
// mode (nvidia-smi, the PCI domain in 8 hex digits) after the removals and
// before the first current_vgpu_type write, journalled before it runs, and
// checks that it took; the writes of both sizes then succeed.
func TestMixedSizesTurnOnHeterogeneousMode(t *testing.T) {
	h := sriovHost(t)
	p, err := vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h})
	require.NoError(t, err)
	require.Equal(t, []vgpu.ModeStep{{GPU: h200, Argv: []string{"nvidia-smi", "vgpu", "-shm", "1", "-i", "00000000:41:00.0"}, Mode: "Disabled",
		About: "turn on the heterogeneous vGPU mode of 0000:41:00.0 for vGPUs of framebuffer sizes 35 and 70"}}, p.Modes)
	require.Len(t, p.Actions, 2)
	require.Equal(t, "Disabled", mode(t, h))

	var entries []journal.Entry
	record := func(e journal.Entry) error {
		if e.Kind == vgpu.KindMode {
			require.Equal(t, "Disabled", mode(t, h), "recorded before it runs")
		}
		entries = append(entries, e)
		return nil
	}
	done, err := vgpu.ApplyJournalled(h.Root, h, p, time.Now(), "vgpu apply", record)
	require.NoError(t, err)
	require.Len(t, done, 2)
	require.Equal(t, []vgpu.ModeStep{p.Modes[0]}, p.ModesRan())
	require.Equal(t, "Enabled", mode(t, h))
	require.Equal(t, "1430", vfType(t, h, "0000:41:00.4"))
	require.Equal(t, "1429", vfType(t, h, "0000:41:00.5"))
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{vgpu.KindMode, vgpu.KindIntent, vgpu.KindWrite, vgpu.KindIntent, vgpu.KindWrite}, kinds)
	require.Equal(t, journal.Entry{Time: entries[0].Time, Command: "vgpu apply", Kind: vgpu.KindMode, Device: h200, Before: "Disabled", After: "Enabled"}, entries[0])

	// applied: nothing left to plan, the mode is not asked for again
	p, err = vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h})
	require.NoError(t, err)
	require.Empty(t, p.Actions)
	require.Empty(t, p.Modes)
	// one more 35C: the GPU is in the mode already
	p, err = vgpu.MakePlanWith(h.Root, []vgpu.Want{{GPU: h200, Type: "H200X-35C", Count: 2}, {GPU: h200, Type: "H200X-70C", Count: 1}}, vgpu.PlanOptions{Runner: h})
	require.NoError(t, err)
	require.Len(t, p.Actions, 1)
	require.Empty(t, p.Modes)

	// one size: no mode step
	h = sriovHost(t)
	p, err = vgpu.MakePlanWith(h.Root, []vgpu.Want{{GPU: h200, Type: "H200X-35C", Count: 2}}, vgpu.PlanOptions{Runner: h})
	require.NoError(t, err)
	require.Empty(t, p.Modes)
}

// Where the mode cannot be had the plan fails before anything is written:
// a GPU without the capability, and one that has a vGPU already while the
// mode is off (nvidia-smi cannot change it then).
func TestMixedSizesRefusedWithoutHeterogeneousMode(t *testing.T) {
	h := sriovHost(t)
	require.NoError(t, h.SetHeterogeneousUnsupported(h200))
	_, err := vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h})
	require.EqualError(t, err, "0000:41:00.0: vGPUs of different framebuffer sizes (NVIDIA H200X-35C, NVIDIA H200X-70C) on one GPU need its heterogeneous vGPU mode (nvidia-smi vgpu -shm 1 -i 00000000:41:00.0), which it does not support (nvidia-smi -q: Heterogenous Multi-vGPU: Not Supported): give it types of one framebuffer size")

	h = sriovHost(t)
	p, err := vgpu.MakePlanWith(h.Root, mixed[1:], vgpu.PlanOptions{Runner: h})
	require.NoError(t, err)
	_, err = vgpu.Apply(h.Root, h, p)
	require.NoError(t, err)
	_, err = vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h})
	// (its VFs list only types of the size it hosts: the type is not offered)
	require.EqualError(t, err, `0000:41:00.0 cannot create vGPU type "H200X-35C" (it offers: NVIDIA H200X-70C): outside heterogeneous vGPU mode its VFs offer only types of the framebuffer size of the vGPUs it has (0000:41:00.4 (NVIDIA H200X-70C)); vGPUs of different sizes on one GPU need that mode (nvidia-smi vgpu -shm 1 -i 00000000:41:00.0), which can only be turned on while the GPU has no vGPU: remove them (echo 0 > /sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type) and apply again, or give the GPU types of one framebuffer size`)
	// the same with the type offered (a driver that lists it all the same)
	require.NoError(t, h.Root.WriteAttr("/sys/bus/pci/devices/0000:41:00.5/nvidia/creatable_vgpu_types", "ID : vGPU Name\n1429 : NVIDIA H200X-70C\n1430 : NVIDIA H200X-35C\n"))
	_, err = vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h})
	require.EqualError(t, err, "0000:41:00.0: vGPUs of different framebuffer sizes (NVIDIA H200X-35C, NVIDIA H200X-70C) on one GPU need its heterogeneous vGPU mode (nvidia-smi vgpu -shm 1 -i 00000000:41:00.0), which is off (vGPU Heterogeneous Mode: Disabled) and can only be turned on while the GPU has no vGPU; it has 0000:41:00.4 (NVIDIA H200X-70C): remove them (echo 0 > /sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type; --prune removes those not in the config that no VM holds) and apply again, or give the GPU types of one framebuffer size")
}

// --prune of the GPU's only vGPU (not asked for) frees it first: the mode
// goes on after the removal and before the creations.
func TestPruneThenHeterogeneousMode(t *testing.T) {
	h := sriovHost(t)
	require.NoError(t, h.WriteAttr("/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type", "1428"))
	// (the other VFs list the 141C types only now; .5 lists all, as the
	// plan needs to see the types wanted)
	require.NoError(t, h.Root.WriteAttr("/sys/bus/pci/devices/0000:41:00.5/nvidia/creatable_vgpu_types", "ID : vGPU Name\n1428 : NVIDIA H200X-141C\n1429 : NVIDIA H200X-70C\n1430 : NVIDIA H200X-35C\n"))
	p, err := vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h, Prune: true})
	require.NoError(t, err)
	require.Len(t, p.Removals, 1)
	require.Len(t, p.Modes, 1)
	var order []string
	record := func(e journal.Entry) error { order = append(order, e.Kind+" "+e.After); return nil }
	_, err = vgpu.ApplyJournalled(h.Root, h, p, time.Now(), "vgpu apply", record)
	require.NoError(t, err)
	require.Equal(t, []string{"vgpu-intent 0", "vgpu 0", "vgpu-mode Enabled", "vgpu-intent 1430", "vgpu 1430", "vgpu-intent 1429", "vgpu 1429"}, order)
	require.Equal(t, "Enabled", mode(t, h))
}

// liar is an nvidia-smi whose -shm exits 0 and changes nothing.
type liar struct{ *vgputest.Host }

func (l liar) Run(ctx context.Context, argv ...string) ([]byte, error) {
	if strings.Contains(strings.Join(argv, " "), "-shm") {
		return nil, nil
	}
	return l.Host.Run(ctx, argv...)
}

// The mode is checked through nvidia-smi -q after the command (the PF has
// no sysfs attribute for it): one that did not take stops the apply before
// the GPU's first vGPU.
func TestHeterogeneousModeThatDidNotTakeStopsTheApply(t *testing.T) {
	h := sriovHost(t)
	p, err := vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: liar{h}})
	require.NoError(t, err)
	done, err := vgpu.Apply(h.Root, h, p)
	require.EqualError(t, err, `0000:41:00.0: nvidia-smi vgpu -shm 1 -i 00000000:41:00.0 exited 0 but nvidia-smi -q reads vGPU Heterogeneous Mode: "Disabled" (no vGPU was created on it)`)
	require.Empty(t, done)
	require.Equal(t, "0", vfType(t, h, "0000:41:00.4"))
	// a failing one, likewise (a vGPU appeared since the plan)
	p, err = vgpu.MakePlanWith(h.Root, mixed, vgpu.PlanOptions{Runner: h})
	require.NoError(t, err)
	require.NoError(t, h.WriteAttr("/sys/bus/pci/devices/0000:41:00.7/nvidia/current_vgpu_type", "1430"))
	done, err = vgpu.Apply(h.Root, h, p)
	require.ErrorContains(t, err, "0000:41:00.0: nvidia-smi vgpu -shm 1 -i 00000000:41:00.0: nvidia-smi: exit status 19\nFailed to set vGPU heterogeneous mode for GPU 00000000:41:00.0: In use by another client (no vGPU was created on it)")
	require.Empty(t, done)
}

func TestFramebuffer(t *testing.T) {
	for name, want := range map[string]string{"NVIDIA H200X-35C": "35", "GRID T4-4Q": "4", "NVIDIA A100-1-5C": "5", "NVIDIA L40S-24Q": "24", "NVIDIA RTX Pro 6000 Blackwell DC-3Q": "3"} {
		fb, ok := vgpu.Framebuffer(name)
		require.True(t, ok, name)
		require.Equal(t, want, fb, name)
	}
	for _, name := range []string{"NVIDIA H200X", "GRID T4-", "foo-12"} {
		_, ok := vgpu.Framebuffer(name)
		require.False(t, ok, name)
	}
	require.Equal(t, "00000000:41:00.0", vgpu.SMIAddress("0000:41:00.0"))
	require.Equal(t, "00000001:41:00.0", vgpu.SMIAddress("0001:41:00.0"))
}
