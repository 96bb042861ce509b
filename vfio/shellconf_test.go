package vfio

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func words(v shellVar) []string {
	var out []string
	for _, w := range v.words {
		out = append(out, w.word)
	}
	return out
}

// Assignments as bash sources them: = resets, += appends, values over
// several lines inside quotes or parentheses, comments in arrays; what is
// not a plain assignment is reported unread, not guessed at.
func TestShellAssignments(t *testing.T) {
	for _, c := range []struct {
		text   string
		want   []string
		unread int
	}{
		{`force_drivers+=" vfio_pci vfio "` + "\n" + `force_drivers+=" vfio_iommu_type1 "`, []string{"vfio_pci", "vfio", "vfio_iommu_type1"}, 0},
		{`force_drivers+=" vfio_pci "` + "\n" + `force_drivers="nvme"`, []string{"nvme"}, 0},
		{"MODULES=(\n  vfio_pci # for the GPU\n  vfio\n)", []string{"vfio_pci", "vfio"}, 0},
		{"MODULES=(vfio_pci)  # passthrough", []string{"vfio_pci"}, 0},
		{"MODULES='vfio_pci vfio'", []string{"vfio_pci", "vfio"}, 0},
		{"MODULES=vfio_pci", []string{"vfio_pci"}, 0},
		{"# MODULES=(vfio_pci)", nil, 0},
		{`[ -f /x ] && MODULES+=(vfio_pci)`, nil, 1},
		{`MODULES=($(cat /etc/mods))`, nil, 1},
		{`MODULES=(vfio_pci`, nil, 1},
	} {
		var v shellVar
		name := "MODULES"
		if strings.Contains(c.text, "force_drivers") {
			name = "force_drivers"
		}
		v.assign("/etc/x.conf", strings.Split(c.text, "\n"), name)
		require.Equal(t, c.want, words(v), c.text)
		require.Len(t, v.unread, c.unread, c.text)
	}
}

// An array that never closes, in a large file, is read in linear time.
func TestShellAssignmentUnclosedIsLinear(t *testing.T) {
	lines := append([]string{"MODULES=("}, strings.Split(strings.Repeat("vfio_pci\n", 200000), "\n")...)
	start := time.Now()
	var v shellVar
	v.assign("/etc/mkinitcpio.conf", lines, "MODULES")
	require.Len(t, v.unread, 1)
	require.Less(t, time.Since(start), 5*time.Second)
}
