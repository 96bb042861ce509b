package vgpu

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A GPU named twice is refused where the second mention is written.
func TestConfigOverlapRefused(t *testing.T) {
	b, err := os.ReadFile("testdata/hostile/duplicate-devices.yaml")
	require.NoError(t, err)
	_, err = ParseConfig("dup.yaml", b)
	require.EqualError(t, err, "dup.yaml:5: vgpu-configs.twice[0]: devices: GPU index 0 is already named on line 5")

	for text, want := range map[string]string{
		"version: v1\nvgpu-configs:\n  a:\n    - devices:\n        - 1\n        - 0\n        - 1\n      vgpu-devices: {X: 1}\n":                    "cfg.yaml:7: vgpu-configs.a[0]: devices: GPU index 1 is already named on line 5",
		"version: v1\nvgpu-configs:\n  a:\n    - devices: [0, 1]\n      vgpu-devices: {X: 1}\n    - devices: [2, 1]\n      vgpu-devices: {Y: 1}\n": "cfg.yaml:6: vgpu-configs.a[1]: devices: GPU index 1 is already named on line 4",
		"version: v1\nvgpu-configs:\n  a:\n    - devices: [0]\n      vgpu-devices: {X: 1}\n    - devices: all\n      vgpu-devices: {Y: 1}\n":       "cfg.yaml:6: vgpu-configs.a[1]: devices: all, and a has 1 other device set(s)",
	} {
		_, err := ParseConfig("cfg.yaml", []byte(text))
		require.ErrorContains(t, err, want, text)
	}
	// The same index in two named configs is fine: only one is applied.
	_, err = ParseConfig("cfg.yaml", []byte("version: v1\nvgpu-configs:\n  a:\n    - devices: [0]\n      vgpu-devices: {X: 1}\n  b:\n    - devices: [0]\n      vgpu-devices: {Y: 1}\n"))
	require.NoError(t, err)
}
