package vgpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
)

// sim plays the kernel and the vGPU manager for writes to create and
// current_vgpu_type: it creates the device, lowers free instances (an mdev
// GPU runs one type at a time, so other types drop to 0), and a VF given a
// type offers no more.
type sim struct {
	root   *host.Root
	b      *fixture.Builder
	writes []string
	failOn string
	groups int
	hetero bool // nvidia-smi -q reads vGPU Heterogeneous Mode: Enabled
}

// Run answers nvidia-smi -q -i with the heterogeneous vGPU lines.
func (s *sim) Run(_ context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 4 && argv[0] == NVIDIASMI && argv[1] == "-q" {
		mode := "Disabled"
		if s.hetero {
			mode = "Enabled"
		}
		return []byte("    vGPU Device Capability\n        Heterogenous Multi-vGPU           : Supported\n    vGPU Heterogeneous Mode               : " + mode + "\n"), nil
	}
	return nil, fmt.Errorf("simulator: unexpected command %v", argv)
}

// plan plans wants on a GPU in heterogeneous mode (as vGPUs of different
// sizes on one GPU need), with prune.
func (s *sim) plan(wants []Want, prune bool) (*Plan, error) {
	s.hetero = true
	return MakePlanWith(s.root, wants, PlanOptions{Prune: prune, Runner: s})
}

func newSim(t *testing.T, scenario string) *sim {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, fixture.Build(scenario, dir))
	root, err := host.NewRoot(dir)
	require.NoError(t, err)
	return &sim{root: root, b: fixture.New(dir)}
}

func (s *sim) WriteAttr(p, v string) error {
	s.writes = append(s.writes, p+"="+v)
	if s.failOn != "" && strings.Contains(p, s.failOn) {
		return errors.New("write error: No space left on device")
	}
	switch {
	case strings.HasSuffix(p, "/create"):
		typeDir := path.Dir(p)
		avail, _ := s.root.ReadString(typeDir + "/available_instances")
		n, _ := strconv.Atoi(avail)
		if n <= 0 {
			return errors.New("write error: No space left on device")
		}
		parent, err := s.root.Realpath(path.Dir(path.Dir(typeDir)))
		if err != nil {
			return err
		}
		types := path.Dir(typeDir)
		for _, other := range s.root.Names(types) {
			left := 0
			if types+"/"+other == typeDir {
				left = n - 1
			}
			s.b.File(types+"/"+other+"/available_instances", fmt.Sprintf("%d\n", left))
		}
		s.b.Link(parent+"/"+v+"/mdev_type", parent+"/mdev_supported_types/"+path.Base(typeDir))
		s.b.File(parent+"/"+v+"/remove", "")
		s.groups++
		grp := fmt.Sprintf("/sys/kernel/iommu_groups/%d", 100+s.groups)
		s.b.Mkdir(grp + "/devices")
		s.b.Link(parent+"/"+v+"/iommu_group", grp)
		s.b.Link("/sys/bus/mdev/devices/"+v, parent+"/"+v)
		return s.b.Err()
	case strings.HasSuffix(p, "/remove") && strings.HasPrefix(p, "/sys/bus/mdev/devices/"):
		// the type's instance is free again; with none left, every type is
		typeDir, err := s.root.Realpath(path.Dir(p) + "/mdev_type")
		if err != nil {
			return err
		}
		dev, err := s.root.Realpath(path.Dir(p))
		if err != nil {
			return err
		}
		s.b.Remove(dev).Remove(path.Dir(p))
		avail, _ := s.root.ReadString(typeDir + "/available_instances")
		n, _ := strconv.Atoi(avail)
		s.b.File(typeDir+"/available_instances", fmt.Sprintf("%d\n", n+1))
		return s.b.Err()
	case strings.HasSuffix(p, "/current_vgpu_type"):
		list := "ID    : vGPU Name\n1428  : NVIDIA H200X-141C\n1429  : NVIDIA H200X-70C\n1430  : NVIDIA H200X-35C\n"
		if v != "0" {
			list = "ID    : vGPU Name\n"
		}
		s.b.File(path.Dir(p)+"/creatable_vgpu_types", list)
		return s.root.WriteAttr(p, v)
	}
	return fmt.Errorf("simulator: unexpected write to %s", p)
}

