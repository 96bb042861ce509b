package vgpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigSyntaxErrorLine: a mis-indented config names the line the user
// must look at (counted by hand below), as file:line: like every other
// config error; yaml.v3 alone names the line above the block it was in.
func TestConfigSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		// line 7, device-filter, is indented 5 (the device set's keys are at 6)
		{"a key indented less than its siblings", "version: v1\n" +
			"vgpu-configs:\n" +
			"  default:\n" +
			"    - devices: all\n" +
			"      vgpu-devices:\n" +
			"        \"H200X-141C\": 1\n" +
			"     device-filter: [\"0x233510DE\"]\n",
			"cfg.yaml:7: not valid YAML: did not find expected '-' indicator"},
		// line 6, A10-4Q, is indented 8 under a key (line 5) whose value is already given
		{"a key indented more than its siblings", "version: v1\n" +
			"vgpu-configs:\n" +
			"  a10:\n" +
			"    - devices: all\n" +
			"      vgpu-devices: {A10-2Q: 12}\n" +
			"        A10-4Q: 6\n",
			"cfg.yaml:6: not valid YAML: did not find expected key"},
		// line 4: a quote opened and never closed
		{"an unclosed quote", "version: v1\n" +
			"vgpu-configs:\n" +
			"  a10:\n" +
			"    - device-filter: \"0x223610DE\n" +
			"      devices: all\n",
			"cfg.yaml:4: not valid YAML: found unexpected end of stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("cfg.yaml", []byte(tc.text))
			require.EqualError(t, err, tc.want)
		})
	}
}
