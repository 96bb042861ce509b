package deviceplugin

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func release(t *testing.T, tag string) Release {
	t.Helper()
	r, err := Lookup(tag)
	require.NoError(t, err)
	return r
}

func name(t *testing.T, r Release, id string) string {
	t.Helper()
	n, err := r.ResourceName(id)
	require.NoError(t, err, id)
	return n
}

// newerRelease is a release bundling gpuprep's own, newer pci.ids
// (internal/pciids/pci.ids, 2026.07.31): what a plugin release refreshed with
// `make update-pcidb` today would bundle. Its device lines are found the way
// getDeviceName scans a whole file (first line starting "10de", "#" lines
// skipped, the first line not starting with a tab ends NVIDIA's list),
// independently of the script.
func newerRelease(t *testing.T) Release {
	t.Helper()
	b, err := os.ReadFile("../pciids/pci.ids")
	require.NoError(t, err)
	require.Contains(t, string(b), "\tVersion: 2026.07.31\n")
	var lines []string
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() && !strings.HasPrefix(s.Text(), "10de") {
	}
	for s.Scan() {
		l := s.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		if !strings.HasPrefix(l, "\t") {
			break
		}
		if !strings.HasPrefix(l, "\t\t") {
			lines = append(lines, l[1:])
		}
	}
	require.NoError(t, s.Err())
	require.Greater(t, len(lines), 1900)
	return Release{Tag: "newer", PCIIDs: PCIIDs{Version: "2026.07.31"}, devices: lines}
}

// The GPU Operator's release names GPUs newer than its pci.ids 2025.07.11 by
// their device ID; a release with a newer pci.ids names them.
func TestNewerThanThePluginsPCIIDs(t *testing.T) {
	cur, newer := release(t, Default), newerRelease(t)
	require.Equal(t, "2025.07.11", cur.PCIIDs.Version)
	for id, want := range map[string]string{
		"2909": "nvidia.com/GB100_HGX_B200_168GB", // HGX B200
		"3182": "nvidia.com/GB110_B300_SXM6_AC",   // B300
		"31c2": "nvidia.com/GB110_GB300",          // GB300
		"230c": "nvidia.com/GH100_H20_NVL16",      // H20 NVL16 (the newer ID)
		"2c3a": "nvidia.com/GB203GL_RTX_PRO_4500_BLACKWELL_SERVER_EDITION",
	} {
		require.Equal(t, "nvidia.com/"+id, name(t, cur, id), id)
		require.Equal(t, want, name(t, newer, id), id)
	}
	// known to both: the same name
	require.Equal(t, "nvidia.com/GH100_H20_NVL16", name(t, cur, "230e"))
	require.Equal(t, "nvidia.com/GH100_H20_NVL16", name(t, newer, "230e"))
}

// RTX PRO 5000 Blackwell was renamed after 2025.07.11: " / " is "/" between
// two runs of white space, so three underscores.
func TestRenamedSinceThePluginsPCIIDs(t *testing.T) {
	require.Equal(t, "nvidia.com/GB202GL_RTX_PRO_5000_BLACKWELL", name(t, release(t, "v1.6.0"), "2bb3"))
	require.Equal(t, "nvidia.com/GB202GL_RTX_PRO_5000_BLACKWELL___RTX_PRO_5000_72GB_BLACKWELL", name(t, newerRelease(t), "2bb3"))
	// unknown to v1.3.1 (pci.ids 2025.02.12)
	require.Equal(t, "nvidia.com/2bb3", name(t, release(t, "v1.3.1"), "2BB3"))
}

