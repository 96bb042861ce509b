package vgpu

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// shippedConfig is data.config.yaml of the GPU Operator's ConfigMap
// default-vgpu-devices-config (testdata/shipped/README.md says from where).
func shippedConfig(t testing.TB) []byte {
	b, err := os.ReadFile("testdata/shipped/gpu-operator-default-vgpu-devices-config.yaml")
	require.NoError(t, err)
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cm))
	require.Equal(t, "ConfigMap", cm.Kind)
	require.NotEmpty(t, cm.Data["config.yaml"])
	return []byte(cm.Data["config.yaml"])
}

// The config the GPU Operator ships parses unchanged: every named config in
// it, every device set, every filter.
func TestShippedConfigParses(t *testing.T) {
	text := shippedConfig(t)
	c, err := ParseConfig("config.yaml", text)
	require.NoError(t, err)
	// count the file's own structure by its text, independently of the parser
	names := regexp.MustCompile(`(?m)^    (\S+):\s*$`).FindAllSubmatch(text, -1)
	require.Len(t, c.VGPUConfigs, len(names))
	sets, filters := 0, 0
	for _, s := range c.VGPUConfigs {
		sets += len(s)
		for _, d := range s {
			filters += len(d.Filter.IDs)
			require.Empty(t, d.Filter.Unreadable)
		}
	}
	require.Equal(t, strings.Count(string(text), "- devices:")+strings.Count(string(text), "- device-filter:"), sets)
	require.Equal(t, strings.Count(string(text), "device-filter:"), filters)
	require.Equal(t, 56, filters, "the shipped default config filters by device ID 56 times")
	d := c.VGPUConfigs["default"]
	require.Equal(t, DeviceID{Device: 0x1EB8, Vendor: 0x10DE}, d[8].Filter.IDs[0])
	require.Equal(t, map[string]int{"T4-8Q": 2}, d[8].VGPUDevices)
}

// Every config in the shipped file plans on a node it fits: a node with one
// GPU of the ID its device set filters on (or any GPU where it has no
// filter) gets exactly that set's vGPUs. The exceptions are what
// vgpu-device-manager itself cannot apply (SetVGPUConfig fails on the set
// whose type the board does not offer): "default" filters 0x1E7810DE
// (Quadro RTX 6000 and 8000 passive) twice, with RTX8000P-24Q and
// RTX6000P-12Q, and 0x25B610DE (A16 and A2) twice, with A16-8Q and A2-8Q.
func TestShippedConfigsPlanOnANodeTheyFit(t *testing.T) {
	c, err := ParseConfig("config.yaml", shippedConfig(t))
	require.NoError(t, err)
	planned, refused := 0, map[string]bool{}
	for name, sets := range c.VGPUConfigs {
		for i, s := range sets {
			id := DeviceID{Device: 0x2236, Vendor: 0x10DE} // an A10, where no filter
			if len(s.Filter.IDs) > 0 {
				id = s.Filter.IDs[0]
			}
			gpus := []ConfigGPU{{Address: "0000:41:00.0", ID: id, Selected: true}}
			wants, _, err := Wants("config.yaml", name, sets, gpus)
			if err != nil {
				require.ErrorContains(t, err, "with different vGPU devices", "%s[%d]", name, i)
				refused[name+" "+id.String()] = true
				continue
			}
			got := map[string]int{}
			for _, w := range wants {
				got[w.Type] = w.Count
			}
			require.Equal(t, s.VGPUDevices, got, "%s[%d]", name, i)
			planned++
		}
	}
	require.Equal(t, map[string]bool{"default 0x1E7810DE": true, "default 0x25B610DE": true}, refused)
	require.Greater(t, planned, 600)
}
