package pci

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDisplayName: names as in pci.ids (hwdata, vendor 10de and 8086 lines).
func TestDisplayName(t *testing.T) {
	require.Equal(t, "NVIDIA GH100 [H200 SXM 141GB]", DisplayName("NVIDIA Corporation", "GH100 [H200 SXM 141GB]"))
	require.Equal(t, "Intel Ethernet Controller E810-C for QSFP", DisplayName("Intel Corporation", "Ethernet Controller E810-C for QSFP"))
	require.Equal(t, "GH100 [H200 SXM 141GB]", DisplayName("", "GH100 [H200 SXM 141GB]"))
	require.Equal(t, "", DisplayName("NVIDIA Corporation", ""))
}