func TestApplyMdevCreatesAndIsIdempotent(t *testing.T) {
	s := newSim(t, "mdev-vgpu")
	wants := []Want{{"0000:21:00.0", "T4-4Q", 2}, {"0000:41:00.0", "T4-4Q", 1}}
	p, err := MakePlan(s.root, wants)
	require.NoError(t, err)
	require.Len(t, p.Actions, 3)
	done, err := Apply(s.root, s, p)
	require.NoError(t, err)
	require.Len(t, done, 3)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, done[0].Value)
	ex := Existing(s.root, "0000:21:00.0")
	require.Len(t, ex, 2)
	require.Equal(t, "GRID T4-4Q", ex[0].Type)
	require.Equal(t, "nvidia-224", ex[0].TypeID)
	// a second run plans nothing and keeps the three
	p, err = MakePlan(s.root, wants)
	require.NoError(t, err)
	require.Empty(t, p.Actions)
	require.Len(t, p.Kept, 3)
	// the GPU now runs T4-4Q only: another type is refused for lack of room
	_, err = MakePlan(s.root, []Want{{"0000:21:00.0", "T4-1Q", 1}})
	require.EqualError(t, err, `0000:21:00.0: 1 more "GRID T4-1Q" wanted, 0 available`)
}

func TestApplyMdevKeepsAGivenUUID(t *testing.T) {
	s := newSim(t, "mdev-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:21:00.0", "T4-4Q", 1}})
	require.NoError(t, err)
	u := NewUUID()
	p.Actions[0].Value = u // a caller that journals the UUID before the write
	done, err := Apply(s.root, s, p)
	require.NoError(t, err)
	require.Equal(t, u, done[0].Value)
	require.Equal(t, u, Existing(s.root, "0000:21:00.0")[0].Device)
}

func TestWantsFromConfig(t *testing.T) {
	c, err := ParseConfig("c.yaml", []byte("version: v1\nvgpu-configs:\n  x:\n    - devices: [1]\n      vgpu-devices: {\"A10-12Q\": 2, \"A10-4Q\": 1}\n"))
	require.NoError(t, err)
	sets, err := c.Select("x")
	require.NoError(t, err)
	gpus := []ConfigGPU{{Address: "0000:01:00.0", Index: 0, Selected: true}, {Address: "0000:02:00.0", Index: 1, Selected: true}}
	w, _, err := Wants("c.yaml", "x", sets, gpus)
	require.NoError(t, err)
	require.Equal(t, []Want{{"0000:02:00.0", "A10-12Q", 2}, {"0000:02:00.0", "A10-4Q", 1}}, w)
	_, notes, err := Wants("c.yaml", "x", sets, gpus[:1])
	require.EqualError(t, err, `c.yaml: config "x" matches none of the selected GPUs (0000:01:00.0 (index 0, 0x00000000)): check its device-filter and devices`)
	require.Equal(t, []string{"c.yaml:4: vgpu-configs.x[0]: GPU index 1: this node has 1 NVIDIA GPU; vgpu-device-manager skips it too"}, notes)
}

func TestApplySRIOVWritesTypeIDsToFreeVFs(t *testing.T) {
	s := newSim(t, "sriov-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:41:00.0", "H200X-70C", 2}})
	require.NoError(t, err)
	_, err = Apply(s.root, s, p)
	require.NoError(t, err)
	require.Equal(t, []string{
		"/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type=1429",
		"/sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type=1429",
	}, s.writes)
	ex := Existing(s.root, "0000:41:00.0")
	require.Len(t, ex, 2)
	require.Equal(t, "NVIDIA H200X-70C", ex[0].Type, "type name found from another VF's list")
	p, err = s.plan([]Want{{"0000:41:00.0", "H200X-70C", 2}, {"0000:41:00.0", "H200X-35C", 2}}, false)
	require.NoError(t, err)
	require.Len(t, p.Actions, 2)
	_, err = MakePlan(s.root, []Want{{"0000:41:00.0", "H200X-35C", 3}})
	require.EqualError(t, err, `0000:41:00.0: 3 more "NVIDIA H200X-35C" wanted, 2 free VFs`)
}

