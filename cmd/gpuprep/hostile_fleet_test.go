package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
)

// kubevirt config -i refuses a host whose report, made on the host (its
// gpuprep check over SSH, on a root whose vGPU type has a name with YAML
// and terminal escapes in it), holds a value that is not what it can be:
// exit 3, nothing emitted, the host and the field named, no raw control.
func TestKubeVirtConfigFromAFleetRefusesAHostileReport(t *testing.T) {
	r := newCLIRig(t)
	root := filepath.Join(r.env.Dir, "root-hostile-vgpu")
	if _, err := os.Stat(root); err != nil {
		b := fixture.New(root)
		fixture.MdevVGPU(b)
		require.NoError(t, b.Err())
		b.File(b.DevPath("0000:41:00.0")+"/mdev_supported_types/nvidia-223/name", "GRID T4-2Q\x1b]0;ALL HOSTS READY\x07\rmetadata: {ownerReferences: []}\n")
		require.NoError(t, b.Err())
		require.NoError(t, exec.Command("chmod", "-R", "a+rX", root).Run())
	}
	a := r.env.Start(t, "127.0.1.23")
	sshdtest.Trust(t, r.kh, false, a)
	inv := writeFile(t, "fleet.yaml", fmt.Sprintf(`apiVersion: gpuprep/v1
kind: Inventory
defaults: {user: %s}
hosts:
  - {name: vgpu-1, address: %s, port: %d, vars: {gpuprep_root: %s}}
`, r.env.User, a.Host, a.Port, root))
	for _, o := range []string{"yaml", "json"} {
		code, out, stderr := runCLI(append([]string{"kubevirt", "config", "-i", inv, "-o", o}, r.args()...)...)
		require.Equal(t, exitUnknown, code, stderr)
		require.Empty(t, out)
		require.Contains(t, stderr, `host "vgpu-1": report refused: gpus[1].vgpu.types[1].name "GRID T4-2Q\x1b]0;ALL HOSTS READY\x07\rmetadata: {ownerReferences: []}"`)
		require.Contains(t, stderr, "nothing emitted or applied")
		noRawControls(t, "stderr", stderr)
	}
}
