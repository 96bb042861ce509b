package grub

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// A node booted by systemd-boot (LoaderInfo) with kernel-install's
// /etc/kernel/cmdline boots from that file, though a GRUB defaults file is
// there too (left from before, or installed beside it); without the
// LoaderInfo evidence GRUB (here with BLS entries) still decides, as before.
func TestSystemdBootBesideAGrubFile(t *testing.T) {
	leftover := map[string]string{DefaultsFile: "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"}
	b, err := Detect(proxmoxRoot(t, "systemd-boot", fixture.BootPending, leftover))
	require.NoError(t, err)
	require.Equal(t, KindSystemdBoot, b.Kind)
	src, err := b.Source("")
	require.NoError(t, err)
	require.Equal(t, KernelCmdlineFile, src.File)
	require.NotNil(t, b.Entry, "the running kernel's entry")

	leftover[loaderInfoVar] = ""
	b, err = Detect(proxmoxRoot(t, "systemd-boot", fixture.BootPending, leftover))
	require.NoError(t, err)
	require.Equal(t, KindBLS, b.Kind, "GRUB with the entries under /boot/loader/entries")
}