func TestApplyStopsOnAFailedWrite(t *testing.T) {
	s := newSim(t, "sriov-vgpu")
	s.failOn = "0000:41:00.5"
	p, err := MakePlan(s.root, []Want{{"0000:41:00.0", "H200X-35C", 3}})
	require.NoError(t, err)
	done, err := Apply(s.root, s, p)
	require.ErrorContains(t, err, "make VF 0000:41:00.5 a NVIDIA H200X-35C: write error")
	require.Len(t, done, 1)
}

func TestPlanRejectsUnknownTypeAndNoInterface(t *testing.T) {
	s := newSim(t, "mdev-vgpu")
	_, err := MakePlan(s.root, []Want{{"0000:21:00.0", "A10-12Q", 1}})
	require.ErrorContains(t, err, `0000:21:00.0 cannot create vGPU type "A10-12Q" (it offers: GRID T4-1Q, GRID T4-2Q`)
	s = newSim(t, "hgx-h200")
	_, err = MakePlan(s.root, []Want{{"0000:13:00.0", "H200X-70C", 1}})
	require.ErrorContains(t, err, "0000:13:00.0: no vGPU interface")
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("cfg.yaml", []byte(`version: v1
vgpu-configs:
  default:
    - devices: all
      vgpu-devices:
        "A10-12Q": 2
  mixed:
    - devices: [0, 1]
      vgpu-devices:
        "T4-4Q": 4
    - devices: [2]
      vgpu-devices:
        "T4-1Q": 16
`))
	require.NoError(t, err)
	sets, err := c.Select("mixed")
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, sets[0].Devices.Indices)
	require.True(t, c.VGPUConfigs["default"][0].Devices.All)
	_, err = c.Select("nope")
	require.EqualError(t, err, `cfg.yaml: no vgpu-config "nope" (have default, mixed)`)

	for text, want := range map[string]string{
		"version: v1\nvgpu-configs:\n  a:\n    - devices: all\n      vgpu-device:\n        A10-4Q: 1\n": "cfg.yaml:5: vgpu-configs.a[0]: field vgpu-device not found",
		"version: v2\nvgpu-configs: {}\n": `cfg.yaml:1: version "v2": want v1`,
		"version: v1\nvgpu-configs:\n  a:\n    - devices: some\n      vgpu-devices: {A10-4Q: 1}\n": `cfg.yaml:4: vgpu-configs.a[0].devices: want all or a list of GPU indices, got "some"`,
		"version: v1\nvgpu-configs:\n  a:\n    - devices: all\n      vgpu-devices: {A10-4Q: -1}\n": `cfg.yaml:5: vgpu-configs.a[0].vgpu-devices: A10-4Q: count -1: want at least 1`,
	} {
		_, err := ParseConfig("cfg.yaml", []byte(text))
		require.ErrorContains(t, err, want, text)
	}
}

func TestTypeMatches(t *testing.T) {
	require.True(t, TypeMatches("A10-12Q", "NVIDIA A10-12Q"))
	require.True(t, TypeMatches("T4-1Q", "GRID T4-1Q"))
	require.True(t, TypeMatches("NVIDIA A10-12Q", "NVIDIA A10-12Q"))
	require.False(t, TypeMatches("A10-12", "NVIDIA A10-12Q"))
}

// holdOpen makes a process (pid, "qemu-kvm") hold node open, as a VM does.
func (s *sim) holdOpen(pid int, node string) {
	s.b.File(fmt.Sprintf("/proc/%d/comm", pid), "qemu-kvm\n")
	s.b.Link(fmt.Sprintf("/proc/%d/fd/0", pid), "/dev/null")
	_ = os.Symlink(node, filepath.Join(s.b.Dir, fmt.Sprintf("proc/%d/fd/7", pid)))
}

