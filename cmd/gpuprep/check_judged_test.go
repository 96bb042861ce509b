package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckSaysWhatItJudged: check judges --mode, else the mode the node's
// kubelet labels it with, else nothing, and says which in one line; with
// nothing judged it exits 3, never 0 (hgx-h200, unlabelled, fails 9 checks
// of vm-passthrough and vm-vgpu: a CI gate without --mode passed on it).
func TestCheckSaysWhatItJudged(t *testing.T) {
	const label = "nvidia.com/gpu.workload.config"
	hgx := fixtureRoot(t, "hgx-h200")
	bound := fixtureRoot(t, "vfio-bound") // /etc/default/kubelet: --node-labels=…=vm-passthrough

	out, errs, code := gpuprep(t, "check", "--root", hgx)
	require.Equal(t, exitUnknown, code, errs)
	require.Contains(t, out, "9 fail")
	require.Contains(t, errs, "gpuprep: judged: no mode: no --mode, and no "+label+" in the kubelet's --node-labels; every mode is shown, none judged: exit 3")

	_, errs, code = gpuprep(t, "check", "--root", hgx, "--mode", "container")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, errs, "gpuprep: judged: container (from --mode)\n")

	out, errs, code = gpuprep(t, "check", "--root", bound, "-o", "json")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, `"mode": "vm-passthrough"`)
	require.Contains(t, errs, "gpuprep: judged: vm-passthrough (from the node's label "+label+"=vm-passthrough in /etc/default/kubelet; --mode overrides)\n")

	_, errs, code = gpuprep(t, "check", "--root", bound, "--mode", "vm-vgpu")
	require.Equal(t, exitNotReady, code, errs)
	require.Contains(t, errs, "gpuprep: judged: vm-vgpu (from --mode)\n")

	require.NoError(t, os.WriteFile(filepath.Join(bound, "etc/default/kubelet"), []byte("KUBELET_EXTRA_ARGS=\"--node-labels="+label+"=vm-passthru\"\n"), 0o644))
	_, errs, code = gpuprep(t, "check", "--root", bound)
	require.Equal(t, exitUnknown, code, errs)
	require.Contains(t, errs, "gpuprep: judged: no mode: the node's label "+label+"=vm-passthru in /etc/default/kubelet names none (see node.label)")
}

// TestCheckHelpListsExitCodes: the exit codes a CI gate reads are in
// gpuprep check --help.
func TestCheckHelpListsExitCodes(t *testing.T) {
	out, _, code := gpuprep(t, "check", "--help")
	require.Equal(t, exitOK, code)
	for _, l := range []string{"  0  ready for the mode judged\n", "  1  not ready: a check of the mode failed\n", "  2  usage error\n",
		"  3  not evaluated: a check could not be evaluated or was skipped (and nothing\n"} {
		require.Contains(t, out, l)
	}
}
