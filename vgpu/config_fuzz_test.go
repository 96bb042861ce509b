package vgpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseConfig: for an accepted config and any GPUs, Wants yields each
// (GPU, type) at most once (a GPU two device sets name differently is
// refused), with a count from 0 to maxVGPUCount, and only GPUs that exist.
//
//	go test ./vgpu -run '^$' -fuzz FuzzParseConfig -fuzztime 20s
func FuzzParseConfig(f *testing.F) {
	for _, glob := range []string{"testdata/*.yaml", "testdata/hostile/*.yaml"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			require.NoError(f, err)
			f.Add(b, uint8(4))
		}
	}
	f.Add([]byte("version: v1\nvgpu-configs:\n  m:\n    - devices: [0, 1]\n      vgpu-devices: {\"T4-4Q\": 4}\n    - devices: [2]\n      vgpu-devices: {\"T4-1Q\": 16}\n"), uint8(3))
	f.Add([]byte("version: v1\nvgpu-configs:\n  m:\n    - devices: all\n      vgpu-devices: {\"H200X-35C\": 1, \"H200X-70C\": 1}\n"), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		c, err := ParseConfig("f.yaml", b)
		if err != nil {
			return
		}
		gpus := make([]ConfigGPU, n%16)
		addrs := make([]string, len(gpus))
		for i := range gpus {
			addrs[i] = string(rune('a' + i))
			gpus[i] = ConfigGPU{Address: addrs[i], Index: i, Selected: i%3 != 2, ID: DeviceID{Device: uint16(0x2230 + i%4), Vendor: 0x10de}}
		}
		for name, sets := range c.VGPUConfigs {
			wants, _, err := Wants("f.yaml", name, sets, gpus)
			if err != nil {
				continue // no selected GPU matched, or one matched twice
			}
			seen := map[[2]string]bool{}
			for _, w := range wants {
				k := [2]string{w.GPU, w.Type}
				require.False(t, seen[k], "config %q plans %s on GPU %s twice", name, w.Type, w.GPU)
				seen[k] = true
				require.Contains(t, addrs, w.GPU)
				require.True(t, w.Count >= 0 && w.Count <= maxVGPUCount, "count %d", w.Count)
			}
		}
	})
}
