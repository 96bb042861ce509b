package vgpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A count no GPU can hold is refused before planning makes one action per
// vGPU.
func TestConfigCountBounded(t *testing.T) {
	_, err := ParseConfig("cfg.yaml", []byte("version: v1\nvgpu-configs:\n  a:\n    - devices: all\n      vgpu-devices: {A10-4Q: 1000000000000000}\n"))
	require.EqualError(t, err, `cfg.yaml:5: vgpu-configs.a[0].vgpu-devices: A10-4Q: count 1000000000000000: at most 1024 vGPUs of a type per GPU`)
	_, err = ParseConfig("cfg.yaml", []byte("version: v1\nvgpu-configs:\n  a:\n    - devices: all\n      vgpu-devices: {A10-4Q: 1024}\n"))
	require.NoError(t, err)
}
