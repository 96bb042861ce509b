package grub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// NotOff takes out exactly the occurrences that leave the IOMMU or interrupt
// remapping off (iommu=off goes, iommu=pt stays; nointremap and intremap=off
// go, intremap=on and intremap=nosid stay), before Ensure is judged; bash
// checks the result (editOne).
func TestEditNotOffRemovesOnlyWhatTurnsItOff(t *testing.T) {
	needBash(t)
	ed, out := editOne(t, "offs", Request{Ensure: intelMode.Ensure, NotOff: []string{"intel_iommu", "iommu", "intremap"}})
	require.Equal(t, "GRUB_DEFAULT=0\n"+
		"GRUB_CMDLINE_LINUX=\"quiet iommu=pt intremap=nosid\"\n"+
		"GRUB_CMDLINE_LINUX_DEFAULT=\"splash amd_iommu=off,fullflush intremap=on intel_iommu=on\"\n", out[DefaultsFile])
	require.Equal(t, []string{"iommu=off", "nointremap", "intel_iommu=on,off", "intremap=off"}, ed.Removed)
	require.Equal(t, []string{"intel_iommu=on"}, ed.Added)

	// an AMD IOMMU: amd_iommu=off goes, intel_iommu= is not this node's
	_, out = editOne(t, "offs", Request{Ensure: amdMode.Ensure, NotOff: []string{"amd_iommu", "iommu", "intremap"}})
	require.Equal(t, "GRUB_DEFAULT=0\n"+
		"GRUB_CMDLINE_LINUX=\"quiet iommu=pt intremap=nosid\"\n"+
		"GRUB_CMDLINE_LINUX_DEFAULT=\"splash intremap=on intel_iommu=on,off\"\n", out[DefaultsFile])

	// the same on a BLS entry (grubby) and /etc/kernel/cmdline
	b := &Boot{Kind: KindBLS, Entries: []File{{"/boot/loader/entries/a.conf", []byte("linux /vmlinuz-6\noptions ro iommu=pt amd_iommu=off\n")}},
		Files:         []File{{DefaultsFile, []byte("GRUB_CMDLINE_LINUX=\"ro iommu=pt\"\nGRUB_ENABLE_BLSCFG=true\n")}},
		KernelCmdline: &File{KernelCmdlineFile, []byte("ro iommu=pt nointremap\n")}}
	p, err := b.PlanEdit(Request{Ensure: amdMode.Ensure, NotOff: []string{"amd_iommu", "iommu", "intremap"}}, true)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"grubby", "--update-kernel=ALL", "--remove-args=amd_iommu=off"}}, p.Commands)
	require.Len(t, p.Changes, 1)
	require.Equal(t, KernelCmdlineFile, p.Changes[0].Path)
	require.Equal(t, "ro iommu=pt\n", string(p.Changes[0].New))
	require.Equal(t, []string{"amd_iommu=off"}, p.EntriesRemoved)
}
