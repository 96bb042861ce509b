package plural

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestN(t *testing.T) {
	for n, want := range map[string]string{
		N(1, "host"): "1 host", N(2, "host"): "2 hosts", N(0, "host"): "0 hosts",
		N(1, "NVSwitch"): "1 NVSwitch", N(4, "NVSwitch"): "4 NVSwitches",
		N(3, "GPU"): "3 GPUs", N(2, "vGPU"): "2 vGPUs", N(2, "process"): "2 processes",
		N(2, "entry"): "2 entries", N(2, "day"): "2 days", N(2, "prerequisite"): "2 prerequisites",
	} {
		require.Equal(t, want, n)
	}
}

func TestVerb(t *testing.T) {
	require.Equal(t, "1 VF has", N(1, "VF")+" "+Verb(1, "has", "have"))
	require.Equal(t, "4 VFs have", N(4, "VF")+" "+Verb(4, "has", "have"))
	require.Equal(t, "0 VFs have", N(0, "VF")+" "+Verb(0, "has", "have"))
}
