package grub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A node with only /etc/default/grub.d/*.cfg and no /etc/default/grub
// (testdata/dropin-only: Ubuntu's cloud-image drop-in, see its SOURCE).
// grub-mkconfig sources each part only where it exists
// (util/grub-mkconfig.in: "if test -f ${sysconfdir}/default/grub ; then .
// ${sysconfdir}/default/grub ; fi", then "for x in
// ${sysconfdir}/default/grub.d/*.cfg"), so the drop-in is the whole
// configuration: read it, and edit the assignment where it is.
func TestDropinOnly(t *testing.T) {
	needBash(t)
	files := fixtureFiles(t, "dropin-only")
	require.Len(t, files, 1)
	require.Equal(t, "/etc/default/grub.d/50-cloudimg-settings.cfg", files[0].Path)

	c, err := Evaluate(files)
	require.NoError(t, err)
	want, err := bashSource(t, files)
	require.NoError(t, err)
	require.Equal(t, want, c)
	require.Equal(t, "console=tty1 console=ttyS0", c.Default)

	ed, err := EditFiles(files, intelMode)
	require.NoError(t, err)
	checkEdit(t, files, intelMode, ed)
	require.Len(t, ed.Changes, 1)
	require.Equal(t, files[0].Path, ed.Changes[0].Path)
	require.Contains(t, string(ed.Changes[0].New), "\nGRUB_CMDLINE_LINUX_DEFAULT=\"console=tty1 console=ttyS0 intel_iommu=on iommu=pt\"\n")
}
