package change

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Dry writes each kind of line as plan and the --dry-run commands always
// have: a diff unchanged without an indent and each of its lines after one,
// a command after its prefix, a sysfs write as echo > PATH would.
func TestDryLines(t *testing.T) {
	f := Edit("/etc/default/grub", []byte("A=1\nB=2\n"), []byte("A=1\nB=3\n"))
	var raw, ind strings.Builder
	Dry{W: &raw}.Diff(f)
	require.Equal(t, f.Diff, raw.String())
	d := Dry{W: &ind, Indent: "   ", Run: "run: "}
	d.Diff(f)
	d.Command("update-grub")
	d.Sysfs("/sys/bus/pci/devices/0000:41:00.0/driver_override", "\n")
	d.Diff(Edit("/x", []byte("same\n"), []byte("same\n"))) // no change: nothing
	Dry{W: &ind, Indent: "    "}.Content([]byte("options vfio-pci ids=10de:2335\nsoftdep nvidia pre: vfio-pci\n"))
	require.Equal(t, "   --- a/etc/default/grub\n   +++ b/etc/default/grub\n   @@ -1,2 +1,2 @@\n    A=1\n   -B=2\n   +B=3\n"+
		"   run: update-grub\n"+
		"   write \"\\n\" > /sys/bus/pci/devices/0000:41:00.0/driver_override\n"+
		"    options vfio-pci ids=10de:2335\n    softdep nvidia pre: vfio-pci\n", ind.String())
}
