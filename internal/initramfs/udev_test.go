package initramfs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Rule lines as gpuprep's 40-gpuprep-vfio.rules and the common guides
// write them; a rule with a condition the reader does not know is left out
// (it may not fire), as are continued lines and malformed values.
func TestParseOverrideRule(t *testing.T) {
	o, ok := parseOverrideRule(`ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:01:00.0", ATTR{driver_override}="vfio-pci"`)
	require.True(t, ok)
	require.Equal(t, Override{Kernel: "0000:01:00.0", Driver: "vfio-pci"}, o)
	require.True(t, o.Matches("0000:01:00.0", "10de", "1e87"))
	require.False(t, o.Matches("0000:02:00.0", "10de", "1e87"))

	// by vendor and device ID
	o, ok = parseOverrideRule(`SUBSYSTEM=="pci", ATTR{vendor}=="0x10de", ATTR{device}=="0x1e87", ATTR{driver_override}="vfio-pci"`)
	require.True(t, ok)
	require.True(t, o.Matches("0000:41:00.0", "10de", "1e87"))
	require.False(t, o.Matches("0000:41:00.0", "10de", "10f8"))

	for _, l := range []string{
		`# ACTION=="add", SUBSYSTEM=="pci", ATTR{driver_override}="vfio-pci"`,
		`ACTION=="add", SUBSYSTEM=="pci", ATTR{class}=="0x030000", ATTR{driver_override}="vfio-pci"`, // unknown condition
		`ACTION=="add", SUBSYSTEM=="usb", ATTR{driver_override}="vfio-pci"`,
		`ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:01:00.0", \`,
		`ACTION=="add", SUBSYSTEM=="pci", ATTR{driver_override}=vfio-pci`,
		`ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:01:00.0"`,
	} {
		_, ok := parseOverrideRule(l)
		require.False(t, ok, l)
	}
}
