package vfio

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Holder is a process with a device node open.
type Holder struct {
	PID  int
	Comm string
	Path string // the device node, e.g. /dev/nvidia0
}

func (h Holder) String() string { return fmt.Sprintf("%d (%s: %s)", h.PID, h.Comm, h.Path) }

// Holders scans /proc/*/fd through the root for links to device nodes that
// match (e.g. /dev/nvidia*), one per process.
func Holders(root *host.Root, match func(node string) bool) []Holder {
	var out []Holder
	for _, pid := range root.Names("/proc") {
		n, err := strconv.Atoi(pid)
		if err != nil {
			continue
		}
		for _, fd := range root.Names("/proc/" + pid + "/fd") {
			t, err := root.Readlink("/proc/" + pid + "/fd/" + fd)
			if err != nil || !match(t) {
				continue
			}
			comm, _ := root.ReadString("/proc/" + pid + "/comm")
			out = append(out, Holder{PID: n, Comm: comm, Path: t})
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func holderList(hs []Holder) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.String())
	}
	return strings.Join(s, ", ")
}

// NVIDIANode matches the NVIDIA driver's device nodes (/dev/nvidia0,
// /dev/nvidiactl, /dev/nvidia-uvm, …).
func NVIDIANode(node string) bool { return strings.HasPrefix(node, "/dev/nvidia") }

// GroupNode matches /dev/vfio/<group>.
func GroupNode(group string) func(string) bool {
	return func(node string) bool { return node == "/dev/vfio/"+group }
}
