package journal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// UndoneOf reads what an entry was on through its payload type, and the
// record it gives is the one rollback wrote when it copied the entry's Path
// and Device as they were: for an entry of every kind this version writes,
// and for one of a kind it does not know.
func TestUndoneOfKeepsTheRecordsFields(t *testing.T) {
	var now time.Time
	entries := []Entry{
		FileRecord{Path: "/etc/default/grub", Backup: "/etc/default/grub.b", Before: "h", Wrote: "w"}.Intent("apply", now),
		FileRecord{Path: "/etc/default/grub", Backup: "/etc/default/grub.b", Removed: true}.Done("apply", now),
		DirRecord{Path: "/etc/modules-load.d"}.Entry("apply", now),
		DriverRecord{Device: "0000:41:00.0", Before: "nvidia", After: "vfio-pci"}.Intent("apply", now),
		DriverRecord{Device: "0000:41:00.0", Before: "nvidia", After: "vfio-pci"}.Done("apply", now),
		LabelRecord{Node: "gpu-1", Kubeconfig: "/root/.kube/config", Before: "a=b", Keys: "a"}.Entry("label", now),
		BootArgsRecord{Loader: "grub-bls", Add: "iommu=pt", Kept: "/boot/loader/entries/x.conf"}.Entry("apply", now),
		VGPURecord{Attr: "/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type", GPU: "0000:41:00.0", Value: "557"}.Intent("apply", now),
		VGPURecord{Attr: "/sys/bus/pci/devices/0000:41:00.4/nvidia/current_vgpu_type", GPU: "0000:41:00.0", Value: "557"}.Done("apply", now),
		VGPUModeRecord{GPU: "0000:41:00.0", Mode: "Disabled"}.Entry("apply", now),
		VGPUManagerRecord{From: "550.90.05", To: "550.127.06", Record: "/var/lib/gpuprep/vgpu/upgrade-1.json"}.Intent("vgpu install", now),
		VGPUManagerRecord{From: "550.90.05", To: "550.127.06", Record: "/var/lib/gpuprep/vgpu/upgrade-1.json"}.Done("vgpu install", now),
		StepRecord{ID: "reboot", State: StepStarted, BootID: "b1", Reason: "kernel-args"}.Entry("apply", now),
		CommandRecord{What: "run the NVIDIA installer"}.Intent("vgpu install", now),
		{Kind: "from-a-later-gpuprep", Path: "/x", Device: "y"},
	}
	seen := map[string]bool{}
	for i, en := range entries {
		seen[en.Kind] = true
		require.Equal(t, UndoneRecord{Index: i, Kind: en.Kind, Path: en.Path, Device: en.Device}, UndoneOf(i, en), en.Kind)
	}
	for _, k := range Kinds {
		require.True(t, seen[k] || k == KindUndone, "kind %s not covered", k)
	}
}
