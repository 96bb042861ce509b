package grub

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
)

// kernelstub's configuration read as kernelstub/config.py reads it: without
// a "user" section the "default" one is used; an OEM's kernel_options
// written as one string is split (it warns "Invalid kernel_options format"
// and goes on); neither section, or no kernel_options, is an error naming
// the file.
func TestKernelstubConfiguration(t *testing.T) {
	for name, c := range map[string]struct{ cfg, want, err string }{
		"user":          {cfg: `{"default":{"kernel_options":["quiet","splash"]},"user":{"kernel_options":["quiet","splash","iommu=pt"]}}`, want: "quiet splash iommu=pt"},
		"default only":  {cfg: `{"default":{"kernel_options":["quiet","splash","iommu=pt"]}}`, want: "quiet splash iommu=pt"},
		"string":        {cfg: `{"user":{"kernel_options":"quiet splash iommu=pt"}}`, want: "quiet splash iommu=pt"},
		"no section":    {cfg: `{"other":{}}`, err: `neither a "user" nor a "default" section`},
		"no options":    {cfg: `{"user":{"esp_path":"/boot/efi"}}`, err: "no kernel_options"},
		"not json":      {cfg: `{"user":`, err: KernelstubConfig},
		"options a map": {cfg: `{"user":{"kernel_options":{"a":1}}}`, err: "neither a list nor a string"},
	} {
		t.Run(name, func(t *testing.T) {
			r := proxmoxRoot(t, "kernelstub", fixture.BootMissing, map[string]string{KernelstubConfig: c.cfg})
			b, err := Detect(r)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			src, err := b.Source("")
			require.NoError(t, err)
			require.Equal(t, c.want, src.Cmdline)
		})
	}
}

// LoaderInfo is taken only as a bootloader writes it (printable text, a
// bounded size); anything else is no evidence.
func TestLoaderInfoHostile(t *testing.T) {
	for name, v := range map[string]string{
		"control characters": utf16Var("systemd-boot\x1b[2J"),
		"too short":          "\x06\x00",
		"huge":               utf16Var("systemd-boot " + string(make([]byte, 4096))),
	} {
		t.Run(name, func(t *testing.T) {
			r := proxmoxRoot(t, "proxmox-systemd-boot", fixture.BootMissing, map[string]string{loaderInfoVar: v, "/proc/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"})
			require.Equal(t, "", loaderInfo(r))
			b, err := Detect(r)
			require.NoError(t, err)
			require.Equal(t, "", b.ESPMode, "no evidence left")
		})
	}
}
