package main

import (
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kubeletargs"
	"github.com/gpuprep/gpuprep/preflight"
)

// judgedMode is the mode check judges and the line that says where it
// came from: --mode; else the workload label the node's kubelet registers
// it with (nvidia.com/gpu.workload.config in its --node-labels, read as
// the node.label check reads it); else none: every mode is shown and none
// is judged, and check exits 3, never 0, so that a CI gate without --mode
// on an unlabelled node cannot pass.
func judgedMode(root *host.Root, flag preflight.Mode) (preflight.Mode, string) {
	if flag != "" {
		return flag, "judged: " + string(flag) + " (from --mode)"
	}
	v, file, found := kubeletargs.Read(root).Lookup(preflight.WorkloadLabel)
	if found {
		if m, err := preflight.ParseMode(v); err == nil {
			return m, "judged: " + string(m) + " (from the node's label " + preflight.WorkloadLabel + "=" + v + " in " + file + "; --mode overrides)"
		}
		return "", "judged: no mode: the node's label " + preflight.WorkloadLabel + "=" + v + " in " + file +
			" names none (see node.label); every mode is shown, none judged: exit 3; name one with --mode"
	}
	return "", "judged: no mode: no --mode, and no " + preflight.WorkloadLabel + " in the kubelet's --node-labels; " +
		"every mode is shown, none judged: exit 3; name one with --mode (or label the node: gpuprep label --before-join --mode MODE)"
}
