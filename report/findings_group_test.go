package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/preflight"
)

func bound(addr string, status preflight.Status, modes ...preflight.Mode) preflight.Finding {
	return preflight.Finding{Check: "vfio.binding", Status: status, Subject: addr, Modes: modes,
		Message: "bound to vfio-pci", Remedy: "gpuprep vfio unbind --select " + addr + ", or echo " + addr + " > unbind"}
}

// Per-device findings merge when only the address differs; a different
// status, mode, message or a subject that is no address keeps them apart.
func TestItemsMergePerDeviceFindings(t *testing.T) {
	a, b, c := "0000:11:00.0", "0000:21:00.0", "0000:31:00.0"
	other := bound(c, preflight.Fail, preflight.Container)
	other.Message = "bound to vfio-pci, and more"
	fs := []preflight.Finding{
		{Check: "gpu.present", Status: preflight.Pass, Subject: a, Message: "H100"},
		bound(a, preflight.Fail, preflight.Container),
		bound(b, preflight.Fail, preflight.Container),
		bound(c, preflight.Fail, preflight.Container),
		bound(a, preflight.Fail, preflight.VMVGPU),
		bound(b, preflight.Warn, preflight.Container),
		other,
		{Check: "node.label", Status: preflight.Fail, Subject: "label", Message: "x"},
		{Check: "node.label", Status: preflight.Fail, Subject: "label", Message: "x"},
	}
	items := Items(fs, []string{a, b})
	require.Len(t, items, 7)
	m := items[0]
	require.Equal(t, []string{a, b, c}, m.Devices)
	require.Equal(t, "3 devices (0000:11:00.0, 0000:21:00.0, 0000:31:00.0)", m.Subject, "c is no GPU of the report")
	require.Equal(t, "bound to vfio-pci", m.Message)
	require.Equal(t, "gpuprep vfio unbind --select 0000:11:00.0 --select 0000:21:00.0 --select 0000:31:00.0, or echo ADDR > unbind (ADDR: each device's address)", m.Remedy)
	require.Equal(t, a, items[1].Subject, "another mode")
	require.Equal(t, c, items[2].Subject, "another message")
	require.Equal(t, "label", items[3].Subject, "not an address: shown as it is")
	require.Equal(t, "label", items[4].Subject)
	require.Equal(t, preflight.Warn, items[5].Status, "warnings after failures")
	require.Nil(t, items[5].Devices)
	require.Equal(t, preflight.Pass, items[6].Status, "passes last")

	two := Items([]preflight.Finding{bound(a, preflight.Fail), bound(b, preflight.Fail)}, []string{a, b})
	require.Len(t, two, 1)
	require.Equal(t, "2 GPUs (0000:11:00.0, 0000:21:00.0)", two[0].Subject)
}

// A finding whose strings hold a NUL (the mark merging uses) is not merged.
func TestItemsNULNotMerged(t *testing.T) {
	x, y := bound("0000:11:00.0", preflight.Fail), bound("0000:21:00.0", preflight.Fail)
	x.Message, y.Message = "on \x00 driver", "on \x00 driver"
	require.Len(t, Items([]preflight.Finding{x, y}, nil), 2)
}

// The Markdown report tells a host's warnings, a ready host's too.
func TestMarkdownIncludesWarnings(t *testing.T) {
	r := &Report{APIVersion: APIVersion, Kind: Kind, Mode: "vm-passthrough", Ready: true,
		Host:  preflight.HostInfo{Name: "gpu-1"},
		Modes: map[preflight.Mode]*preflight.ModeResult{preflight.VMPassthrough: {Ready: true}},
		Findings: []preflight.Finding{
			{Check: "gpu.present", Status: preflight.Pass, Subject: "0000:11:00.0", Message: "H100"},
			{Check: "vfio.binding", Status: preflight.Warn, Subject: "0000:11:00.0", Message: "bound until the next boot", Remedy: "gpuprep vfio bind --persist"},
		}}
	var b bytes.Buffer
	require.NoError(t, Render(&b, &Document{Host: r}, "markdown"))
	require.Contains(t, b.String(), "- **warn** `vfio.binding` 0000:11:00.0: bound until the next boot — fix: gpuprep vfio bind --persist")
	require.NotContains(t, b.String(), "H100", "passes are counted, not listed")
}
