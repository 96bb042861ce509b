package vfio

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// builtinVFIOPCI: vfio-pci built into the kernel, as stock Ubuntu kernels
// from 5.4 up to 6.2 build it (CONFIG_VFIO_PCI=y: their modules.builtin
// lists kernel/drivers/vfio/pci/vfio-pci.ko), on the Turing card's node,
// with update-grub there to regenerate the menu.
func builtinVFIOPCI(b *fixture.Builder) {
	b.ModuleFiles("6.1.0-18-amd64", []string{"kernel/drivers/vfio/vfio_iommu_type1.ko"},
		[]string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko"}, nil)
	b.BuiltinModule("vfio_pci", "vfio-pci")
	b.File("/usr/sbin/update-grub", "")
}

func grubFile(t *testing.T, k *fixture.Kernel) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k.Root.Dir(), "etc/default/grub"))
	require.NoError(t, err)
	return string(b)
}

// On a built-in vfio-pci, vfio bind --persist writes no `options vfio-pci
// ids=` (it would do nothing) and puts vfio-pci.ids= on the kernel command
// line through the bootloader editor, journalled as grub ensure, keeping
// the admin's own IDs; a second run changes nothing; vfio unbind takes
// gpuprep's IDs out again and leaves the admin's.
func TestPersistOnBuiltinVFIOPCIUsesTheKernelCommandLine(t *testing.T) {
	k := sim(t, "turing-multifunction", builtinVFIOPCI, func(b *fixture.Builder) {
		b.File("/etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt vfio-pci.ids=8086:1234\"\nGRUB_CMDLINE_LINUX=\"\"\n")
	})
	o := opts()
	o.Persist = true
	inv, p := plan(t, k, o)
	c := p.Persist.CmdlinePending()
	require.NotNil(t, c, "%q", p.Warnings)
	require.Equal(t, "10de:10f8,10de:1ad8,10de:1ad9,10de:1e87,8086:1234", c.Want)
	require.Contains(t, c.Why, "vfio-pci is built into kernel 6.1.0-18-amd64 (modules.builtin)")
	require.Equal(t, [][]string{{"update-grub"}}, c.Plan.Commands)
	for _, f := range p.Persist.Files {
		if f.Path == ModprobeConf {
			require.NotContains(t, string(f.New), "options vfio-pci ids=", "modprobe.d options never reach a built-in module")
			require.Contains(t, string(f.New), cmdlineHeader+" 10de:10f8,10de:1ad8,10de:1ad9,10de:1e87\n")
		}
	}

	_, err := Bind(context.Background(), env(k), inv, p, o)
	require.NoError(t, err)
	g := grubFile(t, k)
	require.Contains(t, g, "vfio-pci.ids="+c.Want)
	require.Equal(t, 1, strings.Count(g, "vfio-pci.ids="), g)
	require.Contains(t, k.Commands, []string{"update-grub"})
	entries, err := journal.Read(k.Root)
	require.NoError(t, err)
	grubEntry := false
	for _, en := range entries {
		grubEntry = grubEntry || (en.Command == CmdlineCommand && en.Path == "/etc/default/grub")
	}
	require.True(t, grubEntry, "the bootloader edit is journalled as grub ensure (rollback restores it)")

	_, p = plan(t, k, o)
	require.Nil(t, p.Persist.CmdlinePending(), "configured already: nothing to change")

	later := env(k).At(t0.Add(time.Minute)) // its backups take another name
	_, err = Unbind(context.Background(), later, inv, selector(t), o)
	require.NoError(t, err)
	g = grubFile(t, k)
	require.Contains(t, g, "vfio-pci.ids=8086:1234", "the admin's ID stays")
	require.NotContains(t, g, "10de:", g)
}

// A bootloader gpuprep cannot edit: no edit, and a warning that says what to
// put on the command line by hand.
func TestPersistOnBuiltinVFIOPCIWithoutABootloaderToEdit(t *testing.T) {
	k := sim(t, "turing-multifunction", builtinVFIOPCI, func(b *fixture.Builder) {
		b.Remove("/etc/default/grub").Remove("/boot/grub/grub.cfg")
	})
	o := opts()
	o.Persist = true
	_, p := plan(t, k, o)
	require.Nil(t, p.Persist.CmdlinePending())
	require.Contains(t, strings.Join(p.Persist.Warnings, "\n"), "put vfio-pci.ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87 on the kernel command line yourself")
}

// The persistent binding is for the next boot, so the next boot's kernel
// (its GRUB menu's default entry) decides whether vfio-pci is built in,
// not the running one: running 6.1.0-18-amd64 with vfio-pci a module, and
// a menu that boots 6.1.0-28-amd64 with it built in, the IDs go on the
// kernel command line; the other way round, into modprobe.d.
func TestPersistBuiltinIsTheNextKernels(t *testing.T) {
	const next = "6.1.0-28-amd64"
	menu := "menuentry 'Debian GNU/Linux' --class debian --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-1' {\n\tlinux\t/boot/vmlinuz-" + next + " root=UUID=1 ro quiet intel_iommu=on iommu=pt\n\tinitrd\t/boot/initrd.img-" + next + "\n}\n"
	nextBuiltin := func(b *fixture.Builder) {
		b.ModuleFiles(next, []string{"kernel/drivers/vfio/vfio_iommu_type1.ko"},
			[]string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko"}, nil)
		b.File("/boot/vmlinuz-"+next, "").File("/boot/grub/grub.cfg", menu).File("/usr/sbin/update-grub", "")
	}
	k := sim(t, "turing-multifunction", nextBuiltin)
	o := opts()
	o.Persist = true
	_, p := plan(t, k, o)
	c := p.Persist.CmdlinePending()
	require.NotNil(t, c, "%q", p.Warnings)
	require.Contains(t, c.Why, "vfio-pci is built into kernel "+next+" (modules.builtin)")

	nextModule := func(b *fixture.Builder) {
		b.ModuleFiles(next, vfioModuleFiles, nil, nil)
		b.File("/boot/vmlinuz-"+next, "").File("/boot/grub/grub.cfg", menu).File("/usr/sbin/update-grub", "")
	}
	k = sim(t, "turing-multifunction", builtinVFIOPCI, nextModule)
	_, p = plan(t, k, o)
	require.Nil(t, p.Persist.Cmdline, "%+v", p.Persist.Cmdline)
	for _, f := range p.Persist.Files {
		if f.Path == ModprobeConf {
			require.Contains(t, string(f.New), "options vfio-pci ids=10de:10f8,10de:1ad8,10de:1ad9,10de:1e87\n")
		}
	}
}

// vfioModuleFiles are the VFIO modules of a kernel that builds them as
// modules (Debian 12's).
var vfioModuleFiles = []string{"kernel/drivers/vfio/vfio.ko", "kernel/drivers/vfio/vfio_iommu_type1.ko", "kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko"}
