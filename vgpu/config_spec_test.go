package vgpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// What vgpu-device-manager accepts and refuses, case by case, from its own
// tests and code (NVIDIA/vgpu-device-manager at acb72704):
// api/spec/v1/spec_test.go (TestSpec, TestVGPUConfigSpec),
// api/spec/v1/spec.go (UnmarshalJSON), pkg/types/vgpu_config.go
// (AssertValid) and pkg/types/vgpu_type.go (the type-name patterns).
func TestConfigAsVGPUDeviceManagerReadsIt(t *testing.T) {
	const head = "version: v1\nvgpu-configs:\n  c:\n"
	for _, tc := range []struct {
		what, text, err string // err "": accepted
	}{
		{"well formed", head + "    - devices: all\n      vgpu-devices: {A100-4C: 10}\n", ""},
		{"multiple types", head + "    - devices: all\n      vgpu-devices: {A100-4C: 5, A100-5C: 4}\n", ""},
		{"two configs", "version: v1\nvgpu-configs:\n  a:\n    - devices: all\n      vgpu-devices: {A100-4C: 10}\n  b:\n    - devices: all\n      vgpu-devices: {A100-5C: 8}\n", ""},
		{"a filter that is no ID (MODEL)", head + "    - device-filter: MODEL\n      devices: all\n      vgpu-devices: {A100-4C: 10}\n", ""},
		{"a filter list", head + "    - device-filter: [\"0x20B510DE\", \"0x20F110DE\"]\n      devices: all\n      vgpu-devices: {A100-4C: 10}\n", ""},
		{"a filter with a subsystem", head + "    - device-filter: \"0x20B510DE:0x151E10DE\"\n      devices: [0]\n      vgpu-devices: {A100-4C: 10}\n", ""},
		{"vgpu-devices {} clears a GPU", head + "    - devices: all\n      vgpu-devices: {}\n", ""},
		{"devices: [] names no GPU", head + "    - devices: []\n      vgpu-devices: {A10-4Q: 1}\n", ""},
		{"M60-0Q (512 MB)", head + "    - devices: all\n      vgpu-devices: {M60-0Q: 1}\n", ""},
		{"MIG-backed with attribute", head + "    - devices: all\n      vgpu-devices: {A30-1-6CME: 1, DC-1-24QGFX: 1}\n", ""},
		{"a board with a letter suffix", head + "    - devices: all\n      vgpu-devices: {RTX8000P-24Q: 1}\n", ""},
		{"lower case in the board", head + "    - devices: all\n      vgpu-devices: {RTXPro6000-24Q: 1}\n", "not a vGPU type name"},

		{"wrong version", "version: v2\nvgpu-configs:\n  c:\n    - devices: all\n      vgpu-devices: {A100-4C: 10}\n", `version "v2": want v1`},
		{"missing version", "vgpu-configs:\n  c:\n    - devices: all\n      vgpu-devices: {A100-4C: 10}\n", "no version"},
		{"erroneous top-level field", "bogus: field\n" + head + "    - devices: all\n      vgpu-devices: {A100-4C: 10}\n", "cfg.yaml:1: field bogus not found"},
		{"empty vgpu-configs", "version: v1\nvgpu-configs: {}\n", "no configuration"},
		{"a config with no device set", "version: v1\nvgpu-configs:\n  d: []\n", "cfg.yaml:3: vgpu-configs.d: no device set"},
		{"a config that is null", "version: v1\nvgpu-configs:\n  d:\n", "cfg.yaml:3: vgpu-configs.d: no device set"},
		{"erroneous set field", head + "    - bogus: field\n      devices: all\n      vgpu-devices: {A100-4C: 10}\n", "cfg.yaml:4: vgpu-configs.c[0]: field bogus not found"},
		{"missing devices", head + "    - vgpu-devices: {A100-4C: 10}\n", "missing required field devices"},
		{"missing vgpu-devices", head + "    - devices: all\n", "missing required field vgpu-devices"},
		{"devices: some", head + "    - devices: some\n      vgpu-devices: {A10-4Q: 1}\n", `want all or a list of GPU indices, got "some"`},
		{"devices: 0 (a number)", head + "    - devices: 0\n      vgpu-devices: {A10-4Q: 1}\n", `got "0"`},
		{"devices: null", head + "    - devices:\n      vgpu-devices: {A10-4Q: 1}\n", "want all or a list"},
		{"count 0", head + "    - devices: all\n      vgpu-devices: {A10-4Q: 0}\n", "count 0: want at least 1"},
		{"count -1", head + "    - devices: all\n      vgpu-devices: {A10-4Q: -1}\n", "count -1: want at least 1"},
		{"count a string", head + "    - devices: all\n      vgpu-devices: {A10-4Q: \"2\"}\n", `count "2": want an integer`},
		{"a type name with a space", head + "    - devices: all\n      vgpu-devices: {\"NVIDIA A10-4Q\": 1}\n", `"NVIDIA A10-4Q" is not a vGPU type name`},
		{"a type with no series", head + "    - devices: all\n      vgpu-devices: {A10-4: 1}\n", "not a vGPU type name"},
		{"time-sliced and MIG-backed mixed", head + "    - devices: all\n      vgpu-devices: {A30-4C: 1, A30-1-6C: 1}\n", "cannot be mixed"},
		{"an unquoted hex filter is a number", head + "    - device-filter: 0x20B510DE\n      devices: all\n      vgpu-devices: {A100-4C: 1}\n", "want a quoted device ID string"},
		{"a key twice (stricter than vgpu-device-manager)", head + "    - devices: all\n      devices: [0]\n      vgpu-devices: {A100-4C: 1}\n", "devices is given twice (first on line 4)"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			_, err := ParseConfig("cfg.yaml", []byte(tc.text))
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// Which GPU a device set names, as WalkSelectedVGPUConfigForEachGPU
// decides: the filter on the GPU's IDs, then the index among all GPUs.
func TestWantsWalkGPUsAsVGPUDeviceManager(t *testing.T) {
	a100 := DeviceID{Device: 0x20B5, Vendor: 0x10DE, SubsystemDevice: 0x151E, SubsystemVendor: 0x10DE, HasSubsystem: true}
	a10 := DeviceID{Device: 0x2236, Vendor: 0x10DE, SubsystemDevice: 0x1482, SubsystemVendor: 0x10DE, HasSubsystem: true}
	gpus := []ConfigGPU{
		{Address: "0000:01:00.0", Index: 0, ID: a10, Selected: true},
		{Address: "0000:41:00.0", Index: 1, ID: a100, Selected: true},
		{Address: "0000:81:00.0", Index: 2, ID: a100, Selected: true},
	}
	plan := func(sets string, g []ConfigGPU) ([]Want, []string, error) {
		c, err := ParseConfig("c.yaml", []byte("version: v1\nvgpu-configs:\n  c:\n"+sets))
		require.NoError(t, err)
		return Wants("c.yaml", "c", c.VGPUConfigs["c"], g)
	}
	// a filter with the subsystem matches all four IDs; an index counts all GPUs
	w, _, err := plan("    - device-filter: \"0x20B510DE:0x151E10DE\"\n      devices: [2]\n      vgpu-devices: {A100-40C: 2}\n", gpus)
	require.NoError(t, err)
	require.Equal(t, []Want{{"0000:81:00.0", "A100-40C", 2}}, w)
	_, _, err = plan("    - device-filter: \"0x20B510DE:0x000010DE\"\n      devices: all\n      vgpu-devices: {A100-40C: 2}\n", gpus)
	require.ErrorContains(t, err, `config "c" matches none of the selected GPUs (0000:01:00.0 (index 0, 0x223610DE:0x148210DE)`)
	// filters by ID: each GPU gets its board's set
	w, notes, err := plan("    - device-filter: \"0x223610DE\"\n      devices: all\n      vgpu-devices: {A10-4Q: 6}\n    - device-filter: [\"0x20B510DE\", MODEL]\n      devices: all\n      vgpu-devices: {A100-20C: 4}\n", gpus)
	require.NoError(t, err)
	require.Equal(t, []Want{{"0000:01:00.0", "A10-4Q", 6}, {"0000:41:00.0", "A100-20C", 4}, {"0000:81:00.0", "A100-20C", 4}}, w)
	require.Equal(t, []string{`c.yaml:7: vgpu-configs.c[1].device-filter: "MODEL": not a 32-bit device-and-vendor number (like 0x20B510DE): it matches no GPU (vgpu-device-manager ignores it the same way)`}, notes)
	// {} clears a GPU: a Want of none
	w, _, err = plan("    - devices: [0]\n      vgpu-devices: {}\n", gpus)
	require.NoError(t, err)
	require.Equal(t, []Want{{GPU: "0000:01:00.0"}}, w)
	// an index past the GPUs: skipped, and said
	w, notes, err = plan("    - devices: [0, 7]\n      vgpu-devices: {A10-4Q: 1}\n", gpus)
	require.NoError(t, err)
	require.Len(t, w, 1)
	require.Equal(t, []string{"c.yaml:4: vgpu-configs.c[0]: GPU index 7: this node has 3 NVIDIA GPUs; vgpu-device-manager skips it too"}, notes)
	// --select leaves GPU 1 out: the index still counts it, it is left alone
	sel := append([]ConfigGPU{}, gpus...)
	sel[1].Selected = false
	w, notes, err = plan("    - devices: [1, 2]\n      vgpu-devices: {A100-40C: 1}\n", sel)
	require.NoError(t, err)
	require.Equal(t, []Want{{"0000:81:00.0", "A100-40C", 1}}, w)
	require.Equal(t, []string{`c.yaml: config "c" names GPU 0000:41:00.0 (index 1), which --select leaves out: left alone`}, notes)
	// two sets naming one GPU: the same vGPUs is harmless, different ones refused
	_, _, err = plan("    - devices: [0, 0]\n      vgpu-devices: {A10-4Q: 1}\n    - devices: all\n      vgpu-devices: {A10-4Q: 1}\n", gpus[:1])
	require.NoError(t, err)
	_, _, err = plan("    - devices: [0]\n      vgpu-devices: {A10-4Q: 1}\n    - devices: all\n      vgpu-devices: {A10-8Q: 1}\n", gpus[:1])
	require.EqualError(t, err, "c.yaml: lines 4 and 6: vgpu-configs.c[0] and [1] both match GPU 0000:01:00.0 (index 0, 0x223610DE:0x148210DE) with different vGPU devices: vgpu-device-manager applies them in turn, clearing the GPU before each, so it fails where the GPU does not offer one set's types and otherwise keeps only the last; name each GPU in one device set")
}

// A config's type name against the names GPUs report, as
// nvmdev.parseMdevTypeName (the last word) and stripVGPUConfigSuffix do.
func TestTypeMatchesAsVGPUDeviceManager(t *testing.T) {
	for _, tc := range []struct {
		config, gpu string
		want        bool
	}{
		{"A10-12Q", "NVIDIA A10-12Q", true},
		{"T4-1Q", "GRID T4-1Q", true},
		{"DC-48C", "NVIDIA RTX Pro 6000 Blackwell DC-48C", true},
		{"DC-1-24QGFX", "NVIDIA RTX Pro 6000 Blackwell DC-1-24Q", true},
		{"A30-1-6CME", "NVIDIA A30-1-6CME", true},
		{"A30-1-6CME", "NVIDIA A30-1-6C", true},
		{"A10-12Q", "NVIDIA A10-12C", false},
		{"A10-1Q", "NVIDIA A10-12Q", false},
		{"", "", false},
	} {
		require.Equal(t, tc.want, TypeMatches(tc.config, tc.gpu), "%q vs %q", tc.config, tc.gpu)
	}
}
