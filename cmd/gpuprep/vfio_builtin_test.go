package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
)

// vfio bind --persist where vfio-pci is built into the kernel (stock Ubuntu
// 5.4 to 6.2: modules.builtin lists kernel/drivers/vfio/pci/vfio-pci.ko):
// the dry run shows the bootloader edit that puts vfio-pci.ids= on the
// kernel command line (a diff of /etc/default/grub, update-grub) and why,
// and no useless `options vfio-pci ids=`; the bind makes that edit; gpuprep
// rollback takes it out again.
func TestVFIOBindPersistOnBuiltinVFIOPCI(t *testing.T) {
	d := realDeps()
	d.vfioKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		k, err := fixture.NewKernel(root.Dir())
		return k, k, err
	}
	simulatedKernel(t, d)
	root := fixtureRoot(t, "turing-multifunction")
	withTools(t, root)
	b := fixture.New(root)
	b.ModuleFiles("6.1.0-18-amd64", []string{"kernel/drivers/vfio/vfio_iommu_type1.ko"},
		[]string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko"}, nil)
	b.BuiltinModule("vfio_pci", "vfio-pci")
	require.NoError(t, b.Err())
	grubBefore, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	const arg = "vfio-pci.ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87"

	// plan shows the same bootloader edit in its vfio-bind step
	out, errs, code := gpuprepWith(t, d, "plan", "--root", root, "--mode", "vm-passthrough", "-o", "json")
	require.Equal(t, 0, code, errs)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	found := false
	for _, s := range p.Steps {
		if s.ID != "vfio-bind" {
			continue
		}
		found = true
		var files []string
		for _, f := range s.Files {
			files = append(files, f.Path)
		}
		require.Contains(t, files, "/etc/default/grub", out)
		require.Contains(t, s.Commands, "update-grub", out)
	}
	require.True(t, found, out)

	out, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist", "--dry-run")
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "kernel command line (grub): vfio-pci is built into kernel 6.1.0-18-amd64 (modules.builtin): modprobe never loads it")
	require.Contains(t, out, "+++ b/etc/default/grub")
	require.Contains(t, out, arg)
	require.Contains(t, out, "run: update-grub\n")
	require.NotContains(t, out, "\n    options vfio-pci ids=", "no options line in the modprobe.d file")
	got, err := os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Equal(t, string(grubBefore), string(got), "a dry run changes nothing")

	out, errs, code = gpuprepWith(t, d, "vfio", "bind", "--root", root, "--persist")
	require.Equal(t, 0, code, out+errs)
	require.Contains(t, out, "ran: update-grub\n")
	require.Contains(t, out, "note: put "+arg+" on the next boot's kernel command line (grub)")
	got, err = os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Contains(t, string(got), arg)

	out, errs, code = gpuprepWith(t, d, "rollback", "--root", root)
	require.Equal(t, 0, code, out+errs)
	got, err = os.ReadFile(filepath.Join(root, "etc/default/grub"))
	require.NoError(t, err)
	require.Equal(t, string(grubBefore), string(got), "rollback restores the bootloader configuration")
}