// Names across the real releases, from their bundled pci.ids' lines.
func TestNamesPerRelease(t *testing.T) {
	for _, c := range []struct{ tag, id, want string }{
		{"v1.6.0", "1eb8", "nvidia.com/TU104GL_TESLA_T4"},
		{"v1.6.0", "2330", "nvidia.com/GH100_H100_SXM5_80GB"},
		{"v1.6.0", "2901", "nvidia.com/GB100_B200"},
		{"v1.6.0", "2bb1", "nvidia.com/GB202GL_RTX_PRO_6000_BLACKWELL_WORKSTATION_EDITION"},
		{"v1.3.1", "2bb1", "nvidia.com/2bb1"},
		{"v1.3.1", "2901", "nvidia.com/GB100_B200"},
		{"v1.3.0", "2901", "nvidia.com/2901"},
		{"v1.2.8", "2335", "nvidia.com/GH100_H200_SXM_141GB"},
		{"v1.2.7", "2335", "nvidia.com/2335"},
		// "GH100[H100 SXM5 80GB]" in 2023.05.23: no space before the bracket
		{"v1.2.2", "2330", "nvidia.com/GH100H100_SXM5_80GB"},
		{"v1.2.5", "2330", "nvidia.com/GH100_H100_SXM5_80GB"},
		// "GH100 [GH200 120GB]" in 2023.11.11, "... / 480GB]" from 2024.06.23
		{"v1.2.6", "2342", "nvidia.com/GH100_GH200_120GB"},
		{"v1.2.9", "2342", "nvidia.com/GH100_GH200_120GB___480GB"},
		{"v1.2.2", "ffff", "nvidia.com/ffff"},
	} {
		require.Equal(t, c.want, name(t, release(t, c.tag), c.id), c.tag+" "+c.id)
	}
}

// "GA104 [RTX A4500 Embedded GPU ]" (to 2025.07.11) cleans up to a name
// ending in "_", which kubelet refuses at registration; the newer pci.ids
// dropped the space.
func TestNameKubeletRefuses(t *testing.T) {
	n, err := release(t, "v1.6.0").ResourceName("24fa")
	require.Equal(t, "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU_", n)
	require.ErrorContains(t, err, "kubelet refuses")
	require.Equal(t, "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU", name(t, newerRelease(t), "24fa"))
}

// The clean-up's corners, on lines in pci.ids' form.
func TestCleanLikeThePlugin(t *testing.T) {
	r := Release{Tag: "t", devices: []string{
		"0001  A  B\tC",        // runs of white space: one "_" each
		"0002  x.y/z (rev 2)",  // lower case, "." and "/", parentheses
		"0003  [()]",           // nothing left: the device ID
		"0004  A - B",          // "-" dropped between two "_"
		"0005  Bridge of 0006", // another device's ID in a name: not its line
		"0006  Real",
	}}
	for id, want := range map[string]string{
		"0001": "nvidia.com/A_B_C",
		"0002": "nvidia.com/X_Y_Z_REV_2",
		"0003": "nvidia.com/0003",
		"0004": "nvidia.com/A__B",
		"0006": "nvidia.com/REAL",
		"0007": "nvidia.com/0007",
	} {
		require.Equal(t, want, name(t, r, id), id)
	}
}

// The data-centre GPUs gpuprep names most, as v1.6.0 advertises them (each
// checked by hand against its line in pci.ids 2025.07.11).
func TestDefaultNamesDataCentreGPUs(t *testing.T) {
	r := release(t, Default)
	for id, want := range map[string]string{
		"1eb8": "nvidia.com/TU104GL_TESLA_T4",
		"2236": "nvidia.com/GA102GL_A10",
		"2330": "nvidia.com/GH100_H100_SXM5_80GB",
		"2335": "nvidia.com/GH100_H200_SXM_141GB",
		"26b9": "nvidia.com/AD102GL_L40S",
		"2901": "nvidia.com/GB100_B200",
		"20b7": "nvidia.com/GA100GL_A30_PCIE",
		"2235": "nvidia.com/GA102GL_A40",
		"20b5": "nvidia.com/GA100_A100_PCIE_80GB",
		"20f1": "nvidia.com/GA100_A100_PCIE_40GB",
		"27b8": "nvidia.com/AD104GL_L4",
		"2331": "nvidia.com/GH100_H100_PCIE",
		"ffff": "nvidia.com/ffff",
	} {
		require.Equal(t, want, name(t, r, id), id)
	}
}