func TestPruneSRIOVKeepsVFsInUse(t *testing.T) {
	s := newSim(t, "sriov-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:41:00.0", "H200X-70C", 3}})
	require.NoError(t, err)
	_, err = Apply(s.root, s, p)
	require.NoError(t, err)
	// .4 is in a VM (its group /dev/vfio/42), .6 through iommufd's cdev
	s.holdOpen(4242, "/dev/vfio/42")
	s.b.Mkdir("/sys/bus/pci/devices/0000:41:00.6/vfio-dev/vfio3")
	s.holdOpen(4343, "/dev/vfio/devices/vfio3")
	require.NoError(t, s.b.Err())
	s.writes = nil

	wants := []Want{{"0000:41:00.0", "H200X-35C", 2}}
	_, err = MakePlan(s.root, wants)
	require.EqualError(t, err, `0000:41:00.0: 2 more "NVIDIA H200X-35C" wanted, 1 free VF`, "without --prune nothing is freed")
	p, err = s.plan([]Want{{"0000:41:00.0", "H200X-35C", 1}}, false)
	require.NoError(t, err)
	require.Empty(t, p.Removals)
	require.Len(t, p.Unwanted, 3)

	p, err = s.plan(wants, true)
	require.NoError(t, err)
	require.Equal(t, []Action{{GPU: "0000:41:00.0", Type: "NVIDIA H200X-70C", Path: "/sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type", Value: "0",
		About: "remove the NVIDIA H200X-70C of VF 0000:41:00.5"}}, p.Removals)
	require.Len(t, p.Unwanted, 2)
	require.Equal(t, "4242 (qemu-kvm: /dev/vfio/42)", p.InUse["0000:41:00.4"][0].String())
	require.Equal(t, "4343 (qemu-kvm: /dev/vfio/devices/vfio3)", p.InUse["0000:41:00.6"][0].String())
	_, err = Apply(s.root, s, p)
	require.NoError(t, err)
	require.Equal(t, []string{
		"/sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type=0",
		"/sys/bus/pci/devices/0000:41:00.5/nvidia/current_vgpu_type=1430",
		"/sys/bus/pci/devices/0000:41:00.7/nvidia/current_vgpu_type=1430",
	}, s.writes, "the freed VF is reused")
	p, err = s.plan(wants, true)
	require.NoError(t, err)
	require.Empty(t, p.Actions)
	require.Empty(t, p.Removals, "the in-use ones stay, run after run")
}

func TestPruneMdev(t *testing.T) {
	s := newSim(t, "mdev-vgpu")
	p, err := MakePlan(s.root, []Want{{"0000:21:00.0", "T4-4Q", 3}})
	require.NoError(t, err)
	done, err := Apply(s.root, s, p)
	require.NoError(t, err)
	g := s.root.LinkBase("/sys/bus/mdev/devices/" + done[0].Value + "/iommu_group")
	s.holdOpen(77, "/dev/vfio/"+g)
	require.NoError(t, s.b.Err())

	p, err = MakePlanWith(s.root, []Want{{"0000:21:00.0", "T4-4Q", 0}}, PlanOptions{Prune: true})
	require.NoError(t, err)
	require.Len(t, p.Removals, 2)
	require.Contains(t, p.InUse, done[0].Value)
	_, err = Apply(s.root, s, p)
	require.NoError(t, err)
	ex := Existing(s.root, "0000:21:00.0")
	require.Len(t, ex, 1)
	require.Equal(t, done[0].Value, ex[0].Device)
	a, _ := s.root.ReadString("/sys/bus/pci/devices/0000:21:00.0/mdev_supported_types/nvidia-224/available_instances")
	require.Equal(t, "3", a)
}

func TestParseVDMLayout(t *testing.T) {
	c, err := LoadConfig("testdata/vdm-layout.yaml")
	require.NoError(t, err)
	require.Len(t, c.VGPUConfigs, 5)
	sets, err := c.Select("split")
	require.NoError(t, err)
	require.Len(t, sets, 2)
	require.Equal(t, []int{2, 3}, sets[1].Devices.Indices)
	require.Equal(t, map[string]int{"L40S-48Q": 1}, sets[1].VGPUDevices)
	sets, err = c.Select("A30-1-6CME")
	require.NoError(t, err)
	require.True(t, sets[0].Devices.All)
	require.True(t, TypeMatches("A30-1-6CME", "NVIDIA A30-1-6CME"))
}
